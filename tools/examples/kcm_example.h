/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the KCM examples share: the message format (a 4-byte big-endian
 * length of the payload, then the payload), the parser for it as raw BPF
 * instructions (no compiler needed), and loopback TCP plumbing.  Each
 * example is otherwise complete on its own.
 */
#ifndef KCM_EXAMPLE_H
#define KCM_EXAMPLE_H

#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/bpf.h>
#include <linux/kcm.h>

#ifndef AF_KCM
#define AF_KCM 41
#endif

#define EX_HDR 4
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static inline void ex_die(const char *what)
{
	fprintf(stderr, "%s: %s\n", what, strerror(errno));
	exit(1);
}

/*
 * The parser "return load_word(skb, 0) + 4;" as raw eBPF instructions:
 * the message is its 4-byte length header plus that many bytes.
 */
static inline int ex_parser_raw(void)
{
	struct bpf_insn insns[] = {
		/* r6 = ctx: BPF_LD_ABS reads the skb in r6 */
		{ .code = BPF_ALU64 | BPF_MOV | BPF_X, .dst_reg = 6, .src_reg = 1 },
		/* r0 = ntohl(*(u32 *)(data + 0)); out of range: return 0 */
		{ .code = BPF_LD | BPF_W | BPF_ABS, .imm = 0 },
		/* r0 += 4: the header itself */
		{ .code = BPF_ALU64 | BPF_ADD | BPF_K, .dst_reg = 0, .imm = EX_HDR },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	union bpf_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.prog_type = BPF_PROG_TYPE_SOCKET_FILTER;
	attr.insns = (unsigned long)insns;
	attr.insn_cnt = ARRAY_SIZE(insns);
	attr.license = (unsigned long)"GPL";
	return syscall(__NR_bpf, BPF_PROG_LOAD, &attr, sizeof(attr));
}

static inline int ex_attach(int kcm, int tcp, int prog)
{
	struct kcm_attach att = { .fd = tcp, .bpf_fd = prog };

	return ioctl(kcm, SIOCKCMATTACH, &att);
}

static inline int ex_clone(int kcm)
{
	struct kcm_clone info = { .fd = -1 };

	if (ioctl(kcm, SIOCKCMCLONE, &info) < 0)
		return -1;
	return info.fd;
}

/* A fresh network namespace (or a test VM) starts with lo down. */
static inline void ex_lo_up(void)
{
	struct ifreq ifr = { .ifr_name = "lo" };
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	if (fd >= 0 && !ioctl(fd, SIOCGIFFLAGS, &ifr)) {
		ifr.ifr_flags |= IFF_UP;
		ioctl(fd, SIOCSIFFLAGS, &ifr);
	}
	if (fd >= 0)
		close(fd);
}

/* A loopback TCP listener on any port; the address goes to @sin. */
static inline int ex_listen(struct sockaddr_in *sin)
{
	socklen_t len = sizeof(*sin);
	int fd;

	ex_lo_up();
	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)sin, len) || listen(fd, 16) ||
	    getsockname(fd, (struct sockaddr *)sin, &len))
		ex_die("listen");
	return fd;
}

static inline int ex_connect(const struct sockaddr_in *sin)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;

	if (fd < 0 || connect(fd, (const struct sockaddr *)sin, sizeof(*sin)))
		ex_die("connect");
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

/*
 * Message @seq: header, then a 4-byte sequence number, then @plen - 4
 * bytes that depend on both, so that a torn or mixed message is noticed.
 */
static inline size_t ex_msg_build(char *buf, uint32_t seq, size_t plen)
{
	uint32_t hdr = htonl(plen), nseq = htonl(seq);
	size_t i;

	memcpy(buf, &hdr, EX_HDR);
	memcpy(buf + EX_HDR, &nseq, 4);
	for (i = 4; i < plen; i++)
		buf[EX_HDR + i] = (char)(seq * 31 + i);
	return EX_HDR + plen;
}

/* Checks a whole message; returns its sequence number or -1. */
static inline long ex_msg_check(const char *buf, size_t len)
{
	uint32_t hdr, seq;
	size_t i;

	if (len < EX_HDR + 4)
		return -1;
	memcpy(&hdr, buf, EX_HDR);
	memcpy(&seq, buf + EX_HDR, 4);
	seq = ntohl(seq);
	if (ntohl(hdr) + EX_HDR != len)
		return -1;
	for (i = 4; i < len - EX_HDR; i++)
		if (buf[EX_HDR + i] != (char)(seq * 31 + i))
			return -1;
	return seq;
}

static inline int ex_write_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = write(fd, buf, len);

		if (n <= 0)
			return -1;
		buf += n;
		len -= n;
	}
	return 0;
}

static inline int ex_read_full(int fd, char *buf, size_t len)
{
	while (len) {
		ssize_t n = read(fd, buf, len);

		if (n <= 0)
			return -1;
		buf += n;
		len -= n;
	}
	return 0;
}

/* Reads one framed message from a plain TCP socket; returns its size. */
static inline ssize_t ex_read_msg(int fd, char *buf, size_t cap)
{
	uint32_t hdr;

	if (ex_read_full(fd, buf, EX_HDR))
		return -1;
	memcpy(&hdr, buf, EX_HDR);
	hdr = ntohl(hdr);
	if (hdr > cap - EX_HDR || ex_read_full(fd, buf + EX_HDR, hdr))
		return -1;
	return EX_HDR + hdr;
}

#endif /* KCM_EXAMPLE_H */
