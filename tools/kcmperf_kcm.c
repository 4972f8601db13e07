// SPDX-License-Identifier: GPL-2.0
/*
 * kcmperf: the KCM side of the set-up.  Parsers (the documented eBPF
 * program, the same in classic BPF, the built-in length field parser,
 * one that checks every header as a careful application would, and the
 * one that frames on the distribution's module), what an eBPF parser
 * costs a run (BPF_PROG_TEST_RUN), and a mux of opt.kcms KCM sockets
 * with TCP sockets attached.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kcmperf.h"

double parser_ns = -1;

#define BPF_FUNC_MAP_LOOKUP_ELEM	1
#define BPF_FUNC_SKB_LOAD_BYTES		26
#define PARSER_TEST_RUNS		100000
#define PARSER_TEST_BYTES		64	/* of the message, after ETH_HLEN */
#define ETH_HLEN			14

/* What -P check knows of a source: the lengths its headers may carry. */
struct check_range {
	uint32_t min;
	uint32_t max;
};

/*
 * -P check's map: for each source (a connection, up to SCALE_MAX_CONNS of
 * them in scale) its range.
 */
static int check_map(void)
{
	struct check_range r = { .min = HDR - 4, .max = opt.size - 4 };
	uint32_t key, n = opt.mode == MODE_SCALE ? SCALE_MAX_CONNS : opt.conns;
	union bpf_attr attr;
	int fd;

	memset(&attr, 0, sizeof(attr));
	attr.map_type = BPF_MAP_TYPE_ARRAY;
	attr.key_size = sizeof(key);
	attr.value_size = sizeof(r);
	attr.max_entries = n;
	fd = kcm_u_bpf(BPF_MAP_CREATE, &attr);
	if (fd < 0)
		die_errno("bpf(BPF_MAP_CREATE)");
	for (key = 0; key < n; key++) {
		memset(&attr, 0, sizeof(attr));
		attr.map_fd = fd;
		attr.key = (unsigned long)&key;
		attr.value = (unsigned long)&r;
		attr.flags = BPF_ANY;
		if (kcm_u_bpf(BPF_MAP_UPDATE_ELEM, &attr))
			die_errno("bpf(BPF_MAP_UPDATE_ELEM)");
	}
	return fd;
}

/*
 * -P check: the length parser of a careful application.  The 16-byte
 * header (length, source, sequence number) is copied out whole; the
 * length must lie within the range the source's entry of an array map
 * allows, the source must have an entry, the sequence number must be
 * below 2^48.  Returns the message length, 0 while fewer than 16 bytes
 * are there, or -EBADMSG, -EMSGSIZE, -EPROTO.
 */
static int load_check_parser(char *log, unsigned int log_size)
{
	int map = check_map(), fd;
	const struct bpf_insn insns[] = {
		/* 0: bpf_skb_load_bytes(skb, 0, fp - 16, 16) */
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = 2, .imm = 0 },
		{ .code = BPF_ALU64 | BPF_MOV | BPF_X, .dst_reg = 3,
		  .src_reg = 10 },
		{ .code = BPF_ALU64 | BPF_ADD | BPF_K, .dst_reg = 3, .imm = -16 },
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = 4, .imm = HDR },
		{ .code = BPF_JMP | BPF_CALL, .imm = BPF_FUNC_SKB_LOAD_BYTES },
		/* 5: not 16 bytes yet: ask for more */
		{ .code = BPF_JMP | BPF_JEQ | BPF_K, .dst_reg = 0, .off = 2 },
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = 0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
		/* 8: r7 = ntohl(length), r8 = source */
		{ .code = BPF_LDX | BPF_MEM | BPF_W, .dst_reg = 7,
		  .src_reg = 10, .off = -16 },
		{ .code = BPF_ALU | BPF_END | BPF_TO_BE, .dst_reg = 7,
		  .imm = 32 },
		{ .code = BPF_LDX | BPF_MEM | BPF_W, .dst_reg = 8,
		  .src_reg = 10, .off = -12 },
		/* 11: within what any message may be */
		{ .code = BPF_JMP | BPF_JLT | BPF_K, .dst_reg = 7,
		  .imm = HDR - 4, .off = 18 },
		{ .code = BPF_JMP | BPF_JGT | BPF_K, .dst_reg = 7,
		  .imm = MAX_SIZE - 4, .off = 19 },
		/* 13: r0 = map[source] */
		{ .code = BPF_STX | BPF_MEM | BPF_W, .dst_reg = 10,
		  .src_reg = 8, .off = -20 },
		{ .code = BPF_LD | BPF_DW | BPF_IMM, .dst_reg = 1,
		  .src_reg = BPF_PSEUDO_MAP_FD, .imm = map },
		{ 0 },
		{ .code = BPF_ALU64 | BPF_MOV | BPF_X, .dst_reg = 2,
		  .src_reg = 10 },
		{ .code = BPF_ALU64 | BPF_ADD | BPF_K, .dst_reg = 2, .imm = -20 },
		{ .code = BPF_JMP | BPF_CALL, .imm = BPF_FUNC_MAP_LOOKUP_ELEM },
		/* 19: an unknown source */
		{ .code = BPF_JMP | BPF_JEQ | BPF_K, .dst_reg = 0, .off = 14 },
		/* 20: within the source's range */
		{ .code = BPF_LDX | BPF_MEM | BPF_W, .dst_reg = 1,
		  .src_reg = 0, .off = 0 },
		{ .code = BPF_JMP | BPF_JLT | BPF_X, .dst_reg = 7,
		  .src_reg = 1, .off = 8 },
		{ .code = BPF_LDX | BPF_MEM | BPF_W, .dst_reg = 1,
		  .src_reg = 0, .off = 4 },
		{ .code = BPF_JMP | BPF_JGT | BPF_X, .dst_reg = 7,
		  .src_reg = 1, .off = 8 },
		/* 24: the sequence number's high word below 2^16 */
		{ .code = BPF_LDX | BPF_MEM | BPF_W, .dst_reg = 1,
		  .src_reg = 10, .off = -4 },
		{ .code = BPF_ALU64 | BPF_RSH | BPF_K, .dst_reg = 1, .imm = 16 },
		{ .code = BPF_JMP | BPF_JNE | BPF_K, .dst_reg = 1, .off = 3 },
		/* 27: the header and what it counts */
		{ .code = BPF_ALU64 | BPF_MOV | BPF_X, .dst_reg = 0,
		  .src_reg = 7 },
		{ .code = BPF_ALU64 | BPF_ADD | BPF_K, .dst_reg = 0, .imm = 4 },
		{ .code = BPF_JMP | BPF_EXIT },
		/* 30: bad length or sequence number */
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = 0,
		  .imm = -EBADMSG },
		{ .code = BPF_JMP | BPF_EXIT },
		/* 32: longer than the source may send */
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = 0,
		  .imm = -EMSGSIZE },
		{ .code = BPF_JMP | BPF_EXIT },
		/* 34: no such source */
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = 0,
		  .imm = -EPROTO },
		{ .code = BPF_JMP | BPF_EXIT },
	};

	fd = kcm_u_bpf_load(BPF_PROG_TYPE_SOCKET_FILTER, 0, 0, insns,
			    ARRAY_SIZE(insns), log, log_size);
	close(map);	/* the program holds it */
	return fd;
}

