// SPDX-License-Identifier: GPL-2.0
/*
 * KCM receive path: attaching TCP sockets, framing with the BPF parser,
 * parser errors, delivery over several KCM sockets, recvmsg semantics,
 * unattach and teardown.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>

#include "kcm_data.h"

#define BIG	(1 << 20)

static char rbuf[BIG + 64];

TEST(attach_bad_fds)
{
	int kcm = kcm_socket(SOCK_DGRAM), prog = kcm_u_parser_len4();
	int peer, local, file;

	ASSERT_GE(prog, 0);
	ASSERT_OK(kcm_u_tcp_pair(&peer, &local));
	file = open("/proc/self/stat", O_RDONLY);
	ASSERT_GE(file, 0);

	ASSERT_ERRNO(kcm_u_attach(kcm, -1, prog), ENOENT);
	ASSERT_ERRNO(kcm_u_attach(kcm, 12345, prog), ENOENT);
	ASSERT_ERRNO(kcm_u_attach(kcm, file, prog), ENOENT);
	ASSERT_ERRNO(kcm_u_attach(kcm, local, -1), EBADF);
	ASSERT_ERRNO(kcm_u_attach(kcm, local, 12345), EBADF);
	ASSERT_ERRNO(kcm_u_attach(kcm, local, file), EINVAL);
	ASSERT_ERRNO(ioctl(kcm, SIOCKCMATTACH, NULL), EFAULT);
	ASSERT_ERRNO(ioctl(kcm, SIOCKCMUNATTACH, NULL), EFAULT);
	/* Nothing was attached by any of these. */
	ASSERT_ERRNO(kcm_u_unattach(kcm, local), ENOENT);
	ASSERT_OK(kcm_u_attach(kcm, local, prog));
	close(kcm);
}

TEST(attach_wrong_program_type)
{
	const struct bpf_insn insns[] = {
		BPF_MOV64_IMM(0, 0),
		BPF_EXIT_INSN(),
	};
	int kcm = kcm_socket(SOCK_DGRAM), peer, local, prog, map;

	ASSERT_OK(kcm_u_tcp_pair(&peer, &local));
	prog = kcm_u_bpf_load(BPF_PROG_TYPE_SCHED_CLS, 0, 0, insns,
			      ARRAY_SIZE(insns), NULL, 0);
	ASSERT_GE(prog, 0);
	map = kcm_bpf_array_map(4);
	ASSERT_GE(map, 0);
	ASSERT_ERRNO(kcm_u_attach(kcm, local, prog), EINVAL);
	ASSERT_ERRNO(kcm_u_attach(kcm, local, map), EINVAL);
	close(kcm);
}

TEST(attach_wrong_sockets)
{
	int kcm = kcm_socket(SOCK_DGRAM), other = kcm_socket(SOCK_DGRAM);
	int prog = kcm_u_parser_len4();
	int udp = socket(AF_INET, SOCK_DGRAM, 0);
	int fresh = socket(AF_INET, SOCK_STREAM, 0);
	int unix_s = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_in sin;
	int listener = kcm_u_tcp_listener(&sin);

	ASSERT_GE(prog, 0);
	ASSERT_GE(listener, 0);
	ASSERT_ERRNO(kcm_u_attach(kcm, udp, prog), EOPNOTSUPP);
	ASSERT_ERRNO(kcm_u_attach(kcm, unix_s, prog), EOPNOTSUPP);
	ASSERT_ERRNO(kcm_u_attach(kcm, fresh, prog), EOPNOTSUPP);
	ASSERT_ERRNO(kcm_u_attach(kcm, listener, prog), EOPNOTSUPP);
	/* A KCM socket is never attached, neither itself nor another. */
	ASSERT_ERRNO(kcm_u_attach(kcm, kcm, prog), EOPNOTSUPP);
	ASSERT_ERRNO(kcm_u_attach(kcm, other, prog), EOPNOTSUPP);
	close(kcm);
	close(other);
}

TEST(attach_twice)
{
	int kcm = kcm_socket(SOCK_DGRAM), other = kcm_socket(SOCK_DGRAM);
	int prog = kcm_u_parser_len4(), peer, local, c;

	ASSERT_OK(kcm_u_tcp_pair(&peer, &local));
	ASSERT_OK(kcm_u_attach(kcm, local, prog));
	ASSERT_ERRNO(kcm_u_attach(kcm, local, prog), EALREADY);
	ASSERT_ERRNO(kcm_u_attach(other, local, prog), EALREADY);
	c = kcm_u_clone(kcm);
	ASSERT_GE(c, 0);
	ASSERT_ERRNO(kcm_u_attach(c, local, prog), EALREADY);
	/* Only a socket of the owning mux can unattach it. */
	ASSERT_ERRNO(kcm_u_unattach(other, local), ENOENT);
	ASSERT_OK(kcm_u_unattach(c, local));
	ASSERT_ERRNO(kcm_u_unattach(kcm, local), ENOENT);
	ASSERT_OK(kcm_u_attach(other, local, prog));
	close(kcm);
	close(c);
	close(other);
}

