// SPDX-License-Identifier: GPL-2.0
/*
 * KCM transmit path: message boundaries for both socket types, batching,
 * large messages, copy faults, backpressure and poll, many senders over
 * few connections, sockets taking turns on one connection, failover,
 * unattach while reserved, close, sendfile and request/response on one
 * mux.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/uio.h>

#include "kcm_data.h"

#define BIG	(16 << 20)

static char sbuf[1 << 20];

/* Reads one message from a TCP stream: its seq, or a negative number. */
static long tcp_read_msg(int fd, char *buf, size_t cap)
{
	long n = kcm_u_read_msg(fd, buf, cap);

	return n < 0 ? n : kcm_u_msg_check(buf, n);
}

static ssize_t send_msg(int fd, size_t plen, uint32_t seq, int flags)
{
	size_t len = kcm_u_msg_build(sbuf, plen, seq);

	return send(fd, sbuf, len, flags);
}

TEST(send_dgram)
{
	int peer, local, kcm = kcm_with_tcp(SOCK_DGRAM, &peer, &local);
	static const size_t sizes[] = { 0, 4, 100, 3000, 70000 };
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(sizes); i++)
		ASSERT_EQ(send_msg(kcm, sizes[i], sizes[i] >= 4 ? i : 0, 0),
			  KCM_U_HDR + sizes[i]);
	for (i = 0; i < ARRAY_SIZE(sizes); i++)
		ASSERT_EQ(tcp_read_msg(peer, sbuf, sizeof(sbuf)),
			  sizes[i] >= 4 ? i : 0);
	close(kcm);
}

/* MSG_MORE keeps a DGRAM message open; write() ends a SEQPACKET one. */
TEST(send_pieces)
{
	int peer, local, kcm = kcm_with_tcp(SOCK_DGRAM, &peer, &local);
	int peer2, local2, kcm2 = kcm_with_tcp(SOCK_SEQPACKET, &peer2, &local2);
	char msg[200];
	size_t len = kcm_u_msg_build(msg, 150, 42);

	ASSERT_EQ(send(kcm, msg, 10, MSG_MORE), 10);
	ASSERT_EQ(send(kcm, msg + 10, 0, MSG_MORE), 0);
	ASSERT_EQ(send(kcm, msg + 10, 90, MSG_MORE), 90);
	ASSERT_ERRNO(recv(peer, sbuf, 1, MSG_DONTWAIT), EAGAIN);
	ASSERT_EQ(send(kcm, msg + 100, len - 100, 0), len - 100);
	ASSERT_EQ(tcp_read_msg(peer, sbuf, sizeof(sbuf)), 42);

	ASSERT_EQ(send(kcm2, msg, 50, 0), 50);
	ASSERT_EQ(send(kcm2, msg + 50, 50, MSG_MORE), 50);
	usleep(50000);
	ASSERT_ERRNO(recv(peer2, sbuf, 1, MSG_DONTWAIT), EAGAIN);
	ASSERT_EQ(write(kcm2, msg + 100, len - 100), len - 100);
	ASSERT_EQ(tcp_read_msg(peer2, sbuf, sizeof(sbuf)), 42);
	close(kcm);
	close(kcm2);
}

/* A sendmmsg() vector of @n messages of @plen bytes, seq @first on. */
#define MM_MAX	64
static struct mmsghdr mm[MM_MAX];
static struct iovec mm_iov[MM_MAX];
static char mm_buf[MM_MAX][256];

static void mm_build(int n, size_t plen, uint32_t first)
{
	int i;

	memset(mm, 0, sizeof(mm));
	for (i = 0; i < n; i++) {
		mm_iov[i].iov_base = mm_buf[i];
		mm_iov[i].iov_len = kcm_u_msg_build(mm_buf[i], plen, first + i);
		mm[i].msg_hdr.msg_iov = &mm_iov[i];
		mm[i].msg_hdr.msg_iovlen = 1;
	}
}

/* Exactly the messages @first .. @first + @n - 1 arrive on @peer. */
static void expect_msgs(int peer, uint32_t first, int n)
{
	int i;

	for (i = 0; i < n; i++)
		ASSERT_EQ(tcp_read_msg(peer, sbuf, sizeof(sbuf)), first + i);
	usleep(100000);
	ASSERT_ERRNO(recv(peer, sbuf, 1, MSG_DONTWAIT), EAGAIN);
}

/* sendmmsg() sets MSG_BATCH on all but its last message. */
TEST(send_batch)
{
	int peer, local, kcm = kcm_with_tcp(SOCK_DGRAM, &peer, &local);
	int i;

	for (i = 0; i < 3; i++)
		ASSERT_EQ(send_msg(kcm, 20, i, MSG_BATCH), KCM_U_HDR + 20);
	/* An empty end of record ends the batch. */
	ASSERT_EQ(send(kcm, NULL, 0, 0), 0);
	for (i = 0; i < 3; i++)
		ASSERT_EQ(tcp_read_msg(peer, sbuf, sizeof(sbuf)), i);

	mm_build(8, 30, 10);
	ASSERT_EQ(sendmmsg(kcm, mm, 8, 0), 8);
	for (i = 0; i < 8; i++)
		ASSERT_EQ(mm[i].msg_len, KCM_U_HDR + 30);
	expect_msgs(peer, 10, 8);
	close(kcm);
}

/*
 * MSG_BATCH set by hand on the last message of a sequence: nothing ends
 * the batch, yet the messages go out (after at most a timer tick).
 */
TEST_DIFFERS(send_batch_by_hand,
	     "messages sent with MSG_BATCH wait until a send without it")
{
	int peer, local, kcm = kcm_with_tcp(SOCK_DGRAM, &peer, &local);
	int i;

	kcm_u_set_timeo(peer, SO_RCVTIMEO, 2000);
	for (i = 0; i < 4; i++)
		ASSERT_EQ(send_msg(kcm, 20 + i, i, MSG_BATCH),
			  KCM_U_HDR + 20 + i);
	expect_msgs(peer, 0, 4);
	/* SEQPACKET: the batch flag on the end of a record. */
	close(kcm);
	kcm = kcm_with_tcp(SOCK_SEQPACKET, &peer, &local);
	kcm_u_set_timeo(peer, SO_RCVTIMEO, 2000);
	ASSERT_EQ(send_msg(kcm, 50, 7, MSG_EOR | MSG_BATCH), KCM_U_HDR + 50);
	expect_msgs(peer, 7, 1);
	close(kcm);
}

