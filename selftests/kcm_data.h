/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers for the KCM data path selftests: loopback TCP pairs, parser
 * programs as raw BPF instructions, and self-checking messages.
 *
 * A test message is a 4-byte big-endian payload length followed by the
 * payload; the payload starts with a 4-byte sequence number and goes on
 * with bytes derived from it, so a message that arrives cut, merged or
 * shifted fails its check.
 */
#ifndef KCM_DATA_H
#define KCM_DATA_H

#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/time.h>

#include "kcm_lib.h"
#include "kcm_bpf.h"

#define KCM_HDR		4

/* r0 = ntohl(*(u32 *)(skb->data + imm)), or return 0 when out of range */
#define BPF_LD_ABS_W(i)		KCM_INSN(BPF_LD | BPF_W | BPF_ABS, 0, 0, 0, i)

/* Brings up lo: a new network namespace starts with it down. */
static inline void kcm_lo_up(void)
{
	struct ifreq ifr = { 0 };
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (fd >= 0 && !ioctl(fd, SIOCGIFFLAGS, &ifr)) {
		ifr.ifr_flags |= IFF_UP;
		ioctl(fd, SIOCSIFFLAGS, &ifr);
	}
	if (fd >= 0)
		close(fd);
}

/* A listening loopback TCP socket; its address goes to @sin. */
static inline int kcm_tcp_listener(struct sockaddr_in *sin)
{
	socklen_t len = sizeof(*sin);
	int l;

	kcm_lo_up();
	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	l = socket(AF_INET, SOCK_STREAM, 0);
	if (l < 0 || bind(l, (struct sockaddr *)sin, len) ||
	    listen(l, 64) || getsockname(l, (struct sockaddr *)sin, &len))
		return -1;
	return l;
}