/* Three messages in one TCP segment: each starts at offset 0. */
TEST(recv_coalesced)
{
	int peer, local, kcm = kcm_with_tcp(SOCK_DGRAM, &peer, &local);
	int i;

	ASSERT_OK(kcm_send_msgs(peer, 100, 3, 20));
	for (i = 0; i < 3; i++)
		ASSERT_EQ(kcm_recv_check(kcm, rbuf, sizeof(rbuf)), 100 + i);
	ASSERT_ERRNO(recv(kcm, rbuf, 1, MSG_DONTWAIT), EAGAIN);
	close(kcm);
}

/*
 * Messages that straddle TCP segments: the next message starts in the
 * middle of a later segment.
 */
TEST_DIFFERS(recv_straddling,
	     "the parser sees the segment, not the message: load_word(skb, 0) mis-frames")
{
	int peer, local, kcm = kcm_with_tcp(SOCK_DGRAM, &peer, &local);
	char buf[4 * 64];
	size_t len = 0;
	int i;

	for (i = 0; i < 4; i++)
		len += kcm_u_msg_build(buf + len, 40 + i * 3, i);
	ASSERT_OK(kcm_u_write_all(peer, buf, 70));
	usleep(100000);
	ASSERT_OK(kcm_u_write_all(peer, buf + 70, 30));
	usleep(100000);
	ASSERT_OK(kcm_u_write_all(peer, buf + 100, len - 100));
	for (i = 0; i < 4; i++) {
		long seq = kcm_recv_check(kcm, rbuf, sizeof(rbuf));

		if (seq != i)
			TH_LOG("message %d: got %ld errno %d", i, seq, errno);
		ASSERT_EQ(seq, i);
	}
	close(kcm);
}

/* One message in many small writes, the header split byte by byte. */
TEST(recv_split)
{
	int peer, local, kcm = kcm_with_tcp(SOCK_DGRAM, &peer, &local);
	char msg[64];
	size_t len = kcm_u_msg_build(msg, 40, 7), i;

	for (i = 0; i < len; i++) {
		ASSERT_EQ(write(peer, msg + i, 1), 1);
		usleep(2000);
	}
	ASSERT_EQ(kcm_recv_check(kcm, rbuf, sizeof(rbuf)), 7);
	close(kcm);
}

TEST(recv_queued_before_attach)
{
	int kcm = kcm_socket(SOCK_DGRAM), prog = kcm_u_parser_len4();
	int peer, local;

	ASSERT_OK(kcm_u_tcp_pair(&peer, &local));
	ASSERT_OK(kcm_send_msgs(peer, 1, 2, 100));
	usleep(100000);
	kcm_u_set_timeo(kcm, SO_RCVTIMEO, 5000);
	ASSERT_OK(kcm_u_attach(kcm, local, prog));
	ASSERT_EQ(kcm_recv_check(kcm, rbuf, sizeof(rbuf)), 1);
	ASSERT_EQ(kcm_recv_check(kcm, rbuf, sizeof(rbuf)), 2);
	close(kcm);
}

/*
 * Sizes from empty to 1 MB, byte exact, in order on one connection.  A
 * message may not exceed the TCP socket's receive buffer, so the test
 * sets one large enough (as kcm.rst tells applications to).
 */
TEST(recv_sizes)
{
	static const size_t sizes[] = { 0, 1, 3, 4, 63, 64, 1000, 2044,
					2045, 4096, 16384, 65536, 100000,
					262144, BIG };
	int kcm = kcm_socket(SOCK_SEQPACKET), prog = kcm_u_parser_len4();
	int peer, local, rcvbuf = 2 * BIG;
	char *msg = malloc(BIG + 64);
	unsigned int i;
	pid_t pid;

	ASSERT_TRUE(msg);
	ASSERT_OK(kcm_u_tcp_pair(&peer, &local));
	ASSERT_OK(setsockopt(local, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf,
			     sizeof(rcvbuf)));
	ASSERT_OK(kcm_u_attach(kcm, local, prog));
	kcm_u_set_timeo(kcm, SO_RCVTIMEO, 5000);
	pid = fork();
	ASSERT_GE(pid, 0);
	if (!pid) {
		for (i = 0; i < ARRAY_SIZE(sizes); i++) {
			size_t len = kcm_u_msg_build(msg, sizes[i],
						    sizes[i] >= 4 ? i : 0);

			if (kcm_u_write_all(peer, msg, len))
				_exit(1);
		}
		_exit(0);
	}
	for (i = 0; i < ARRAY_SIZE(sizes); i++) {
		int flags;
		ssize_t n = kcm_recv(kcm, rbuf, sizeof(rbuf), 0, &flags);

		ASSERT_EQ(n, KCM_U_HDR + sizes[i]);
		ASSERT_TRUE(flags & MSG_EOR);
		if (sizes[i] >= 4)
			ASSERT_EQ(kcm_u_msg_check(rbuf, n), i);
		else
			ASSERT_EQ(kcm_u_msg_check(rbuf, n), 0);
	}
	ASSERT_OK(waitpid(pid, NULL, 0));
	free(msg);
	close(kcm);
}