/* A sendmmsg() cut short by a fault: what it reported sent goes out now. */
TEST(send_mmsg_cut_by_fault)
{
	int peer, local, kcm = kcm_with_tcp(SOCK_DGRAM, &peer, &local);
	void *bad = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS,
			 -1, 0);

	ASSERT_TRUE(bad != MAP_FAILED);
	kcm_u_set_timeo(peer, SO_RCVTIMEO, 2000);
	mm_build(5, 40, 100);
	mm_iov[2].iov_base = bad;
	ASSERT_EQ(sendmmsg(kcm, mm, 5, 0), 2);
	expect_msgs(peer, 100, 2);
	/* The socket is intact: the faulting message left nothing behind. */
	ASSERT_EQ(send_msg(kcm, 40, 102, 0), KCM_U_HDR + 40);
	expect_msgs(peer, 102, 1);
	close(kcm);
}

/*
 * A sendmmsg() that stops at a message whose msghdr cannot be read: the
 * module never sees the end of the batch, and still sends the two.
 */
TEST_DIFFERS(send_mmsg_cut_by_bad_msghdr,
	     "the messages before the bad msghdr wait for the next send")
{
	int peer, local, kcm = kcm_with_tcp(SOCK_DGRAM, &peer, &local);

	kcm_u_set_timeo(peer, SO_RCVTIMEO, 2000);
	mm_build(5, 40, 200);
	mm[2].msg_hdr.msg_iov = (struct iovec *)8;
	ASSERT_EQ(sendmmsg(kcm, mm, 5, 0), 2);
	expect_msgs(peer, 200, 2);
	close(kcm);
}

/*
 * Attach one side of a new TCP pair to @kcm with 4 KB send and receive
 * buffers on every socket, so that a peer that does not read fills them
 * fast; *@peer is the other side.  Returns 0 or -1.
 */
static int attach_small_buffers(int kcm, int prog, int *peer)
{
	int local, size = 4096;

	if (kcm_u_tcp_pair(peer, &local) ||
	    setsockopt(local, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size)) ||
	    setsockopt(*peer, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size)) ||
	    setsockopt(kcm, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size)))
		return -1;
	return kcm_u_attach(kcm, local, prog);
}

/* MSG_DONTWAIT on a full send buffer ends the batch where it stops. */
TEST(send_mmsg_full_dontwait)
{
	int kcm = kcm_socket(SOCK_DGRAM), prog = kcm_u_parser_len4();
	int peer, sent = 0, n;
	uint32_t first = 0;

	ASSERT_OK(attach_small_buffers(kcm, prog, &peer));
	/* The peer does not read: the batches stop short, then fail. */
	for (;;) {
		mm_build(MM_MAX, 200, first);
		n = sendmmsg(kcm, mm, MM_MAX, MSG_DONTWAIT);
		if (n < 0)
			break;
		ASSERT_LE(n, MM_MAX);
		sent += n;
		first += n;
		ASSERT_LT(sent, 1 << 20);
	}
	ASSERT_EQ(errno, EAGAIN);
	ASSERT_GT(sent, 0);
	/* Every message reported sent arrives, and nothing else. */
	kcm_u_set_timeo(peer, SO_RCVTIMEO, 5000);
	expect_msgs(peer, 0, sent);
	close(kcm);
}

static void on_alarm(int sig)
{
	(void)sig;
}

/*
 * A signal ends a blocked sendmmsg(): what it reported sent goes out.  The
 * timer repeats: a tick that lands before the buffers are full (in user
 * space, or in a call that did not block) is handled and gone, and only a
 * later one can end the call that blocks.
 */
TEST(send_mmsg_signal)
{
	int kcm = kcm_socket(SOCK_DGRAM), prog = kcm_u_parser_len4();
	int peer, sent = 0, n;
	struct sigaction sa = { .sa_handler = on_alarm };
	struct itimerval it = {
		.it_value = { .tv_usec = 300000 },
		.it_interval = { .tv_usec = 300000 },
	};
	struct itimerval off = { 0 };
	uint32_t first = 0;

	ASSERT_OK(sigaction(SIGALRM, &sa, NULL));	/* no SA_RESTART */
	ASSERT_OK(attach_small_buffers(kcm, prog, &peer));
	ASSERT_OK(setitimer(ITIMER_REAL, &it, NULL));
	/* Blocks once the buffers are full, until a tick. */
	do {
		mm_build(MM_MAX, 200, first);
		n = sendmmsg(kcm, mm, MM_MAX, 0);
		if (n > 0) {
			sent += n;
			first += n;
		}
	} while (n == MM_MAX && sent < (1 << 20));
	ASSERT_OK(setitimer(ITIMER_REAL, &off, NULL));
	ASSERT_TRUE(n >= 0 || errno == EINTR);
	ASSERT_GT(sent, 0);
	kcm_u_set_timeo(peer, SO_RCVTIMEO, 5000);
	expect_msgs(peer, 0, sent);
	close(kcm);
}

TEST(send_writev)
{
	int peer, local, kcm = kcm_with_tcp(SOCK_SEQPACKET, &peer, &local);
	char msg[300];
	size_t len = kcm_u_msg_build(msg, 290, 77);
	struct iovec iov[3] = {
		{ msg, 1 }, { msg + 1, 200 }, { msg + 201, len - 201 },
	};

	ASSERT_EQ(writev(kcm, iov, 3), len);
	ASSERT_EQ(tcp_read_msg(peer, sbuf, sizeof(sbuf)), 77);
	close(kcm);
}

/* A 16 MB message, byte exact, with a send buffer raised to hold it. */
TEST(send_16mb)
{
	int peer, local, kcm = kcm_with_tcp(SOCK_DGRAM, &peer, &local);
	char *msg = malloc(BIG), *in = malloc(BIG);
	size_t len;
	pid_t pid;

	ASSERT_TRUE(msg && in);
	len = kcm_u_msg_build(msg, BIG - KCM_U_HDR, 5);
	ASSERT_OK(kcm_sndbuf_for(kcm, len));
	pid = fork();
	ASSERT_GE(pid, 0);
	if (!pid) {
		if (kcm_u_read_full(peer, in, len) || memcmp(in, msg, len))
			_exit(1);
		_exit(0);
	}
	ASSERT_EQ(send(kcm, msg, len, 0), len);
	ASSERT_EQ(kcm_wait_child(pid), 0);
	close(kcm);
}

