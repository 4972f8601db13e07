// SPDX-License-Identifier: GPL-2.0
/*
 * bpf_parser: the length parser loaded two ways, used the same way.
 *
 *   bpf_parser [-r | -o parser_len.bpf.o]
 *
 * -o (the default): the parser compiled from parser_len.bpf.c by clang,
 * loaded with libbpf (bpf_object__open_file, bpf_object__load).
 * -r: the same parser as raw instructions (kcm_u_parser_len4() of
 * kcm_util.h), for machines without clang or libbpf.
 *
 * Either way a KCM socket gets one TCP connection with that parser, the
 * peer writes 150 messages of 8 to 3000 bytes in a few large writes
 * (several messages per segment, messages across segments), and every
 * recv() must return exactly one whole message, in order.
 */
#include <bpf/libbpf.h>

#include "kcm_example.h"

#define NMSGS	150
#define PLEN(i)	(8 + ((i) * 211) % 2993)

/* Loads the program "kcm_len4" of @path with libbpf; returns its fd. */
static int load_object(const char *path, struct bpf_object **objp)
{
	struct bpf_program *prog;
	struct bpf_object *obj;

	obj = bpf_object__open_file(path, NULL);
	if (!obj || libbpf_get_error(obj)) {
		fprintf(stderr, "bpf_parser: cannot open %s\n", path);
		exit(1);
	}
	if (bpf_object__load(obj)) {
		fprintf(stderr, "bpf_parser: cannot load %s\n", path);
		exit(1);
	}
	prog = bpf_object__find_program_by_name(obj, "kcm_len4");
	if (!prog) {
		fprintf(stderr, "bpf_parser: no program kcm_len4 in %s\n", path);
		exit(1);
	}
	*objp = obj;
	return bpf_program__fd(prog);
}

/* The peer: all messages in writes of about 16 KB. */
static void send_all(int fd)
{
	static char buf[NMSGS * (KCM_U_HDR + 3000)];
	size_t len = 0, off;
	int i;

	for (i = 0; i < NMSGS; i++)
		len += kcm_u_msg_build(buf + len, PLEN(i), i);
	for (off = 0; off < len; off += 16384) {
		size_t n = len - off < 16384 ? len - off : 16384;

		if (kcm_u_write_all(fd, buf + off, n))
			ex_die("write");
	}
}

int main(int argc, char **argv)
{
	const char *path = "parser_len.bpf.o";
	struct bpf_object *obj = NULL;
	static char buf[KCM_U_HDR + 4096];
	int kcm, peer, tcp, prog, i, raw = 0, opt;
	long bytes = 0;

	while ((opt = getopt(argc, argv, "ro:")) != -1) {
		if (opt == 'r') {
			raw = 1;
		} else if (opt == 'o') {
			path = optarg;
		} else {
			fprintf(stderr, "usage: bpf_parser [-r | -o OBJECT]\n");
			return 2;
		}
	}
	prog = raw ? kcm_u_parser_len4() : load_object(path, &obj);
	if (prog < 0)
		ex_die("bpf(BPF_PROG_LOAD)");

	kcm = socket(AF_KCM, SOCK_SEQPACKET, KCMPROTO_CONNECTED);
	if (kcm < 0)
		ex_die("socket(AF_KCM)");
	kcm_u_set_timeo(kcm, SO_RCVTIMEO, 10000);
	if (kcm_u_tcp_pair(&peer, &tcp))
		ex_die("loopback TCP");
	if (kcm_u_attach(kcm, tcp, prog))
		ex_die("SIOCKCMATTACH");
	/* The psock holds its own reference on the program. */
	if (obj)
		bpf_object__close(obj);
	else
		close(prog);
	close(tcp);

	send_all(peer);
	for (i = 0; i < NMSGS; i++) {
		struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
		struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
		ssize_t n = recvmsg(kcm, &msg, 0);

		if (n < 0)
			ex_die("recvmsg");
		if (!(msg.msg_flags & MSG_EOR) || kcm_u_msg_check(buf, n) != i ||
		    n != (ssize_t)(KCM_U_HDR + PLEN(i))) {
			fprintf(stderr, "bpf_parser: message %d: %zd bytes, not the one sent\n",
				i, n);
			return 1;
		}
		bytes += n;
	}
	printf("bpf_parser (%s): %d messages, %ld bytes, each recv() one whole message\n",
	       raw ? "raw instructions" : path, NMSGS, bytes);
	close(kcm);
	close(peer);
	return 0;
}