TEST(recv_dgram_short_buffer)
{
	int peer, local, kcm = kcm_with_tcp(SOCK_DGRAM, &peer, &local);
	int flags;

	ASSERT_OK(kcm_send_msgs(peer, 1, 3, 96));
	/* The record ends there (MSG_EOR): the rest of it is discarded. */
	ASSERT_EQ(kcm_recv(kcm, rbuf, 10, 0, &flags), 10);
	EXPECT_TRUE(flags & MSG_TRUNC);
	EXPECT_TRUE(flags & MSG_EOR);
	ASSERT_EQ(kcm_u_msg_check(rbuf, 10), -1);
	/* As upstream: the MSG_TRUNC flag does not change the return value. */
	ASSERT_EQ(kcm_recv(kcm, rbuf, 10, MSG_TRUNC, &flags), 10);
	EXPECT_TRUE(flags & MSG_TRUNC);
	ASSERT_EQ(kcm_recv_check(kcm, rbuf, sizeof(rbuf)), 3);
	close(kcm);
}

TEST_DIFFERS(recv_seqpacket_pieces,
	     "since 6.1 upstream drops the rest of a SEQPACKET message after a short read")
{
	int peer, local, kcm = kcm_with_tcp(SOCK_SEQPACKET, &peer, &local);
	char msg[200];
	size_t len = kcm_u_msg_build(msg, 96, 5);
	int flags;

	ASSERT_OK(kcm_send_msgs(peer, 5, 2, 96));
	ASSERT_EQ(kcm_recv(kcm, rbuf, 30, 0, &flags), 30);
	EXPECT_TRUE(!(flags & (MSG_EOR | MSG_TRUNC)));
	ASSERT_EQ(kcm_recv(kcm, rbuf + 30, 50, 0, &flags), 50);
	EXPECT_TRUE(!(flags & MSG_EOR));
	ASSERT_EQ(kcm_recv(kcm, rbuf + 80, 100, 0, &flags), len - 80);
	EXPECT_TRUE(flags & MSG_EOR);
	ASSERT_EQ(memcmp(rbuf, msg, len), 0);
	ASSERT_EQ(kcm_recv_check(kcm, rbuf, sizeof(rbuf)), 6);
	close(kcm);
}

TEST(recv_peek)
{
	int peer, local, kcm = kcm_with_tcp(SOCK_DGRAM, &peer, &local);
	int flags;

	ASSERT_OK(kcm_send_msgs(peer, 9, 1, 50));
	ASSERT_EQ(kcm_recv(kcm, rbuf, sizeof(rbuf), MSG_PEEK, &flags), 54);
	ASSERT_EQ(kcm_u_msg_check(rbuf, 54), 9);
	ASSERT_EQ(kcm_recv(kcm, rbuf, 8, MSG_PEEK, &flags), 8);
	ASSERT_EQ(kcm_recv_check(kcm, rbuf, sizeof(rbuf)), 9);
	ASSERT_ERRNO(recv(kcm, rbuf, 1, MSG_DONTWAIT), EAGAIN);
	close(kcm);
}

TEST(recv_nonblocking_and_timeout)
{
	int kcm = kcm_socket(SOCK_DGRAM);
	uint64_t t0;
	long ms;

	ASSERT_ERRNO(recv(kcm, rbuf, 1, MSG_DONTWAIT), EAGAIN);
	ASSERT_OK(fcntl(kcm, F_SETFL, O_NONBLOCK));
	ASSERT_ERRNO(recv(kcm, rbuf, 1, 0), EAGAIN);
	ASSERT_OK(fcntl(kcm, F_SETFL, 0));
	kcm_u_set_timeo(kcm, SO_RCVTIMEO, 200);
	t0 = kcm_u_now_ns();
	ASSERT_ERRNO(recv(kcm, rbuf, 1, 0), EAGAIN);
	ms = kcm_u_ms_since(t0);
	EXPECT_GE(ms, 150);
	close(kcm);
}