/* A fault while copying leaves nothing behind, not even charged memory. */
static void copy_fault_variant(int type, size_t first_len, int start_more)
{
	int peer, local, kcm = kcm_with_tcp(type, &peer, &local);
	static char first[70000];
	struct iovec iov[2] = { { first, first_len }, { (void *)8, 1000 } };
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2 };
	int i, sndbuf = 65536, eor = type == SOCK_SEQPACKET ? MSG_EOR : 0;
	char msg[100];
	size_t len = kcm_u_msg_build(msg, 90, 3);

	ASSERT_OK(setsockopt(kcm, SOL_SOCKET, SO_SNDBUF, &sndbuf,
			     sizeof(sndbuf)));
	if (start_more)
		ASSERT_EQ(send(kcm, msg, 10, MSG_MORE), 10);
	for (i = 0; i < 100; i++)
		ASSERT_ERRNO(sendmsg(kcm, &mh, MSG_DONTWAIT | eor), EFAULT);
	/* Nothing of the failed calls joined the message. */
	if (start_more)
		ASSERT_EQ(send(kcm, msg + 10, len - 10, MSG_DONTWAIT | eor),
			  len - 10);
	else
		ASSERT_EQ(send(kcm, msg, len, MSG_DONTWAIT | eor), len);
	ASSERT_EQ(tcp_read_msg(peer, sbuf, sizeof(sbuf)), 3);
	close(kcm);
}

TEST_DIFFERS(send_copy_fault,
	     "a faulting send leaves half-built state: the next message arrives corrupted")
{
	copy_fault_variant(SOCK_DGRAM, 50, 0);
	copy_fault_variant(SOCK_DGRAM, 20000, 0);
	copy_fault_variant(SOCK_DGRAM, 20000, 1);
	copy_fault_variant(SOCK_SEQPACKET, 60000, 0);
	copy_fault_variant(SOCK_SEQPACKET, 5000, 1);
}

/*
 * Lone small messages go straight to TCP while it has room.  The peer
 * does not read, so its window closes; with TCP_NOTSENT_LOWAT at one
 * byte TCP takes no new segment once data waits unsent, so the message
 * that crosses the end of its last segment is taken in part.  Its rest
 * and what follows wait in KCM until the peer reads: every message
 * arrives whole and in order, and nothing else.
 */
static void lone_fill_variant(int type, size_t plen)
{
	int peer, local, kcm = kcm_with_tcp(type, &peer, &local);
	int lowat = 1, sndbuf = 1 << 20, ksndbuf = 65536, n = 0, i;
	int eor = type == SOCK_SEQPACKET ? MSG_EOR : 0;

	ASSERT_OK(setsockopt(local, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &lowat,
			     sizeof(lowat)));
	ASSERT_OK(setsockopt(local, SOL_SOCKET, SO_SNDBUF, &sndbuf,
			     sizeof(sndbuf)));
	ASSERT_OK(setsockopt(kcm, SOL_SOCKET, SO_SNDBUF, &ksndbuf,
			     sizeof(ksndbuf)));
	while (n < 100000 &&
	       send_msg(kcm, plen + n % 7, n, MSG_DONTWAIT | eor) > 0)
		n++;
	ASSERT_EQ(errno, EAGAIN);
	TH_LOG("%zu-byte payloads: %d sent before EAGAIN", plen, n);
	ASSERT_GE(n, 20);
	for (i = 0; i < n; i++)
		ASSERT_EQ(tcp_read_msg(peer, sbuf, sizeof(sbuf)), i);
	usleep(100000);
	ASSERT_ERRNO(recv(peer, sbuf, 1, MSG_DONTWAIT), EAGAIN);
	close(kcm);
	close(peer);
}

TEST(send_lone_fills_tcp)
{
	lone_fill_variant(SOCK_DGRAM, 60);
	lone_fill_variant(SOCK_DGRAM, 1000);
	lone_fill_variant(SOCK_SEQPACKET, 1499);
	lone_fill_variant(SOCK_DGRAM, 2030);
}

/*
 * An address given to sendto() is not KCM's business, as upstream: a
 * lone message with one goes out like any other.
 */
TEST(send_lone_with_address)
{
	int peer, local, kcm = kcm_with_tcp(SOCK_DGRAM, &peer, &local);
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_port = htons(9) };
	size_t len = kcm_u_msg_build(sbuf, 200, 11);

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ASSERT_EQ(sendto(kcm, sbuf, len, 0, (struct sockaddr *)&sin,
			 sizeof(sin)), len);
	ASSERT_EQ(tcp_read_msg(peer, sbuf, sizeof(sbuf)), 11);
	close(kcm);
}

/*
 * A lone message whose buffer runs into an unmapped page fails with
 * EFAULT before any of it reaches TCP: the next message arrives intact.
 */
TEST(send_lone_fault_at_page_end)
{
	int peer, local, kcm = kcm_with_tcp(SOCK_DGRAM, &peer, &local);
	long page = sysconf(_SC_PAGESIZE);
	char *map = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	size_t len = kcm_u_msg_build(sbuf, 500, 7);

	ASSERT_NE(map, MAP_FAILED);
	ASSERT_OK(mprotect(map + page, page, PROT_NONE));
	memcpy(map + page - 100, sbuf, 100);
	ASSERT_ERRNO(send(kcm, map + page - 100, len, 0), EFAULT);
	ASSERT_ERRNO(send(kcm, map + page - 100, len, MSG_DONTWAIT), EFAULT);
	ASSERT_EQ(send_msg(kcm, 300, 8, 0), KCM_U_HDR + 300);
	ASSERT_EQ(tcp_read_msg(peer, sbuf, sizeof(sbuf)), 8);
	usleep(100000);
	ASSERT_ERRNO(recv(peer, sbuf, 1, MSG_DONTWAIT), EAGAIN);
	munmap(map, 2 * page);
	close(kcm);
}

/* Without a psock messages wait; the send buffer pushes back. */
TEST_DIFFERS(send_backpressure,
	     "upstream always reports POLLOUT, even when send would return EAGAIN")
{
	int kcm = kcm_socket(SOCK_DGRAM), prog = kcm_u_parser_len4();
	int sndbuf = 16384, n = 0, peer, local, i;
	uint64_t t0;

	ASSERT_OK(setsockopt(kcm, SOL_SOCKET, SO_SNDBUF, &sndbuf,
			     sizeof(sndbuf)));
	EXPECT_TRUE(kcm_poll1(kcm, POLLOUT, 0) & POLLOUT);
	while (send_msg(kcm, 200, n, MSG_DONTWAIT) > 0)
		n++;
	ASSERT_EQ(errno, EAGAIN);
	ASSERT_GE(n, 4);
	EXPECT_EQ(kcm_poll1(kcm, POLLOUT, 0) & POLLOUT, 0);

	kcm_u_set_timeo(kcm, SO_SNDTIMEO, 200);
	t0 = kcm_u_now_ns();
	ASSERT_ERRNO(send_msg(kcm, 200, n, 0), EAGAIN);
	EXPECT_GE(kcm_u_ms_since(t0), 150);

	/* A connection appears: everything queued goes out, in order. */
	ASSERT_OK(kcm_u_tcp_pair(&peer, &local));
	kcm_u_set_timeo(peer, SO_RCVTIMEO, 5000);
	ASSERT_OK(kcm_u_attach(kcm, local, prog));
	for (i = 0; i < n; i++)
		ASSERT_EQ(tcp_read_msg(peer, sbuf, sizeof(sbuf)), i);
	ASSERT_TRUE(kcm_poll1(kcm, POLLOUT, 5000) & POLLOUT);
	close(kcm);
}

