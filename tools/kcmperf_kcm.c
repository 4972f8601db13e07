// SPDX-License-Identifier: GPL-2.0
/*
 * kcmperf: the KCM side of the set-up.  Parsers (the documented eBPF
 * program, the same in classic BPF, the built-in length field parser, and
 * the one that frames on the distribution's module) and a mux of
 * opt.kcms KCM sockets with TCP sockets attached.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kcmperf.h"

/* Where the distribution module keeps the message offset: struct sk_buff's
 * cb[] (at 40) holds struct sk_skb_cb, whose strp_msg.offset is at 28.
 */
#define DISTRO_STRP_OFFSET	68
#define BPF_FUNC_PROBE_READ_KERNEL	113

/*
 * The parser "return load_word(skb, 0) + 4;" (kcm_util.h's), or for -P
 * distro "return load_word(skb, strp_offset) + 4;" as raw BPF.
 */
static int load_parser(void)
{
	static const struct bpf_insn distro[] = {
		/* r6 = skb; bpf_probe_read_kernel(fp - 8, 4, skb + 68) */
		{ .code = BPF_ALU64 | BPF_MOV | BPF_X, .dst_reg = 6,
		  .src_reg = 1 },
		{ .code = BPF_ALU64 | BPF_MOV | BPF_X, .dst_reg = 1,
		  .src_reg = 10 },
		{ .code = BPF_ALU64 | BPF_ADD | BPF_K, .dst_reg = 1, .imm = -8 },
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = 2, .imm = 4 },
		{ .code = BPF_ALU64 | BPF_MOV | BPF_X, .dst_reg = 3,
		  .src_reg = 6 },
		{ .code = BPF_ALU64 | BPF_ADD | BPF_K, .dst_reg = 3,
		  .imm = DISTRO_STRP_OFFSET },
		{ .code = BPF_JMP | BPF_CALL, .imm = BPF_FUNC_PROBE_READ_KERNEL },
		/* a failed read: r0 = 0, ask for more */
		{ .code = BPF_JMP | BPF_JEQ | BPF_K, .dst_reg = 0, .off = 2 },
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = 0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
		/* r0 = load_word(skb, offset) + 4 */
		{ .code = BPF_LDX | BPF_MEM | BPF_W, .dst_reg = 7,
		  .src_reg = 10, .off = -8 },
		{ .code = BPF_LD | BPF_W | BPF_IND, .src_reg = 7 },
		{ .code = BPF_ALU64 | BPF_ADD | BPF_K, .imm = 4 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	static char log[4096];
	int fd, err;

	if (opt.parser != PARSER_DISTRO) {
		fd = kcm_u_parser_len4();
		if (fd < 0)
			die_errno("bpf(BPF_PROG_LOAD)");
		return fd;
	}
	fd = kcm_u_bpf_load(BPF_PROG_TYPE_SOCKET_FILTER, 0, 0, distro,
			    ARRAY_SIZE(distro), log, sizeof(log));
	if (fd < 0) {
		err = errno;
		if (log[0])
			fprintf(stderr, "# kcmperf: verifier: %s\n", log);
		errno = err;
		die_errno("bpf(BPF_PROG_LOAD)");
	}
	return fd;
}

/* Attaches @tcp to the mux of @kcm with the parser of -P. */
void attach_tcp(int kcm, int tcp, int prog)
{
	static struct sock_filter cbpf[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 0),
		BPF_STMT(BPF_ALU | BPF_ADD | BPF_K, 4),
		BPF_STMT(BPF_RET | BPF_A, 0),
	};
	struct kcm_attach_ext ext = { .fd = tcp };

	switch (opt.parser) {
	case PARSER_EBPF:
	case PARSER_DISTRO:
		if (kcm_u_attach(kcm, tcp, prog))
			die_errno("ioctl(SIOCKCMATTACH)");
		return;
	case PARSER_CBPF:
		ext.bpf_type = KCM_BPF_TYPE_PROG;
		ext.fprog.len = ARRAY_SIZE(cbpf);
		ext.fprog.filter = cbpf;
		break;
	case PARSER_LENFIELD:
		ext.bpf_type = KCM_PARSER_LENFIELD;
		ext.lenfield.width = 4;
		ext.lenfield.adjust = 4;
		break;
	}
	if (ioctl(kcm, SIOCKCMATTACHEXT, &ext))
		die_errno("ioctl(SIOCKCMATTACHEXT)");
}