TEST(recv_poll)
{
	int peer, local, kcm = kcm_with_tcp(SOCK_DGRAM, &peer, &local);

	EXPECT_EQ(kcm_poll1(kcm, POLLIN, 0) & POLLIN, 0);
	ASSERT_OK(kcm_send_msgs(peer, 1, 1, 10));
	ASSERT_TRUE(kcm_poll1(kcm, POLLIN, 5000) & POLLIN);
	ASSERT_EQ(kcm_recv_check(kcm, rbuf, sizeof(rbuf)), 1);
	EXPECT_EQ(kcm_poll1(kcm, POLLIN, 0) & POLLIN, 0);
	close(kcm);
}

/* A blocked reader is woken by a message from another task. */
TEST(recv_blocking_wakeup)
{
	int peer, local, kcm = kcm_with_tcp(SOCK_DGRAM, &peer, &local);
	pid_t pid = fork();

	ASSERT_GE(pid, 0);
	if (!pid) {
		usleep(200000);
		_exit(kcm_send_msgs(peer, 3, 1, 30) ? 1 : 0);
	}
	ASSERT_EQ(kcm_recv_check(kcm, rbuf, sizeof(rbuf)), 3);
	ASSERT_OK(waitpid(pid, NULL, 0));
	close(kcm);
}

/* The parser's negative return is the error on the TCP socket. */
TEST(parser_error_posted)
{
	int kcm = kcm_socket(SOCK_DGRAM), bad = kcm_parser_const(-EBADMSG);
	int good = kcm_u_parser_len4(), p1, l1, p2, l2;

	ASSERT_OK(kcm_u_tcp_pair(&p1, &l1));
	ASSERT_OK(kcm_u_tcp_pair(&p2, &l2));
	ASSERT_OK(kcm_u_attach(kcm, l1, bad));
	ASSERT_OK(kcm_u_attach(kcm, l2, good));
	kcm_u_set_timeo(kcm, SO_RCVTIMEO, 5000);
	ASSERT_OK(kcm_send_msgs(p1, 1, 1, 10));
	ASSERT_TRUE(kcm_poll1(l1, POLLERR, 5000) & POLLERR);
	ASSERT_EQ(kcm_wait_so_error(l1, 100), EBADMSG);
	/* The other connection carries on. */
	ASSERT_OK(kcm_send_msgs(p2, 2, 1, 10));
	ASSERT_EQ(kcm_recv_check(kcm, rbuf, sizeof(rbuf)), 2);
	ASSERT_ERRNO(recv(kcm, rbuf, 1, MSG_DONTWAIT), EAGAIN);
	close(kcm);
}

TEST_DIFFERS(parser_error_out_of_range,
	     "the parser's return is posted unchecked: SO_ERROR becomes negative")
{
	/* Not errnos user space knows: INT_MIN, -ERESTARTSYS, just past. */
	static const int rets[] = { INT_MIN, -512, -134 };
	int kcm = kcm_socket(SOCK_DGRAM), peer, local;
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(rets); i++) {
		ASSERT_OK(kcm_u_tcp_pair(&peer, &local));
		ASSERT_OK(kcm_u_attach(kcm, local, kcm_parser_const(rets[i])));
		ASSERT_OK(kcm_send_msgs(peer, 1, 1, 10));
		ASSERT_EQ(kcm_wait_so_error(local, 5000), EPROTO);
	}
	close(kcm);
}

TEST(parser_too_big)
{
	int kcm = kcm_socket(SOCK_DGRAM), prog = kcm_u_parser_len4();
	int peer, local, rcvbuf = 65536;
	char hdr[8] = { 0x10, 0, 0, 0 };	/* 256 MB */

	ASSERT_OK(kcm_u_tcp_pair(&peer, &local));
	ASSERT_OK(setsockopt(local, SOL_SOCKET, SO_RCVBUF, &rcvbuf,
			     sizeof(rcvbuf)));
	ASSERT_OK(kcm_u_attach(kcm, local, prog));
	ASSERT_EQ(write(peer, hdr, sizeof(hdr)), sizeof(hdr));
	ASSERT_EQ(kcm_wait_so_error(local, 5000), EMSGSIZE);
	close(kcm);
}

/* A length the bytes seen at an earlier call already covered. */
TEST(parser_late_length)
{
	int kcm = kcm_socket(SOCK_DGRAM), prog = kcm_parser_min_len(8, 2);
	int peer, local;

	ASSERT_OK(kcm_u_tcp_pair(&peer, &local));
	ASSERT_OK(kcm_u_attach(kcm, local, prog));
	ASSERT_EQ(write(peer, "abcd", 4), 4);
	usleep(100000);
	ASSERT_EQ(write(peer, "efgh", 4), 4);
	ASSERT_EQ(kcm_wait_so_error(local, 5000), EPROTO);
	ASSERT_ERRNO(recv(kcm, rbuf, 1, MSG_DONTWAIT), EAGAIN);
	close(kcm);
}