/* Several senders on one socket never interleave their messages. */
static int shared_fd;

static void *sender_thread(void *arg)
{
	long id = (long)arg, i;
	char msg[600];

	for (i = 0; i < 500; i++) {
		size_t len = kcm_u_msg_build(msg, 100 + (i % 400),
					     (id << 16) | i);

		if (send(shared_fd, msg, len, 0) != (ssize_t)len)
			return (void *)1;
	}
	return NULL;
}

TEST(send_concurrent_one_socket)
{
	int peer, local, next[4] = { 0 }, i;
	pthread_t th[4];
	long seq;

	shared_fd = kcm_with_tcp(SOCK_DGRAM, &peer, &local);
	for (i = 0; i < 4; i++)
		ASSERT_OK(-pthread_create(&th[i], NULL, sender_thread,
					  (void *)(long)i));
	for (i = 0; i < 4 * 500; i++) {
		seq = tcp_read_msg(peer, sbuf, sizeof(sbuf));
		ASSERT_GE(seq, 0);
		ASSERT_EQ(seq & 0xffff, next[seq >> 16]);
		next[seq >> 16]++;
	}
	for (i = 0; i < 4; i++) {
		void *rc;

		pthread_join(th[i], &rc);
		ASSERT_TRUE(!rc);
	}
	close(shared_fd);
}

/* Four sending sockets over two connections: all of them get through. */
TEST(send_many_over_few)
{
	enum { SENDERS = 4, MSGS = 1000 };
	int kcm = kcm_socket(SOCK_DGRAM), prog = kcm_u_parser_len4();
	int peer[2], local[2], fds[SENDERS], count[SENDERS] = { 0 }, i, c;
	long seq;

	for (c = 0; c < 2; c++) {
		ASSERT_OK(kcm_u_tcp_pair(&peer[c], &local[c]));
		ASSERT_OK(kcm_u_attach(kcm, local[c], prog));
		ASSERT_OK(fcntl(peer[c], F_SETFL, O_NONBLOCK));
	}
	fds[0] = kcm;
	for (i = 1; i < SENDERS; i++)
		fds[i] = kcm_u_clone(kcm);
	for (i = 0; i < SENDERS; i++) {
		if (!fork()) {
			int k;

			for (k = 0; k < MSGS; k++)
				if (send_msg(fds[i], 200, (i << 16) | k, 0) < 0)
					_exit(1);
			_exit(0);
		}
	}
	/* Drain both connections as messages come. */
	for (i = 0; i < SENDERS * MSGS;) {
		struct pollfd p[2] = { { peer[0], POLLIN, 0 },
				       { peer[1], POLLIN, 0 } };

		ASSERT_GE(poll(p, 2, 5000), 1);
		for (c = 0; c < 2; c++) {
			if (!(p[c].revents & POLLIN))
				continue;
			ASSERT_OK(fcntl(peer[c], F_SETFL, 0));
			seq = tcp_read_msg(peer[c], sbuf, sizeof(sbuf));
			ASSERT_OK(fcntl(peer[c], F_SETFL, O_NONBLOCK));
			ASSERT_GE(seq, 0);
			ASSERT_TRUE((seq >> 16) < SENDERS);
			count[seq >> 16]++;
			i++;
		}
	}
	for (i = 0; i < SENDERS; i++) {
		int status;

		ASSERT_GE(wait(&status), 0);
		ASSERT_EQ(count[i], MSGS);
	}
	close(kcm);
}

#define WQ_INSTANCE	KCM_TRACEFS "/instances/kcm_send"
#define WQ_EVENT	WQ_INSTANCE "/events/workqueue/workqueue_execute_start"

/*
 * Record which work items run, in a tracefs instance of our own (mounted
 * when it is not).  Return: 0, or -1 when the kernel cannot trace them.
 */
static int work_trace_start(void)
{
	if (kcm_tracefs_mount())
		return -1;
	rmdir(WQ_INSTANCE);
	if (mkdir(WQ_INSTANCE, 0700))
		return -1;
	if (kcm_write_str(WQ_EVENT "/enable", "1")) {
		rmdir(WQ_INSTANCE);
		return -1;
	}
	return 0;
}