/*
 * What one run of eBPF parser @prog takes, in ns: BPF_PROG_TEST_RUN over
 * the first bytes of a message (behind the Ethernet header the test run
 * strips), PARSER_TEST_RUNS times.  -1 when it cannot be measured.
 */
static double parser_cost(int prog)
{
	char data[ETH_HLEN + PARSER_TEST_BYTES] = { 0 };
	uint32_t len = htonl(opt.size - 4), src = 0;
	uint64_t seq = 1;
	union bpf_attr attr;

	/* a header is all a parser reads */
	memcpy(data + ETH_HLEN, &len, 4);
	memcpy(data + ETH_HLEN + 4, &src, 4);
	memcpy(data + ETH_HLEN + 8, &seq, 8);
	memset(&attr, 0, sizeof(attr));
	attr.test.prog_fd = prog;
	attr.test.data_in = (unsigned long)data;
	attr.test.data_size_in = sizeof(data);
	attr.test.repeat = PARSER_TEST_RUNS;
	if (kcm_u_bpf(BPF_PROG_TEST_RUN, &attr)) {
		fprintf(stderr, "# kcmperf: BPF_PROG_TEST_RUN: %s\n",
			strerror(errno));
		return -1;
	}
	if (attr.test.retval != opt.size) {
		fprintf(stderr, "# kcmperf: the parser's test run returned %d, not %zu\n",
			(int)attr.test.retval, opt.size);
		return -1;
	}
	return attr.test.duration;
}

/* Where the distribution module keeps the message offset: struct sk_buff's
 * cb[] (at 40) holds struct sk_skb_cb, whose strp_msg.offset is at 28.
 */
#define DISTRO_STRP_OFFSET	68
#define BPF_FUNC_PROBE_READ_KERNEL	113

/*
 * The parser "return load_word(skb, 0) + 4;" (kcm_util.h's), for -P check
 * load_check_parser()'s, or for -P distro "return load_word(skb,
 * strp_offset) + 4;" as raw BPF.
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
	static char log[16384];
	int fd, err;

	if (opt.parser == PARSER_EBPF)
		fd = kcm_u_parser_len4();
	else if (opt.parser == PARSER_CHECK)
		fd = load_check_parser(log, sizeof(log));
	else
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
	case PARSER_CHECK:
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

/*
 * The program attach_tcp() wants for -P: a loaded eBPF one (its cost in
 * parser_ns), or -1.
 */
int kcm_parser(void)
{
	int fd;

	if (opt.parser == PARSER_CBPF || opt.parser == PARSER_LENFIELD)
		return -1;
	fd = load_parser();
	if (parser_ns < 0)
		parser_ns = parser_cost(fd);
	return fd;
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