/* A parser that never finds a length is bounded by SO_RCVBUF. */
TEST_DIFFERS(parser_always_more,
	     "a parser that always asks for more makes upstream hold all the peer sends")
{
	int kcm = kcm_socket(SOCK_DGRAM), prog = kcm_parser_const(0);
	int peer, local, rcvbuf = 65536, i;
	char chunk[4096] = { 0 };

	ASSERT_OK(kcm_u_tcp_pair(&peer, &local));
	ASSERT_OK(setsockopt(local, SOL_SOCKET, SO_RCVBUF, &rcvbuf,
			     sizeof(rcvbuf)));
	ASSERT_OK(kcm_u_attach(kcm, local, prog));
	ASSERT_OK(fcntl(peer, F_SETFL, O_NONBLOCK));
	for (i = 0; i < 1024; i++)
		if (write(peer, chunk, sizeof(chunk)) < 0)
			break;
	ASSERT_EQ(kcm_wait_so_error(local, 5000), EMSGSIZE);
	close(kcm);
}

TEST(assembly_timeout)
{
	int kcm = kcm_socket(SOCK_DGRAM), prog = kcm_u_parser_len4();
	int peer, local, err;
	char hdr[10] = { 0, 0, 0, 100 };

	ASSERT_OK(kcm_u_tcp_pair(&peer, &local));
	kcm_u_set_timeo(local, SO_RCVTIMEO, 200);
	ASSERT_OK(kcm_u_attach(kcm, local, prog));
	ASSERT_EQ(write(peer, hdr, sizeof(hdr)), sizeof(hdr));
	usleep(50000);
	EXPECT_EQ(kcm_u_getsockopt_int(local, SOL_SOCKET, SO_ERROR), 0);
	err = kcm_wait_so_error(local, 5000);
	ASSERT_EQ(err, ETIMEDOUT);
	close(kcm);
}

static int drain(int fd, int *seen)
{
	int n = 0, flags;
	ssize_t len;
	long seq;

	while ((len = kcm_recv(fd, rbuf, 64, MSG_DONTWAIT, &flags)) > 0) {
		seq = kcm_u_msg_check(rbuf, len);
		if (seq < 0 || seq >= 32 || (*seen & (1 << seq)))
			return -1;
		*seen |= 1 << seq;
		n++;
	}
	return n;
}

/* Two KCM sockets with room take turns. */
TEST_DIFFERS(round_robin,
	     "upstream feeds one socket until its buffer is full")
{
	int peer, local, kcm = kcm_with_tcp(SOCK_DGRAM, &peer, &local);
	int c = kcm_u_clone(kcm), seen = 0;

	ASSERT_GE(c, 0);
	ASSERT_OK(kcm_send_msgs(peer, 0, 10, 16));
	usleep(300000);
	ASSERT_EQ(drain(kcm, &seen), 5);
	ASSERT_EQ(drain(c, &seen), 5);
	ASSERT_EQ(seen, 0x3ff);
	close(c);
	close(kcm);
}

/* Messages left on a socket that stops receiving go to the others. */
TEST(recv_disable_requeues)
{
	int peer, local, kcm = kcm_with_tcp(SOCK_DGRAM, &peer, &local);
	int c = kcm_u_clone(kcm), one = 1, seen = 0;
	long seq;

	ASSERT_GE(c, 0);
	kcm_u_set_timeo(c, SO_RCVTIMEO, 5000);
	ASSERT_OK(kcm_send_msgs(peer, 0, 6, 16));
	usleep(200000);
	ASSERT_OK(setsockopt(kcm, SOL_KCM, KCM_RECV_DISABLE, &one,
			     sizeof(one)));
	ASSERT_ERRNO(recv(kcm, rbuf, 1, MSG_DONTWAIT), EAGAIN);
	while ((seq = kcm_recv_check(c, rbuf, 64)) >= 0) {
		ASSERT_TRUE(seq < 6 && !(seen & (1 << seq)));
		seen |= 1 << seq;
		if (seen == 0x3f)
			break;
	}
	ASSERT_EQ(seen, 0x3f);
	close(c);
	close(kcm);
}

TEST(close_requeues)
{
	int peer, local, kcm = kcm_with_tcp(SOCK_DGRAM, &peer, &local);
	int c = kcm_u_clone(kcm), seen = 0;
	long seq;

	ASSERT_GE(c, 0);
	ASSERT_OK(kcm_send_msgs(peer, 0, 6, 16));
	usleep(200000);
	close(c);
	while ((seq = kcm_recv_check(kcm, rbuf, 64)) >= 0) {
		ASSERT_TRUE(seq < 6 && !(seen & (1 << seq)));
		seen |= 1 << seq;
		if (seen == 0x3f)
			break;
	}
	ASSERT_EQ(seen, 0x3f);
	close(kcm);
}