/* Stop recording: how many times did a work item run @fn? */
static int work_trace_count(const char *fn)
{
	char line[512];
	int n = 0;
	FILE *f;

	kcm_write_str(WQ_EVENT "/enable", "0");
	f = fopen(WQ_INSTANCE "/trace", "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		n += line[0] != '#' && strstr(line, fn);
	fclose(f);
	rmdir(WQ_INSTANCE);
	return n;
}

/*
 * Two sockets of one mux take turns on one connection.  The one that
 * sent last keeps the psock with nothing to send; the other takes it in
 * its own send(): no work item hands the psock over or writes the
 * message.  Each message is read before the next is sent, so with no
 * work item each must have been written in its own send() call.  (Whether
 * it is already in the peer's queue when send() returns is not asserted:
 * a busy kernel may leave loopback's receive to ksoftirqd.)
 */
TEST(send_turns_handover)
{
	enum { MSGS = 200 };
	int peer, local, kcm = kcm_with_tcp(SOCK_DGRAM, &peer, &local);
	int fds[2] = { kcm, kcm_u_clone(kcm) }, i, works;

	ASSERT_GE(fds[1], 0);
	kcm_u_set_timeo(peer, SO_RCVTIMEO, 5000);
	if (work_trace_start())
		SKIP(return, "cannot trace workqueue_execute_start: %s",
		     strerror(errno));
	for (i = 0; i < MSGS; i++) {
		ASSERT_EQ(send_msg(fds[i % 2], 40, i, 0), KCM_U_HDR + 40);
		ASSERT_EQ(tcp_read_msg(peer, sbuf, sizeof(sbuf)), i);
	}
	works = work_trace_count("kcm_tx_work");
	TH_LOG("%d messages: kcm_tx_work ran %d times", MSGS, works);
	ASSERT_EQ(works, 0);
	close(fds[1]);
	close(kcm);
}

struct turn_sender {
	int fd;
	int id;
	int fail;
};

static void *turn_sender(void *arg)
{
	static const size_t sizes[] = { 20, 300, 4000, 70000 };
	struct turn_sender *t = arg;
	static char msgs[2][80000];
	char *msg = msgs[t->id];
	size_t len;
	int i;

	for (i = 0; i < 3000; i++) {
		len = kcm_u_msg_build(msg, sizes[(i + t->id) % 4],
				      (t->id << 16) | i);
		if (send(t->fd, msg, len, 0) != (ssize_t)len) {
			t->fail = errno ? errno : -1;
			break;
		}
	}
	return NULL;
}

/*
 * Two sockets send at once over one connection, small messages and
 * messages that take several TCP writes: while one holds the psock idle
 * the other takes it, and a holder that lost it must not write to it.
 * With @sndbuf, the senders also sleep for send buffer room while the
 * psock is handed to them.  Every message arrives whole, each sender's
 * in order.
 */
static void turns_race(int sndbuf)
{
	int peer, local, kcm = kcm_with_tcp(SOCK_DGRAM, &peer, &local);
	struct turn_sender t[2] = { { kcm, 0, 0 }, { kcm_u_clone(kcm), 1, 0 } };
	pthread_t th[2];
	int next[2] = { 0 }, i;
	long seq;

	ASSERT_GE(t[1].fd, 0);
	for (i = 0; sndbuf && i < 2; i++)
		ASSERT_OK(setsockopt(t[i].fd, SOL_SOCKET, SO_SNDBUF, &sndbuf,
				     sizeof(sndbuf)));
	for (i = 0; i < 2; i++)
		ASSERT_OK(-pthread_create(&th[i], NULL, turn_sender, &t[i]));
	for (i = 0; i < 2 * 3000; i++) {
		seq = tcp_read_msg(peer, sbuf, sizeof(sbuf));
		ASSERT_GE(seq, 0);
		ASSERT_TRUE((seq >> 16) < 2);
		ASSERT_EQ(seq & 0xffff, next[seq >> 16]);
		next[seq >> 16]++;
	}
	for (i = 0; i < 2; i++) {
		pthread_join(th[i], NULL);
		ASSERT_EQ(t[i].fail, 0);
	}
	close(t[1].fd);
	close(kcm);
}

TEST(send_turns_race)
{
	turns_race(0);
}

/* Room for one of the largest messages (70 KB) at a time. */
TEST(send_turns_race_small_sndbuf)
{
	turns_race(36000);
}

/* A connection that breaks: its TCP socket gets the error, the message
 * goes out whole on the other connection.
 */
TEST_DIFFERS(send_failover,
	     "upstream posts EPIPE whatever the cause")
{
	int kcm = kcm_socket(SOCK_DGRAM), prog = kcm_u_parser_len4();
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };
	int pa, la, pb, lb, i, err;

	signal(SIGPIPE, SIG_IGN);
	ASSERT_OK(kcm_u_tcp_pair(&pa, &la));
	ASSERT_OK(kcm_u_tcp_pair(&pb, &lb));
	ASSERT_OK(kcm_u_attach(kcm, la, prog));
	ASSERT_OK(kcm_u_attach(kcm, lb, prog));
	kcm_u_set_timeo(pb, SO_RCVTIMEO, 5000);
	/* The first psock is reserved first: break it with a reset. */
	ASSERT_OK(setsockopt(pa, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)));
	close(pa);
	usleep(100000);
	for (i = 0; i < 10; i++)
		ASSERT_EQ(send_msg(kcm, 500, i, 0), KCM_U_HDR + 500);
	for (i = 0; i < 10; i++)
		ASSERT_EQ(tcp_read_msg(pb, sbuf, sizeof(sbuf)), i);
	err = kcm_u_getsockopt_int(la, SOL_SOCKET, SO_ERROR);
	TH_LOG("SO_ERROR of the broken connection: %d (%s)", err,
	       strerror(err));
	ASSERT_EQ(err, ECONNRESET);
	close(kcm);
}

/* A broken connection is the mux's business: no SIGPIPE for the sender. */
TEST_DIFFERS(send_failover_no_sigpipe,
	     "upstream raises SIGPIPE in the sending task when a connection breaks")
{
	int kcm = kcm_socket(SOCK_DGRAM), prog = kcm_u_parser_len4();
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };
	int pa, la, pb, lb;

	ASSERT_OK(kcm_u_tcp_pair(&pa, &la));
	ASSERT_OK(kcm_u_tcp_pair(&pb, &lb));
	ASSERT_OK(kcm_u_attach(kcm, la, prog));
	ASSERT_OK(kcm_u_attach(kcm, lb, prog));
	kcm_u_set_timeo(pb, SO_RCVTIMEO, 5000);
	ASSERT_OK(setsockopt(pa, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)));
	close(pa);
	usleep(100000);
	ASSERT_EQ(send_msg(kcm, 500, 1, 0), KCM_U_HDR + 500);
	ASSERT_EQ(tcp_read_msg(pb, sbuf, sizeof(sbuf)), 1);
	close(kcm);
}

/* Unattach the psock a big message is half written to. */
TEST(send_unattach_reserved)
{
	int kcm = kcm_socket(SOCK_DGRAM), prog = kcm_u_parser_len4();
	int pa, la, pb, lb, sndbuf = 16384, rcvbuf = 16384;
	size_t len = kcm_u_msg_build(sbuf, 500000, 9);
	char *in = malloc(len);
	pid_t pid;

	ASSERT_OK(kcm_u_tcp_pair(&pa, &la));
	ASSERT_OK(kcm_u_tcp_pair(&pb, &lb));
	ASSERT_OK(setsockopt(la, SOL_SOCKET, SO_SNDBUF, &sndbuf,
			     sizeof(sndbuf)));
	ASSERT_OK(setsockopt(pa, SOL_SOCKET, SO_RCVBUF, &rcvbuf,
			     sizeof(rcvbuf)));
	ASSERT_OK(kcm_u_attach(kcm, la, prog));
	ASSERT_OK(kcm_sndbuf_for(kcm, len));
	ASSERT_EQ(send(kcm, sbuf, len, MSG_DONTWAIT), len);
	usleep(200000);
	/* Stuck on the first connection, whose peer does not read. */
	ASSERT_ERRNO(recv(pb, in, 1, MSG_DONTWAIT), EAGAIN);
	ASSERT_OK(kcm_u_attach(kcm, lb, prog));
	pid = fork();
	ASSERT_GE(pid, 0);
	if (!pid) {
		kcm_u_set_timeo(pb, SO_RCVTIMEO, 5000);
		_exit(kcm_u_read_full(pb, in, len) || memcmp(in, sbuf, len));
	}
	ASSERT_OK(kcm_u_unattach(kcm, la));
	ASSERT_EQ(kcm_wait_child(pid), 0);
	close(kcm);
}