/* A connected loopback TCP pair: @peer connects, @local is accepted. */
static inline int kcm_tcp_pair(int *peer, int *local)
{
	struct sockaddr_in sin;
	int l = kcm_tcp_listener(&sin), one = 1;

	if (l < 0)
		return -1;
	*peer = socket(AF_INET, SOCK_STREAM, 0);
	if (*peer < 0 || connect(*peer, (struct sockaddr *)&sin, sizeof(sin)))
		return -1;
	*local = accept(l, NULL, NULL);
	close(l);
	setsockopt(*peer, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return *local < 0 ? -1 : 0;
}

static inline int kcm_load_filter(const struct bpf_insn *insns, unsigned int n)
{
	static char log[4096];

	return kcm_bpf_load(BPF_PROG_TYPE_SOCKET_FILTER, 0, 0, insns, n,
			    log, sizeof(log));
}

/* The parser of the documentation: return load_word(skb, 0) + 4; */
static inline int kcm_parser_len4(void)
{
	const struct bpf_insn insns[] = {
		BPF_MOV64_REG(6, 1),
		BPF_LD_ABS_W(0),
		BPF_ADD64_IMM(0, KCM_HDR),
		BPF_EXIT_INSN(),
	};

	return kcm_load_filter(insns, ARRAY_SIZE(insns));
}

/* return skb->len < @min ? 0 : @ret; */
static inline int kcm_parser_min_len(int min, int ret)
{
	const struct bpf_insn insns[] = {
		BPF_LDX_MEM(BPF_W, 2, 1, 0),		/* r2 = skb->len */
		BPF_MOV64_IMM(0, 0),
		BPF_JMP32_IMM(BPF_JLT, 2, min, 1),
		BPF_MOV64_IMM(0, ret),
		BPF_EXIT_INSN(),
	};

	return kcm_load_filter(insns, ARRAY_SIZE(insns));
}

/* return @ret; */
static inline int kcm_parser_const(int ret)
{
	return kcm_parser_min_len(0, ret);
}

static inline int kcm_attach(int kcm, int fd, int prog)
{
	struct kcm_attach att = { .fd = fd, .bpf_fd = prog };

	return ioctl(kcm, SIOCKCMATTACH, &att);
}

static inline int kcm_unattach(int kcm, int fd)
{
	struct kcm_unattach un = { .fd = fd };

	return ioctl(kcm, SIOCKCMUNATTACH, &un);
}

static inline unsigned char kcm_msg_byte(uint32_t seq, size_t i)
{
	return (unsigned char)(seq * 131 + i * 7 + (i >> 8));
}

/* Writes message @seq with @plen payload bytes to @buf; returns its size. */
static inline size_t kcm_msg_build(char *buf, size_t plen, uint32_t seq)
{
	uint32_t hdr = htonl(plen), nseq = htonl(seq);
	size_t i;

	memcpy(buf, &hdr, KCM_HDR);
	for (i = 0; i < plen; i++)
		buf[KCM_HDR + i] = kcm_msg_byte(seq, i);
	if (plen >= 4)
		memcpy(buf + KCM_HDR, &nseq, 4);
	return KCM_HDR + plen;
}

/* Checks a received message; returns its sequence number or -1. */
static inline long kcm_msg_check(const char *buf, size_t len)
{
	uint32_t hdr, seq = 0;
	size_t i, plen;

	if (len < KCM_HDR)
		return -1;
	memcpy(&hdr, buf, KCM_HDR);
	plen = ntohl(hdr);
	if (plen + KCM_HDR != len)
		return -1;
	if (plen >= 4) {
		memcpy(&seq, buf + KCM_HDR, 4);
		seq = ntohl(seq);
	}
	for (i = plen >= 4 ? 4 : 0; i < plen; i++)
		if ((unsigned char)buf[KCM_HDR + i] != kcm_msg_byte(seq, i))
			return -1;
	return seq;
}

static inline int kcm_write_all(int fd, const char *buf, size_t len)
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

static inline int kcm_read_full(int fd, char *buf, size_t len)
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

/*
 * Reads one length-prefixed message from a TCP stream into @buf: its size,
 * -1 when it is longer than @cap, -2 on a read error or end of stream.
 */
static inline long kcm_tcp_read_msg(int fd, char *buf, size_t cap)
{
	uint32_t hdr;
	size_t plen;

	if (kcm_read_full(fd, buf, KCM_HDR))
		return -2;
	memcpy(&hdr, buf, KCM_HDR);
	plen = ntohl(hdr);
	if (KCM_HDR + plen > cap)
		return -1;
	if (kcm_read_full(fd, buf + KCM_HDR, plen))
		return -2;
	return KCM_HDR + plen;
}

/* Sends messages @first..@first+@n-1 of @plen bytes in one write. */
static inline int kcm_send_msgs(int fd, uint32_t first, int n, size_t plen)
{
	size_t size = (KCM_HDR + plen) * n, off = 0;
	char *buf = malloc(size);
	int i, ret;

	if (!buf)
		return -1;
	for (i = 0; i < n; i++)
		off += kcm_msg_build(buf + off, plen, first + i);
	ret = kcm_write_all(fd, buf, size);
	free(buf);
	return ret;
}

static inline void kcm_set_timeo(int fd, int optname, int ms)
{
	struct timeval tv = { .tv_sec = ms / 1000,
			      .tv_usec = (ms % 1000) * 1000 };

	setsockopt(fd, SOL_SOCKET, optname, &tv, sizeof(tv));
}

/*
 * A KCM socket of @type with the TCP socket @local attached (len4 parser);
 * its reads and those of @peer time out instead of hanging a test.
 */
static inline int kcm_with_tcp(int type, int *peer, int *local)
{
	int kcm = kcm_socket(type), prog = kcm_parser_len4();

	ASSERT_GE(kcm, 0);
	ASSERT_GE(prog, 0);
	ASSERT_OK(kcm_tcp_pair(peer, local));
	ASSERT_OK(kcm_attach(kcm, *local, prog));
	close(prog);
	kcm_set_timeo(kcm, SO_RCVTIMEO, 5000);
	kcm_set_timeo(*peer, SO_RCVTIMEO, 10000);
	return kcm;
}

/* recvmsg() into @buf; the message flags go to @flags_out. */
static inline ssize_t kcm_recv(int fd, void *buf, size_t len, int flags,
			       int *flags_out)
{
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n = recvmsg(fd, &msg, flags);

	if (flags_out)
		*flags_out = msg.msg_flags;
	return n;
}

/* Receives one whole message and checks it; returns its seq or -1. */
static inline long kcm_recv_check(int fd, char *buf, size_t cap)
{
	int flags;
	ssize_t n = kcm_recv(fd, buf, cap, 0, &flags);

	if (n < 0 || !(flags & MSG_EOR) || (flags & MSG_TRUNC))
		return -1;
	return kcm_msg_check(buf, n);
}

/* Waits up to @ms for @events on @fd; returns the revents. */
static inline int kcm_poll1(int fd, short events, int ms)
{
	struct pollfd p = { .fd = fd, .events = events };

	if (poll(&p, 1, ms) < 0)
		return -1;
	return p.revents;
}

/* Waits for child @pid; returns its exit status, or -1. */
static inline int kcm_wait_child(pid_t pid)
{
	int status;

	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

/* Polls @fd until SO_ERROR is set or @ms pass; returns SO_ERROR. */
static inline int kcm_wait_so_error(int fd, int ms)
{
	int err = 0;

	for (; ms > 0; ms -= 10) {
		err = kcm_sockopt_int(fd, SOL_SOCKET, SO_ERROR);
		if (err)
			return err;
		usleep(10000);
	}
	return 0;
}

#endif /* KCM_DATA_H */