/* With no socket receiving, messages wait on the mux, in order. */
TEST(held_until_enabled)
{
	int peer, local, kcm = kcm_with_tcp(SOCK_DGRAM, &peer, &local);
	int one = 1, zero = 0, i;

	ASSERT_OK(setsockopt(kcm, SOL_KCM, KCM_RECV_DISABLE, &one,
			     sizeof(one)));
	ASSERT_OK(kcm_send_msgs(peer, 0, 5, 16));
	usleep(200000);
	ASSERT_ERRNO(recv(kcm, rbuf, 1, MSG_DONTWAIT), EAGAIN);
	ASSERT_OK(setsockopt(kcm, SOL_KCM, KCM_RECV_DISABLE, &zero,
			     sizeof(zero)));
	for (i = 0; i < 5; i++)
		ASSERT_EQ(kcm_recv_check(kcm, rbuf, 64), i);
	close(kcm);
}

/*
 * A reader that falls behind: far more than its receive buffer arrives.
 * Nothing is lost, the order of one connection is kept, and the memory
 * charged for a small message stays small.
 */
TEST_DIFFERS(slow_reader_loses_nothing,
	     "upstream stops delivering here (about 500 messages in): messages straddle segments")
{
	int peer, local, kcm = kcm_with_tcp(SOCK_DGRAM, &peer, &local);
	int rcvbuf = 4096, n = 20000, i;
	pid_t pid;

	ASSERT_OK(setsockopt(kcm, SOL_SOCKET, SO_RCVBUF, &rcvbuf,
			     sizeof(rcvbuf)));
	pid = fork();
	ASSERT_GE(pid, 0);
	if (!pid)
		_exit(kcm_send_msgs(peer, 0, n, 60) ? 1 : 0);
	usleep(300000);
	for (i = 0; i < n; i++) {
		long seq = kcm_recv_check(kcm, rbuf, 128);

		if (seq != i)
			TH_LOG("message %d: got %ld errno %d", i, seq, errno);
		ASSERT_EQ(seq, i);
	}
	ASSERT_OK(waitpid(pid, NULL, 0));
	close(kcm);
}

/* Writes @len bytes to the non-blocking @fd, polling when it is full. */
static int write_polled(int fd, const char *buf, size_t len)
{
	ssize_t w;

	while (len) {
		w = write(fd, buf, len);
		if (w > 0) {
			buf += w;
			len -= w;
			continue;
		}
		if (w < 0 && errno != EAGAIN)
			return -1;
		if (!(kcm_poll1(fd, POLLOUT, 5000) & POLLOUT))
			return -1;
	}
	return 0;
}

/*
 * A peer that writes 4 KB at a time with Nagle on (a short segment in
 * flight holds back the next) into a small send buffer, read through a
 * KCM socket of the default size.  Unfixed, TCP's ACK of a segment KCM
 * had drained waited for the delayed-ACK timer (40 ms and more) about
 * once in twenty writes, and such a connection carried 25k messages/s.
 * (With a KCM receive buffer large enough for everything it did not
 * happen.)  Counted in a network namespace of its own.
 */
TEST_DIFFERS(small_writes_acked,
	     "upstream stops reading: a short write leaves a message straddling segments")
{
	int bufsz = 32 << 10, writes = 2000, n = 64, peer, local, kcm, w, i;
	long before, after, pauses;
	char chunk[64 * 64], line[4096];
	int status;
	pid_t pid;

	kcm_enter_netns();
	kcm = kcm_with_tcp(SOCK_DGRAM, &peer, &local);

	ASSERT_OK(setsockopt(local, SOL_SOCKET, SO_RCVBUF, &bufsz,
			     sizeof(bufsz)));
	ASSERT_OK(setsockopt(peer, SOL_SOCKET, SO_SNDBUF, &bufsz,
			     sizeof(bufsz)));
	/* Nagle on, as an application leaves it (the pair turns it off) */
	ASSERT_OK(kcm_u_setsockopt_int(peer, IPPROTO_TCP, TCP_NODELAY, 0));
	before = kcm_u_tcpext("DelayedACKs");
	ASSERT_GE(before, 0);
	pid = fork();
	ASSERT_GE(pid, 0);
	if (!pid) {
		for (i = 0; i < writes * n; i++)
			if (kcm_recv_check(kcm, rbuf, sizeof(rbuf)) != i)
				_exit(1);
		_exit(0);
	}
	ASSERT_OK(fcntl(peer, F_SETFL, O_NONBLOCK));
	for (w = 0; w < writes; w++) {
		/* 64 messages of 64 bytes */
		for (i = 0; i < n; i++)
			kcm_u_msg_build(chunk + i * 64, 60, w * n + i);
		ASSERT_OK(write_polled(peer, chunk, sizeof(chunk)));
	}
	status = kcm_wait_child(pid);
	after = kcm_u_tcpext("DelayedACKs");
	/* rx_intr: how often the psock paused */
	ASSERT_OK(kcm_ext_find("psock", NULL, NULL, line, sizeof(line)));
	pauses = kcm_ext_num(line, "rx_intr");
	TH_LOG("%d writes, %ld delayed ACKs, %ld psock pauses, reader's status %d",
	       writes, after - before, pauses, status);
	ASSERT_EQ(status, 0);
	ASSERT_GE(pauses, 0);
	/*
	 * Unfixed: about 100, with the psock paused about once.  While it
	 * is paused bytes wait in TCP, whose timer may ack them: a slow
	 * reader (the 6.1 debug kernel: 19 of them over 24 pauses).
	 */
	ASSERT_LT(after - before, writes / 100 + pauses);
	close(kcm);
}