/* Closing a socket with unsent messages: dropped, nothing breaks. */
TEST(send_close_with_queue)
{
	int kcm = kcm_socket(SOCK_DGRAM), c = kcm_u_clone(kcm), i;
	int peer, local, prog = kcm_u_parser_len4();

	ASSERT_GE(c, 0);
	for (i = 0; i < 5; i++)
		ASSERT_EQ(send_msg(c, 100, i, 0), KCM_U_HDR + 100);
	close(c);
	ASSERT_OK(kcm_u_tcp_pair(&peer, &local));
	kcm_u_set_timeo(peer, SO_RCVTIMEO, 5000);
	ASSERT_OK(kcm_u_attach(kcm, local, prog));
	ASSERT_EQ(send_msg(kcm, 100, 99, 0), KCM_U_HDR + 100);
	ASSERT_EQ(tcp_read_msg(peer, sbuf, sizeof(sbuf)), 99);
	close(kcm);
}

/* A socket closed in the middle of writing a message: it is finished. */
TEST_DIFFERS(send_close_midmessage,
	     "closing drops a half-written message: the connection carries a torn one")
{
	int kcm = kcm_socket(SOCK_DGRAM), prog = kcm_u_parser_len4();
	int c = kcm_u_clone(kcm), peer, local, sndbuf = 16384;
	size_t len = kcm_u_msg_build(sbuf, 600000, 12);
	char *in = malloc(len + 100);

	ASSERT_GE(c, 0);
	ASSERT_OK(kcm_u_tcp_pair(&peer, &local));
	ASSERT_OK(setsockopt(local, SOL_SOCKET, SO_SNDBUF, &sndbuf,
			     sizeof(sndbuf)));
	ASSERT_OK(kcm_u_attach(kcm, local, prog));
	ASSERT_OK(kcm_sndbuf_for(c, len));
	ASSERT_EQ(send(c, sbuf, len, MSG_DONTWAIT), len);
	usleep(100000);
	close(c);
	kcm_u_set_timeo(peer, SO_RCVTIMEO, 5000);
	ASSERT_OK(kcm_u_read_full(peer, in, len));
	ASSERT_EQ(memcmp(in, sbuf, len), 0);
	/* The connection is free again for the sockets left. */
	ASSERT_EQ(send_msg(kcm, 100, 13, 0), KCM_U_HDR + 100);
	ASSERT_EQ(tcp_read_msg(peer, sbuf, sizeof(sbuf)), 13);
	close(kcm);
}

TEST(send_sendfile)
{
	int peer, local, kcm = kcm_with_tcp(SOCK_DGRAM, &peer, &local);
	char path[] = "/tmp/kcm_sendfileXXXXXX";
	size_t len = kcm_u_msg_build(sbuf, 20000, 31);
	int file = mkstemp(path);

	ASSERT_GE(file, 0);
	unlink(path);
	ASSERT_OK(kcm_u_write_all(file, sbuf, len));
	ASSERT_EQ(sendfile(kcm, file, &(off_t){ 0 }, len), len);
	ASSERT_EQ(tcp_read_msg(peer, sbuf, sizeof(sbuf)), 31);
	close(kcm);
}

/* A server answers each request on the same mux. */
TEST(request_response)
{
	int peer, local, kcm = kcm_with_tcp(SOCK_DGRAM, &peer, &local);
	char req[64];
	int i;

	kcm_u_set_timeo(kcm, SO_RCVTIMEO, 5000);
	for (i = 0; i < 20; i++) {
		size_t len = kcm_u_msg_build(req, 40, i);
		ssize_t n;

		ASSERT_OK(kcm_u_write_all(peer, req, len));
		n = recv(kcm, sbuf, sizeof(sbuf), 0);
		ASSERT_EQ(n, len);
		ASSERT_EQ(kcm_u_msg_check(sbuf, n), i);
		ASSERT_EQ(send_msg(kcm, 60, 1000 + i, 0), KCM_U_HDR + 60);
		ASSERT_EQ(tcp_read_msg(peer, sbuf, sizeof(sbuf)), 1000 + i);
	}
	close(kcm);
}

/*
 * A sendmmsg() of small messages goes out in packs (several messages per
 * skb): more than one pack's worth, every message whole and in order,
 * and /proc counts messages, not packs.
 */
TEST(send_batch_packs)
{
	struct kcm_proc_obj obj[4];
	int peer, local, kcm, i;

	kcm_enter_netns();
	kcm = kcm_with_tcp(SOCK_DGRAM, &peer, &local);
	for (i = 0; i < 3; i++) {
		mm_build(MM_MAX, 100 + i * 60, i * MM_MAX);
		ASSERT_EQ(sendmmsg(kcm, mm, MM_MAX, 0), MM_MAX);
	}
	expect_msgs(peer, 0, 3 * MM_MAX);
	ASSERT_EQ(kcm_proc_objs(obj, ARRAY_SIZE(obj)), 2);
	for (i = 0; i < 2; i++) {
		EXPECT_EQ(obj[i].tx_msgs, 3 * MM_MAX);
		EXPECT_EQ(obj[i].tx_bytes,
			  MM_MAX * (3 * KCM_U_HDR + 100 + 160 + 220));
	}
	close(kcm);
}

/*
 * Reads whole messages from @fd until it has been quiet for a while,
 * marking their seqs in @seen; a torn message at the end is left.
 * Returns the number read, or -1 for a seq seen twice, out of order or
 * out of range.
 */
static int read_marking(int fd, unsigned char *seen, uint32_t n)
{
	long seq, last = -1;
	int got = 0;

	kcm_u_set_timeo(fd, SO_RCVTIMEO, 1000);
	while ((seq = tcp_read_msg(fd, sbuf, sizeof(sbuf))) >= 0) {
		if (seq >= n || seen[seq] || seq <= last)
			return -1;
		seen[seq] = 1;
		last = seq;
		got++;
	}
	return got;
}

/*
 * Unattach the psock a pack is partly written to: the messages of the
 * pack it had written whole are sent, not sent again; the rest go out on
 * the other psock.  Every message arrives exactly once, in order on each
 * connection.
 */
TEST(send_unattach_pack_midway)
{
	int kcm, prog = kcm_u_parser_len4();
	int pa, la, pb, lb, size = 16384, ga, gb;
	uint32_t sent = 0, i;
	unsigned char *seen;
	struct kcm_stats st;
	int n;

	kcm_enter_netns();
	kcm = kcm_socket(SOCK_DGRAM);
	ASSERT_OK(kcm_u_tcp_pair(&pa, &la));
	ASSERT_OK(kcm_u_tcp_pair(&pb, &lb));
	ASSERT_OK(setsockopt(la, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size)));
	ASSERT_OK(setsockopt(pa, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size)));
	ASSERT_OK(kcm_u_attach(kcm, la, prog));
	/* The peer does not read: batches queue up behind a full TCP. */
	for (;;) {
		mm_build(MM_MAX, 197, sent);
		n = sendmmsg(kcm, mm, MM_MAX, MSG_DONTWAIT);
		if (n < 0)
			break;
		sent += n;
		ASSERT_LT(sent, 1 << 16);
	}
	ASSERT_EQ(errno, EAGAIN);
	ASSERT_OK(kcm_u_attach(kcm, lb, prog));
	ASSERT_OK(kcm_u_unattach(kcm, la));
	seen = calloc(sent, 1);
	ASSERT_NE(seen, NULL);
	ga = read_marking(pa, seen, sent);
	gb = read_marking(pb, seen, sent);
	TH_LOG("%u sent: %d on the first connection, %d on the second",
	       sent, ga, gb);
	ASSERT_GE(ga, 0);
	ASSERT_GE(gb, 0);
	ASSERT_EQ(ga + gb, (int)sent);
	for (i = 0; i < sent; i++)
		ASSERT_EQ(seen[i], 1);
	ASSERT_OK(kcm_stats_read(&st));
	EXPECT_EQ(st.mux[KS_UNATTACH_RSVD], 1);
	close(kcm);
	free(seen);
}

