/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers for the KCM data path selftests, on top of kcm_util.h (the TCP
 * pairs, the parser, the self-checking messages they share with the tools
 * and examples): parser programs that only tests want, a KCM socket with
 * a connection attached, receiving and checking, waiting.
 */
#ifndef KCM_DATA_H
#define KCM_DATA_H

#include <poll.h>
#include <stdint.h>
#include <sys/socket.h>

#include "kcm_lib.h"
#include "kcm_bpf.h"

/* r0 = ntohl(*(u32 *)(skb->data + imm)), or return 0 when out of range */
#define BPF_LD_ABS_W(i)		KCM_INSN(BPF_LD | BPF_W | BPF_ABS, 0, 0, 0, i)

static inline int kcm_load_filter(const struct bpf_insn *insns, unsigned int n)
{
	static char log[4096];

	return kcm_u_bpf_load(BPF_PROG_TYPE_SOCKET_FILTER, 0, 0, insns, n,
			      log, sizeof(log));
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

/* Sends messages @first..@first+@n-1 of @plen bytes in one write. */
static inline int kcm_send_msgs(int fd, uint32_t first, int n, size_t plen)
{
	size_t size = (KCM_U_HDR + plen) * n, off = 0;
	char *buf = malloc(size);
	int i, ret;

	if (!buf)
		return -1;
	for (i = 0; i < n; i++)
		off += kcm_u_msg_build(buf + off, plen, first + i);
	ret = kcm_u_write_all(fd, buf, size);
	free(buf);
	return ret;
}

/*
 * A KCM socket of @type with the TCP socket @local attached (len4 parser);
 * its reads and those of @peer time out instead of hanging a test.
 */
static inline int kcm_with_tcp(int type, int *peer, int *local)
{
	int kcm = kcm_socket(type), prog = kcm_u_parser_len4();

	ASSERT_GE(kcm, 0);
	ASSERT_GE(prog, 0);
	ASSERT_OK(kcm_u_tcp_pair(peer, local));
	ASSERT_OK(kcm_u_attach(kcm, *local, prog));
	close(prog);
	kcm_u_set_timeo(kcm, SO_RCVTIMEO, 5000);
	kcm_u_set_timeo(*peer, SO_RCVTIMEO, 10000);
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
	return kcm_u_msg_check(buf, n);
}

/*
 * Lets KCM socket @fd send messages of up to @len bytes: its send buffer
 * bounds a message (SO_SNDBUFFORCE, as root: past net.core.wmem_max).
 */
static inline int kcm_sndbuf_for(int fd, size_t len)
{
	int half = (int)((len + 1) / 2);	/* the kernel doubles it */

	return setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &half, sizeof(half));
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
		err = kcm_u_getsockopt_int(fd, SOL_SOCKET, SO_ERROR);
		if (err)
			return err;
		usleep(10000);
	}
	return 0;
}

#endif /* KCM_DATA_H */