TEST_DIFFERS(small_message_charge,
	     "each small message is charged the whole coalesced TCP buffer")
{
	struct kcm_proc_obj obj[4];
	int peer, local, kcm, n = 100;

	kcm_enter_netns();
	kcm = kcm_with_tcp(SOCK_DGRAM, &peer, &local);
	ASSERT_OK(kcm_send_msgs(peer, 0, n, 60));
	usleep(300000);
	/* obj[0] is the KCM socket, obj[1] its psock. */
	ASSERT_EQ(kcm_proc_objs(obj, ARRAY_SIZE(obj)), 2);
	ASSERT_EQ(obj[0].recv_q, n);
	TH_LOG("%d messages of 64 bytes hold %lld bytes", n, obj[0].rmem);
	EXPECT_TRUE(obj[0].rmem <= n * 1024);
	close(kcm);
}

/* The psock's rx_in_place counter (/proc/net/kcm_ext), or -1. */
static long psock_in_place(void)
{
	char line[4096];

	if (kcm_ext_find("psock", NULL, NULL, line, sizeof(line)))
		return -1;
	return kcm_ext_num(line, "rx_in_place");
}

/* Writes @len bytes of @buf to @fd through a pipe: TCP takes its pages. */
static void splice_write(int fd, const char *buf, size_t len)
{
	size_t off = 0, n;
	ssize_t m;
	int p[2];

	ASSERT_OK(pipe(p));
	while (off < len) {
		n = len - off < 16384 ? len - off : 16384;
		ASSERT_EQ(write(p[1], buf + off, n), n);
		off += n;
		while (n) {
			m = splice(p[0], NULL, fd, NULL, n, 0);
			ASSERT_GT(m, 0);
			n -= m;
		}
	}
	close(p[0]);
	close(p[1]);
}

/*
 * Small messages framed in place: a burst in one write lies in TCP's
 * pages and most of it is framed there; bytes spliced from a pipe (pages
 * a sender may still change) and writes of one message each are copied
 * through the framing buffer.  Every message arrives whole either way.
 */
TEST_DIFFERS(small_messages_in_place,
	     "no /proc/net/kcm_ext: upstream copies every message")
{
	enum { N = 1000, SZ = 64 };
	static char chunk[N * SZ];
	long start, burst, spliced;
	int peer, local, kcm, i;

	kcm_enter_netns();
	kcm = kcm_with_tcp(SOCK_DGRAM, &peer, &local);
	for (i = 0; i < N; i++)
		kcm_u_msg_build(chunk + i * SZ, SZ - KCM_U_HDR, i);
	start = psock_in_place();
	ASSERT_EQ(start, 0);

	ASSERT_OK(kcm_u_write_all(peer, chunk, sizeof(chunk)));
	for (i = 0; i < N; i++)
		ASSERT_EQ(kcm_recv_check(kcm, rbuf, sizeof(rbuf)), i);
	burst = psock_in_place();
	TH_LOG("burst: %ld of %d messages framed in place", burst, N);
	ASSERT_GE(burst, N / 2);
	ASSERT_LE(burst, N);

	for (i = 0; i < N; i++)
		kcm_u_msg_build(chunk + i * SZ, SZ - KCM_U_HDR, N + i);
	splice_write(peer, chunk, sizeof(chunk));
	for (i = 0; i < N; i++)
		ASSERT_EQ(kcm_recv_check(kcm, rbuf, sizeof(rbuf)), N + i);
	spliced = psock_in_place();
	ASSERT_EQ(spliced, burst);

	for (i = 0; i < 100; i++) {
		ASSERT_OK(kcm_send_msgs(peer, 2 * N + i, 1, SZ - KCM_U_HDR));
		ASSERT_EQ(kcm_recv_check(kcm, rbuf, sizeof(rbuf)), 2 * N + i);
	}
	ASSERT_EQ(psock_in_place(), burst);
	close(kcm);
	close(peer);
	close(local);
}