/* ---- a message may not outgrow the send buffer -------------------------- */

#define NO_LIMIT "an open message grows without limit"
#define TB_SNDBUF	32768		/* SO_SNDBUF: the socket gets twice it */
#define TB_LIMIT	(2 * TB_SNDBUF)
#define TB_PIECE	8192

static char tb_buf[4 * TB_LIMIT];

/* In a namespace of its own, a socket of @type that takes 64 KB messages. */
static int tb_socket(int type, int *peer)
{
	int local, kcm;

	kcm_enter_netns();
	kcm = kcm_with_tcp(type, peer, &local);
	ASSERT_OK(setsockopt(kcm, SOL_SOCKET, SO_SNDBUF, &(int){ TB_SNDBUF },
			     sizeof(int)));
	ASSERT_EQ(kcm_u_getsockopt_int(kcm, SOL_SOCKET, SO_SNDBUF), TB_LIMIT);
	return kcm;
}

/* tx_too_big of the namespace's only mux. */
static long long tb_count(void)
{
	char line[1024];

	ASSERT_OK(kcm_ext_find("mux", NULL, NULL, line, sizeof(line)));
	return kcm_ext_num(line, "tx_too_big");
}

/* Flags that keep a message of a @type socket open, or end it. */
static int tb_more(int type)
{
	return type == SOCK_DGRAM ? MSG_MORE : 0;
}

static int tb_end(int type)
{
	return type == SOCK_DGRAM ? 0 : MSG_EOR;
}

/*
 * After a dropped message the socket works: message @seq of @plen bytes
 * arrives whole, and nothing of the dropped one arrived before it.
 */
static void tb_works(int kcm, int type, int peer, size_t plen, uint32_t seq)
{
	size_t len = kcm_u_msg_build(sbuf, plen, seq);

	ASSERT_EQ(send(kcm, sbuf, len, tb_end(type)), len);
	ASSERT_EQ(tcp_read_msg(peer, sbuf, sizeof(sbuf)), seq);
	usleep(20000);
	ASSERT_ERRNO(recv(peer, sbuf, 1, MSG_DONTWAIT), EAGAIN);
}

/*
 * Pieces of an open message are taken while it fits SO_SNDBUF; the piece
 * that would make it longer fails with EMSGSIZE, and so does every piece
 * after it up to the one that ends it.  The message is counted once, no
 * byte of it goes out, and the next message does.
 */
static void tb_pieces(int type, int dontwait)
{
	int peer, kcm = tb_socket(type, &peer), i, fl = dontwait;
	int n = TB_LIMIT / TB_PIECE;
	size_t len = kcm_u_msg_build(tb_buf, TB_LIMIT + 3 * TB_PIECE - 4, 1);

	ASSERT_EQ(len, TB_LIMIT + 3 * TB_PIECE);
	for (i = 0; i < n; i++)
		ASSERT_EQ(send(kcm, tb_buf + i * TB_PIECE, TB_PIECE,
			       fl | tb_more(type)), TB_PIECE);
	ASSERT_EQ(tb_count(), 0);
	/* One byte more than the buffer. */
	ASSERT_ERRNO(send(kcm, tb_buf + n * TB_PIECE, 1, fl | tb_more(type)),
		     EMSGSIZE);
	ASSERT_EQ(tb_count(), 1);
	ASSERT_ERRNO(send(kcm, tb_buf + n * TB_PIECE, TB_PIECE,
			  fl | tb_more(type)), EMSGSIZE);
	ASSERT_ERRNO(send(kcm, tb_buf, 0, fl | tb_more(type)), EMSGSIZE);
	ASSERT_ERRNO(send(kcm, tb_buf + (n + 1) * TB_PIECE, TB_PIECE,
			  fl | tb_end(type)), EMSGSIZE);
	ASSERT_EQ(tb_count(), 1);
	tb_works(kcm, type, peer, 300, 2);
	/* A whole message of exactly the buffer goes; one byte more not. */
	len = kcm_u_msg_build(tb_buf, TB_LIMIT - 4, 3);
	ASSERT_EQ(send(kcm, tb_buf, len, fl | tb_end(type)), len);
	ASSERT_EQ(tcp_read_msg(peer, sbuf, sizeof(sbuf)), 3);
	len = kcm_u_msg_build(tb_buf, TB_LIMIT - 3, 4);
	ASSERT_ERRNO(send(kcm, tb_buf, len, fl | tb_end(type)), EMSGSIZE);
	ASSERT_EQ(tb_count(), 2);
	tb_works(kcm, type, peer, 10, 5);
	close(kcm);
}

TEST_DIFFERS(send_too_big_pieces, NO_LIMIT)
{
	tb_pieces(SOCK_DGRAM, 0);
	tb_pieces(SOCK_DGRAM, MSG_DONTWAIT);
	tb_pieces(SOCK_SEQPACKET, 0);
	tb_pieces(SOCK_SEQPACKET, MSG_DONTWAIT);
}

/* Raising SO_SNDBUF raises the limit, for the message being built too. */
TEST_DIFFERS(send_too_big_raise, NO_LIMIT)
{
	int peer, kcm = tb_socket(SOCK_SEQPACKET, &peer), i;
	size_t len = kcm_u_msg_build(tb_buf, 2 * TB_LIMIT - 4, 6);

	for (i = 0; i < TB_LIMIT / TB_PIECE; i++)
		ASSERT_EQ(send(kcm, tb_buf + i * TB_PIECE, TB_PIECE, 0),
			  TB_PIECE);
	ASSERT_OK(setsockopt(kcm, SOL_SOCKET, SO_SNDBUF,
			     &(int){ 2 * TB_SNDBUF }, sizeof(int)));
	ASSERT_EQ(send(kcm, tb_buf + TB_LIMIT, len - TB_LIMIT, MSG_EOR),
		  len - TB_LIMIT);
	ASSERT_EQ(tcp_read_msg(peer, sbuf, sizeof(sbuf)), 6);
	ASSERT_EQ(tb_count(), 0);
	close(kcm);
}