/* The program attach_tcp() wants for -P: a loaded eBPF one, or -1. */
int kcm_parser(void)
{
	if (opt.parser == PARSER_EBPF || opt.parser == PARSER_DISTRO)
		return load_parser();
	return -1;
}

/* A mux of opt.kcms KCM sockets, appended to kfd[]; the first's index. */
int kcm_socks(void)
{
	int first = n_kfd, i;

	for (i = 0; i < opt.kcms; i++) {
		int fd;

		if (!i) {
			fd = socket(AF_KCM, SOCK_DGRAM, KCMPROTO_CONNECTED);
			if (fd < 0)
				die_errno("socket(AF_KCM) (is kcm.ko loaded?)");
		} else {
			fd = kcm_u_clone(kfd[first]);
			if (fd < 0)
				die_errno("ioctl(SIOCKCMCLONE)");
		}
		if (opt.rcvbuf) {
			set_int(fd, SOL_SOCKET, SO_RCVBUF, (int)opt.rcvbuf);
			if (get_int(fd, SOL_SOCKET, SO_RCVBUF) < 2 * opt.rcvbuf)
				fprintf(stderr,
					"# kcmperf: KCM SO_RCVBUF %ld capped to %d: raise net.core.rmem_max\n",
					opt.rcvbuf,
					get_int(fd, SOL_SOCKET, SO_RCVBUF));
		}
		eff_rcvbuf = get_int(fd, SOL_SOCKET, SO_RCVBUF);
		/* A message may not outgrow the KCM socket's send buffer. */
		if (get_int(fd, SOL_SOCKET, SO_SNDBUF) < (int)opt.size &&
		    kcm_u_setsockopt_int(fd, SOL_SOCKET, SO_SNDBUFFORCE,
					 (int)opt.size))
			set_int(fd, SOL_SOCKET, SO_SNDBUF, (int)opt.size);
		kfd[n_kfd++] = fd;
	}
	return first;
}

/* A mux of opt.kcms KCM sockets (appended to kfd[]) with @tcp attached. */
int kcm_mux(const int *tcp, int n)
{
	int prog = kcm_parser(), first = kcm_socks(), i;

	for (i = 0; i < n; i++)
		attach_tcp(kfd[first], tcp[i], prog);
	if (prog >= 0)
		close(prog);
	return first;
}

/* The count of each status word of the psock lines of /proc/net/kcm. */
struct kcm_words {
	char word[16];
	unsigned long n;
};

static void kcm_words_add(struct kcm_words *w, int max, const char *s)
{
	char word[16];
	int i, len;

	while (sscanf(s, " %15s%n", word, &len) == 1) {
		s += len;
		word[strcspn(word, "-")] = 0;	/* Rsvd-<kcm> */
		for (i = 0; i < max && w[i].n; i++)
			if (!strcmp(w[i].word, word))
				break;
		if (i == max)
			continue;
		snprintf(w[i].word, sizeof(w[i].word), "%s", word);
		w[i].n++;
	}
}

/*
 * After a stall, what the module says, summed on one line of stderr: the
 * messages queued on the KCM sockets, what waits in the psocks' TCP
 * receive queues, and how many psocks show each status word.
 */
void kcm_proc_summary(void)
{
	unsigned long kcms = 0, kq = 0, psocks = 0, pq = 0;
	struct kcm_words w[8] = { 0 };
	unsigned long long v[4];
	char line[512], name[32];
	FILE *f = fopen("/proc/net/kcm", "r");
	int q[4], off, i;

	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		off = 0;
		if (sscanf(line, " %31s %llu %llu %llu %llu %d %d %d %d %n",
			   name, &v[0], &v[1], &v[2], &v[3], &q[0], &q[1],
			   &q[2], &q[3], &off) < 9 || !off)
			continue;
		if (!strncmp(name, "kcm-", 4)) {
			kcms++;
			kq += q[0];
		} else if (!strncmp(name, "psock-", 6)) {
			psocks++;
			pq += q[0];
			kcm_words_add(w, ARRAY_SIZE(w), line + off);
		}
	}
	fclose(f);
	fprintf(stderr,
		"# kcmperf: /proc/net/kcm: %lu KCM sockets, %lu messages queued; %lu psocks, %lu skbs in their TCP receive queues; psocks",
		kcms, kq, psocks, pq);
	for (i = 0; i < (int)ARRAY_SIZE(w) && w[i].n; i++)
		fprintf(stderr, " %s=%lu", w[i].word, w[i].n);
	fputc('\n', stderr);
}