/* Four connections into one socket: each connection's order is kept. */
TEST_DIFFERS(many_connections,
	     "upstream stops delivering a few thousand messages in: they straddle segments")
{
	enum { CONNS = 4, MSGS = 2000 };
	int kcm = kcm_socket(SOCK_DGRAM), prog = kcm_u_parser_len4();
	int peer[CONNS], local[CONNS], next[CONNS] = { 0 }, i, total;
	long seq;

	kcm_u_set_timeo(kcm, SO_RCVTIMEO, 5000);
	for (i = 0; i < CONNS; i++) {
		ASSERT_OK(kcm_u_tcp_pair(&peer[i], &local[i]));
		ASSERT_OK(kcm_u_attach(kcm, local[i], prog));
	}
	for (i = 0; i < CONNS; i++) {
		if (!fork())
			_exit(kcm_send_msgs(peer[i], i << 16, MSGS, 32 + i) ?
			      1 : 0);
	}
	for (total = 0; total < CONNS * MSGS; total++) {
		seq = kcm_recv_check(kcm, rbuf, 128);
		if (seq < 0)
			TH_LOG("after %d messages: errno %d", total, errno);
		ASSERT_GE(seq, 0);
		i = seq >> 16;
		ASSERT_TRUE(i < CONNS);
		ASSERT_EQ(seq & 0xffff, next[i]);
		next[i]++;
	}
	while (wait(NULL) > 0)
		;
	close(kcm);
}

/* After unattach the TCP socket is the application's again. */
TEST(unattach_returns_socket)
{
	struct kcm_proc p;
	int peer, local, kcm;
	char buf[16];

	kcm_enter_netns();
	kcm = kcm_with_tcp(SOCK_DGRAM, &peer, &local);
	ASSERT_OK(kcm_send_msgs(peer, 1, 1, 8));
	ASSERT_EQ(kcm_recv_check(kcm, rbuf, 64), 1);
	ASSERT_EQ(kcm_proc_read(&p), 0);
	ASSERT_EQ(p.psocks[0], 1);
	ASSERT_OK(kcm_u_unattach(kcm, local));
	ASSERT_EQ(kcm_proc_read(&p), 0);
	ASSERT_EQ(p.psocks[0], 0);
	ASSERT_EQ(write(peer, "plain", 5), 5);
	ASSERT_EQ(read(local, buf, sizeof(buf)), 5);
	ASSERT_EQ(memcmp(buf, "plain", 5), 0);
	ASSERT_ERRNO(recv(kcm, rbuf, 1, MSG_DONTWAIT), EAGAIN);
	close(kcm);
}

/* The mux keeps the TCP socket open after the application closes it. */
TEST(tcp_fd_closed_while_attached)
{
	int peer, local, kcm = kcm_with_tcp(SOCK_DGRAM, &peer, &local);
	char c;

	close(local);
	ASSERT_OK(kcm_send_msgs(peer, 4, 1, 8));
	ASSERT_EQ(kcm_recv_check(kcm, rbuf, 64), 4);
	/* Closing the mux releases the last reference: the peer sees EOF. */
	close(kcm);
	kcm_u_set_timeo(peer, SO_RCVTIMEO, 5000);
	ASSERT_EQ(read(peer, &c, 1), 0);
}

/* Closing the last KCM socket hands every TCP socket back. */
TEST(mux_close_releases_tcp)
{
	int peer, local, kcm = kcm_with_tcp(SOCK_DGRAM, &peer, &local);
	int other = kcm_socket(SOCK_DGRAM), prog = kcm_u_parser_len4();

	ASSERT_OK(kcm_send_msgs(peer, 1, 3, 8));
	usleep(100000);
	close(kcm);
	ASSERT_OK(kcm_u_attach(other, local, prog));
	kcm_u_set_timeo(other, SO_RCVTIMEO, 5000);
	ASSERT_OK(kcm_send_msgs(peer, 9, 1, 8));
	ASSERT_EQ(kcm_recv_check(other, rbuf, 64), 9);
	close(other);
}

/* /proc counts what was received, per socket and per psock. */
TEST(proc_counts_rx)
{
	struct kcm_proc_obj obj[4];
	int peer, local, kcm, i;

	kcm_enter_netns();
	kcm = kcm_with_tcp(SOCK_DGRAM, &peer, &local);
	ASSERT_OK(kcm_send_msgs(peer, 0, 7, 10));
	for (i = 0; i < 7; i++)
		ASSERT_EQ(kcm_recv_check(kcm, rbuf, 64), i);
	/* One kcm- line and one psock- line. */
	ASSERT_EQ(kcm_proc_objs(obj, ARRAY_SIZE(obj)), 2);
	for (i = 0; i < 2; i++) {
		EXPECT_EQ(obj[i].rx_msgs, 7);
		EXPECT_EQ(obj[i].rx_bytes, 7 * 14);
	}
	close(kcm);
}

KCM_TEST_MAIN