/* writev(): one call, all or nothing. */
TEST_DIFFERS(send_too_big_writev, NO_LIMIT)
{
	int peer, kcm = tb_socket(SOCK_SEQPACKET, &peer);
	size_t len = kcm_u_msg_build(tb_buf, TB_LIMIT, 7);
	struct iovec iov[2] = {
		{ tb_buf, TB_PIECE }, { tb_buf + TB_PIECE, len - TB_PIECE },
	};

	ASSERT_ERRNO(writev(kcm, iov, 2), EMSGSIZE);
	ASSERT_EQ(tb_count(), 1);
	/* It ended its message: the next call starts a new one. */
	tb_works(kcm, SOCK_SEQPACKET, peer, 64, 8);
	iov[1].iov_len = TB_LIMIT - TB_PIECE;
	len = kcm_u_msg_build(tb_buf, TB_LIMIT - 4, 9);
	ASSERT_EQ(writev(kcm, iov, 2), len);
	ASSERT_EQ(tcp_read_msg(peer, sbuf, sizeof(sbuf)), 9);
	close(kcm);
}

/*
 * sendmmsg(): a batch of pieces stops at the one that fails (the call
 * returns the pieces taken); calls that go on with the rest of the
 * message fail too, up to its end.  Sent again as a batch, the rest fails
 * at its first piece, which ends the drop: the caller sees the error.
 */
static void tb_mmsg(int type)
{
	int peer, kcm = tb_socket(type, &peer), i, n = TB_LIMIT / TB_PIECE;
	struct mmsghdr v[12];
	struct iovec iov[12];

	ASSERT_LT(n + 2, (int)ARRAY_SIZE(v));
	kcm_u_msg_build(tb_buf, (n + 3) * TB_PIECE - 4, 10);
	memset(v, 0, sizeof(v));
	for (i = 0; i < n + 3; i++) {
		iov[i].iov_base = tb_buf + i * TB_PIECE;
		iov[i].iov_len = TB_PIECE;
		v[i].msg_hdr.msg_iov = &iov[i];
		v[i].msg_hdr.msg_iovlen = 1;
	}
	ASSERT_EQ(sendmmsg(kcm, v, n + 2, tb_more(type)), n);
	ASSERT_EQ(tb_count(), 1);
	ASSERT_ERRNO(sendmmsg(kcm, v + n + 1, 1, tb_more(type)), EMSGSIZE);
	ASSERT_ERRNO(sendmmsg(kcm, v + n + 2, 1, tb_end(type)), EMSGSIZE);
	ASSERT_EQ(tb_count(), 1);
	tb_works(kcm, type, peer, 100, 11);

	ASSERT_EQ(sendmmsg(kcm, v, n + 2, tb_more(type)), n);
	ASSERT_ERRNO(sendmmsg(kcm, v + n, 3, tb_more(type)), EMSGSIZE);
	ASSERT_EQ(tb_count(), 2);
	tb_works(kcm, type, peer, 100, 12);
	close(kcm);
}

TEST_DIFFERS(send_too_big_mmsg, NO_LIMIT)
{
	tb_mmsg(SOCK_DGRAM);
	tb_mmsg(SOCK_SEQPACKET);
}

/*
 * sendfile() and splice() hand a message over in pieces: one that would
 * outgrow the buffer is cut short at the piece that fails, returning what
 * it sent before it; the call that goes on with the rest fails (it would
 * have gone out as a message of its own), and the message after that
 * goes out whole.  @plen: 2 * TB_LIMIT - 4 ends the message with the
 * piece that fails, more goes on after it.
 */
static void tb_splice(int type, int use_splice, size_t plen)
{
	int peer, kcm = tb_socket(type, &peer), file, p[2];
	char path[] = "/tmp/kcm_tbXXXXXX";
	size_t len = kcm_u_msg_build(tb_buf, plen, 12);
	loff_t off = 0;
	ssize_t n;

	file = mkstemp(path);
	ASSERT_GE(file, 0);
	unlink(path);
	ASSERT_OK(kcm_u_write_all(file, tb_buf, len));
	if (!use_splice) {
		n = sendfile(kcm, file, &off, len);
	} else {
		ASSERT_OK(pipe(p));
		ASSERT_EQ(fcntl(p[0], F_SETPIPE_SZ, 4 * TB_LIMIT),
			  4 * TB_LIMIT);
		ASSERT_EQ(splice(file, &off, p[1], NULL, len, 0), len);
		n = splice(p[0], NULL, kcm, NULL, len, 0);
	}
	/* Cut short, or refused outright; never all of it. */
	if (n >= 0) {
		ASSERT_LE(n, TB_LIMIT);
		if (!use_splice)
			n = sendfile(kcm, file, &off, len - off);
		else
			n = splice(p[0], NULL, kcm, NULL, len, 0);
	}
	ASSERT_EQ(n, -1);
	ASSERT_EQ(errno, EMSGSIZE);
	ASSERT_EQ(tb_count(), 1);
	if (use_splice) {
		close(p[0]);
		close(p[1]);
	}
	close(file);
	/* The caller saw the error: the next message is new. */
	tb_works(kcm, type, peer, 1000, 13);
	close(kcm);
}

TEST_DIFFERS(send_too_big_sendfile, NO_LIMIT)
{
	tb_splice(SOCK_DGRAM, 0, 2 * TB_LIMIT - 4);
	tb_splice(SOCK_DGRAM, 0, 2 * TB_LIMIT + 1000);
	tb_splice(SOCK_SEQPACKET, 0, 2 * TB_LIMIT - 4);
	tb_splice(SOCK_DGRAM, 1, 2 * TB_LIMIT - 4);
	tb_splice(SOCK_SEQPACKET, 1, 2 * TB_LIMIT + 1000);
}

/* /proc counts what was sent, per socket and per psock. */
TEST(proc_counts_tx)
{
	struct kcm_proc_obj obj[4];
	int peer, local, kcm, i;

	kcm_enter_netns();
	kcm = kcm_with_tcp(SOCK_DGRAM, &peer, &local);
	for (i = 0; i < 5; i++)
		ASSERT_EQ(send_msg(kcm, 16, i, 0), KCM_U_HDR + 16);
	for (i = 0; i < 5; i++)
		ASSERT_EQ(tcp_read_msg(peer, sbuf, sizeof(sbuf)), i);
	/* One kcm- line and one psock- line. */
	ASSERT_EQ(kcm_proc_objs(obj, ARRAY_SIZE(obj)), 2);
	for (i = 0; i < 2; i++) {
		EXPECT_EQ(obj[i].tx_msgs, 5);
		EXPECT_EQ(obj[i].tx_bytes, 5 * 20);
	}
	close(kcm);
}

KCM_TEST_MAIN
