// SPDX-License-Identifier: GPL-2.0
/*
 * io_uring on KCM sockets (liburing, linked statically): sends and
 * receives of whole messages, several in flight, multishot receive into
 * provided buffers, cancellation, and a close with a receive in flight.
 *
 * Every test but the one marked TEST_DIFFERS is of behaviour the
 * distribution's kcm.ko shares: io_uring only calls the socket's
 * sendmsg, recvmsg and poll, so a message is whole on both modules.
 * A kernel with io_uring disabled (kernel.io_uring_disabled, seccomp)
 * gives a SKIP.
 */
#define _GNU_SOURCE
#include <liburing.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "kcm_data.h"

#define NMSG		8		/* messages in flight */
#define RBUF		65536		/* one receive buffer */
#define BGID		7		/* the provided buffer group */
#define NBUFS		16		/* buffers in the group (power of 2) */

static char rbufs[NMSG][RBUF];

/* Whether io_uring_setup() exists: with no params it says EFAULT. */
static int uring_syscall_exists(void)
{
	return syscall(__NR_io_uring_setup, 1, NULL) < 0 && errno == EFAULT;
}

/*
 * io_uring_queue_init(), or SKIP when the kernel does not allow io_uring:
 * built without it, or kernel.io_uring_disabled, or a seccomp filter.
 */
static void uring_init(struct io_uring *ring)
{
	int ret = io_uring_queue_init(64, ring, 0);

	if (ret == -EPERM || (ret < 0 && !uring_syscall_exists()))
		SKIP(return, "io_uring disabled: io_uring_setup: %s", strerror(-ret));
	ASSERT_EQ(ret, 0);
}

static struct io_uring_sqe *uring_sqe(struct io_uring *ring, __u64 data)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);

	ASSERT_TRUE(sqe);
	io_uring_sqe_set_data64(sqe, data);
	return sqe;
}

/*
 * Waits up to @ms for a completion and consumes it: its res and flags go
 * to @res and @flags, the return value is its user_data, or -1 if none
 * came.
 */
static long long uring_reap(struct io_uring *ring, int ms, int *res,
			    unsigned int *flags)
{
	struct __kernel_timespec ts = { .tv_sec = ms / 1000,
					.tv_nsec = (ms % 1000) * 1000000L };
	struct io_uring_cqe *cqe;
	long long data;

	if (io_uring_wait_cqe_timeout(ring, &cqe, &ts))
		return -1;
	data = (long long)cqe->user_data;
	*res = cqe->res;
	if (flags)
		*flags = cqe->flags;
	io_uring_cqe_seen(ring, cqe);
	return data;
}

/* Queues one IORING_OP_RECV of @fd into rbufs[@i], user_data @i. */
static void uring_recv(struct io_uring *ring, int fd, int i)
{
	io_uring_prep_recv(uring_sqe(ring, i), fd, rbufs[i], RBUF, 0);
}

/* How many of the seqs @first..@first+@n-1 are marked in @seen. */
static int seen_all(const char *seen, int first, int n)
{
	int i, c = 0;

	for (i = 0; i < n; i++)
		c += seen[first + i] == 1;
	return c;
}

/*
 * NMSG messages of different sizes go out as SENDs and SENDMSGs, all in
 * flight together (MSG_EOR on SEQPACKET, where a send without it leaves
 * the message open); the TCP peer reads each whole and byte-exact.
 */
static void send_whole(int type)
{
	int peer, local, kcm = kcm_with_tcp(type, &peer, &local);
	int eor = type == SOCK_SEQPACKET ? MSG_EOR : 0;
	static char msgs[NMSG][8192];
	struct iovec iov[NMSG];
	struct msghdr mh[NMSG];
	char seen[NMSG] = { 0 };
	struct io_uring ring;
	size_t len[NMSG];
	int i, res;

	uring_init(&ring);
	for (i = 0; i < NMSG; i++) {
		len[i] = kcm_u_msg_build(msgs[i], 16 + i * 1000, i);
		if (i % 2 == 0) {
			io_uring_prep_send(uring_sqe(&ring, i), kcm, msgs[i],
					   len[i], eor);
			continue;
		}
		iov[i] = (struct iovec){ msgs[i], len[i] };
		mh[i] = (struct msghdr){ .msg_iov = &iov[i], .msg_iovlen = 1 };
		io_uring_prep_sendmsg(uring_sqe(&ring, i), kcm, &mh[i], eor);
	}
	ASSERT_EQ(io_uring_submit(&ring), NMSG);
	for (i = 0; i < NMSG; i++) {
		long long d = uring_reap(&ring, 5000, &res, NULL);

		ASSERT_TRUE(d >= 0 && d < NMSG);
		ASSERT_EQ(res, len[d]);
	}
	for (i = 0; i < NMSG; i++) {
		long n = kcm_u_read_msg(peer, rbufs[0], RBUF);
		long seq;

		ASSERT_GT(n, 0);
		seq = kcm_u_msg_check(rbufs[0], n);
		ASSERT_TRUE(seq >= 0 && seq < NMSG);
		ASSERT_EQ(n, len[seq]);
		seen[seq]++;
	}
	ASSERT_EQ(seen_all(seen, 0, NMSG), NMSG);
	io_uring_queue_exit(&ring);
	close(kcm);
}

TEST(send_dgram)
{
	send_whole(SOCK_DGRAM);
}

TEST(send_seqpacket)
{
	send_whole(SOCK_SEQPACKET);
}

/*
 * IORING_OP_SEND_ZC: KCM sockets do not claim zero-copy send support
 * (SOCK_SUPPORT_ZC), so io_uring refuses it before KCM is called.
 */
TEST(send_zc_refused)
{
	int peer, local, kcm = kcm_with_tcp(SOCK_DGRAM, &peer, &local);
	struct io_uring ring;
	char msg[64];
	size_t len = kcm_u_msg_build(msg, 40, 3);
	int res;

	uring_init(&ring);
	io_uring_prep_send_zc(uring_sqe(&ring, 0), kcm, msg, len, 0, 0);
	ASSERT_EQ(io_uring_submit(&ring), 1);
	ASSERT_EQ(uring_reap(&ring, 5000, &res, NULL), 0);
	ASSERT_EQ(res, -EOPNOTSUPP);
	/* Nothing went out; a plain send still does. */
	ASSERT_EQ(send(kcm, msg, len, 0), len);
	ASSERT_EQ(kcm_u_read_msg(peer, rbufs[0], RBUF), len);
	ASSERT_EQ(kcm_u_msg_check(rbufs[0], len), 3);
	io_uring_queue_exit(&ring);
	close(kcm);
}

/*
 * Sends messages @first..@first+@n-1 of @plen bytes from the TCP peer, one
 * write each and 20 ms apart, so that each starts a TCP segment: the
 * documented parser frames them on both modules (see recv_straddling).
 */
static void send_spaced(int peer, int first, int n, size_t plen)
{
	int i;

	for (i = 0; i < n; i++) {
		ASSERT_OK(kcm_send_msgs(peer, first + i, 1, plen));
		usleep(20000);
	}
}

/*
 * Reaps @n receive completions of whole messages @first..@first+@n-1,
 * one message per completion, each byte-exact.
 */
static void reap_msgs(struct io_uring *ring, int first, int n)
{
	char seen[4 * NMSG] = { 0 };
	int i, res;

	for (i = 0; i < n; i++) {
		long long d = uring_reap(ring, 5000, &res, NULL);
		long seq;

		ASSERT_TRUE(d >= 0 && d < NMSG);
		ASSERT_GT(res, 0);
		seq = kcm_u_msg_check(rbufs[d], res);
		if (seq < first || seq >= first + n)
			TH_LOG("completion %lld: %d bytes, seq %ld", d, res, seq);
		ASSERT_TRUE(seq >= first && seq < first + n);
		seen[seq - first]++;
	}
	ASSERT_EQ(seen_all(seen, 0, n), n);
}

/*
 * NMSG receives wait before anything arrives; NMSG messages complete
 * them, one whole message each.  Then the messages come first and the
 * receives after.
 */
static void recv_whole(int type)
{
	int peer, local, kcm = kcm_with_tcp(type, &peer, &local);
	struct io_uring ring;
	int i, res;

	uring_init(&ring);
	for (i = 0; i < NMSG; i++)
		uring_recv(&ring, kcm, i);
	ASSERT_EQ(io_uring_submit(&ring), NMSG);
	ASSERT_EQ(uring_reap(&ring, 100, &res, NULL), -1);
	send_spaced(peer, 0, NMSG, 300);
	reap_msgs(&ring, 0, NMSG);

	send_spaced(peer, 100, NMSG, 5000);
	usleep(100000);
	for (i = 0; i < NMSG; i++)
		uring_recv(&ring, kcm, i);
	ASSERT_EQ(io_uring_submit(&ring), NMSG);
	reap_msgs(&ring, 100, NMSG);
	ASSERT_ERRNO(recv(kcm, rbufs[0], 1, MSG_DONTWAIT), EAGAIN);
	io_uring_queue_exit(&ring);
	close(kcm);
}

TEST(recv_dgram)
{
	recv_whole(SOCK_DGRAM);
}

TEST(recv_seqpacket)
{
	recv_whole(SOCK_SEQPACKET);
}

/* IORING_OP_RECVMSG: MSG_EOR on a whole message, MSG_TRUNC on a cut one. */
TEST(recvmsg_flags)
{
	int peer, local, kcm = kcm_with_tcp(SOCK_DGRAM, &peer, &local);
	struct iovec iov = { rbufs[0], RBUF };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct io_uring ring;
	int res;

	uring_init(&ring);
	send_spaced(peer, 1, 2, 200);
	io_uring_prep_recvmsg(uring_sqe(&ring, 0), kcm, &mh, 0);
	ASSERT_EQ(io_uring_submit(&ring), 1);
	ASSERT_EQ(uring_reap(&ring, 5000, &res, NULL), 0);
	ASSERT_EQ(res, KCM_U_HDR + 200);
	ASSERT_EQ(kcm_u_msg_check(rbufs[0], res), 1);
	ASSERT_TRUE(mh.msg_flags & MSG_EOR);

	/* A 10-byte buffer: the rest of that message is dropped. */
	iov.iov_len = 10;
	mh.msg_flags = 0;
	io_uring_prep_recvmsg(uring_sqe(&ring, 1), kcm, &mh, 0);
	ASSERT_EQ(io_uring_submit(&ring), 1);
	ASSERT_EQ(uring_reap(&ring, 5000, &res, NULL), 1);
	ASSERT_EQ(res, 10);
	ASSERT_TRUE(mh.msg_flags & MSG_TRUNC);
	ASSERT_ERRNO(recv(kcm, rbufs[0], 1, MSG_DONTWAIT), EAGAIN);
	io_uring_queue_exit(&ring);
	close(kcm);
}

/* A provided buffer ring of NBUFS buffers of RBUF / 4 bytes, group BGID. */
static struct io_uring_buf_ring *buf_ring(struct io_uring *ring, char *mem)
{
	size_t size = NBUFS * sizeof(struct io_uring_buf);
	struct io_uring_buf_reg reg = { .ring_entries = NBUFS, .bgid = BGID };
	struct io_uring_buf_ring *br;
	int i, ret;

	br = mmap(NULL, size, PROT_READ | PROT_WRITE,
		  MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
	ASSERT_TRUE(br != MAP_FAILED);
	reg.ring_addr = (unsigned long)br;
	ret = io_uring_register_buf_ring(ring, &reg, 0);
	if (ret == -EINVAL || ret == -EOPNOTSUPP)
		SKIP(return NULL, "no provided buffer rings: %s", strerror(-ret));
	ASSERT_EQ(ret, 0);
	io_uring_buf_ring_init(br);
	for (i = 0; i < NBUFS; i++)
		io_uring_buf_ring_add(br, mem + i * (RBUF / 4), RBUF / 4, i,
				      io_uring_buf_ring_mask(NBUFS), i);
	io_uring_buf_ring_advance(br, NBUFS);
	return br;
}

/*
 * Multishot receive into provided buffers: one request, one completion
 * per whole message, each in a buffer of its own with IORING_CQE_F_MORE
 * set while the request stays armed.  Messages come before and after it
 * is armed.
 */
TEST(recv_multishot)
{
	int peer, local, kcm = kcm_with_tcp(SOCK_DGRAM, &peer, &local);
	char seen[2 * NMSG] = { 0 };
	struct io_uring_sqe *sqe;
	unsigned int flags;
	struct io_uring ring;
	int i, res;

	uring_init(&ring);
	buf_ring(&ring, &rbufs[0][0]);
	send_spaced(peer, 0, NMSG / 2, 1000);
	usleep(100000);
	sqe = uring_sqe(&ring, 42);
	io_uring_prep_recv_multishot(sqe, kcm, NULL, 0, 0);
	sqe->flags |= IOSQE_BUFFER_SELECT;
	sqe->buf_group = BGID;
	ASSERT_EQ(io_uring_submit(&ring), 1);
	for (i = 0; i < NMSG; i++) {
		long long d;
		long seq;
		int bid;

		if (i == NMSG / 2)
			send_spaced(peer, NMSG / 2, NMSG / 2, 2000);
		d = uring_reap(&ring, 5000, &res, &flags);
		if (res < 0)
			TH_LOG("completion %d: res %d (%s) flags %#x", i, res,
			       strerror(-res), flags);
		ASSERT_EQ(d, 42);
		ASSERT_GT(res, 0);
		ASSERT_TRUE(flags & IORING_CQE_F_BUFFER);
		ASSERT_TRUE(flags & IORING_CQE_F_MORE);
		bid = flags >> IORING_CQE_BUFFER_SHIFT;
		ASSERT_LT(bid, NBUFS);
		seq = kcm_u_msg_check(&rbufs[0][0] + bid * (RBUF / 4), res);
		ASSERT_TRUE(seq >= 0 && seq < NMSG);
		seen[seq]++;
	}
	ASSERT_EQ(seen_all(seen, 0, NMSG), NMSG);
	/* Still armed: cancel it, and the last completion says so. */
	io_uring_prep_cancel64(uring_sqe(&ring, 43), 42, 0);
	ASSERT_EQ(io_uring_submit(&ring), 1);
	for (i = 0; i < 2; i++) {
		long long d = uring_reap(&ring, 5000, &res, &flags);

		ASSERT_TRUE(d == 42 || d == 43);
		if (d == 42) {
			ASSERT_EQ(res, -ECANCELED);
			ASSERT_TRUE(!(flags & IORING_CQE_F_MORE));
		} else {
			ASSERT_EQ(res, 0);
		}
	}
	io_uring_queue_exit(&ring);
	close(kcm);
}

/*
 * A waiting receive cancelled: -ECANCELED, the cancel itself 0, and the
 * socket goes on working, for io_uring and for recv().
 */
TEST(cancel_recv)
{
	int peer, local, kcm = kcm_with_tcp(SOCK_DGRAM, &peer, &local);
	struct io_uring ring;
	int i, res;

	uring_init(&ring);
	uring_recv(&ring, kcm, 0);
	ASSERT_EQ(io_uring_submit(&ring), 1);
	ASSERT_EQ(uring_reap(&ring, 100, &res, NULL), -1);
	io_uring_prep_cancel64(uring_sqe(&ring, 99), 0, 0);
	ASSERT_EQ(io_uring_submit(&ring), 1);
	for (i = 0; i < 2; i++) {
		long long d = uring_reap(&ring, 5000, &res, NULL);

		ASSERT_TRUE(d == 0 || d == 99);
		ASSERT_EQ(res, d == 0 ? -ECANCELED : 0);
	}
	send_spaced(peer, 5, 2, 100);
	uring_recv(&ring, kcm, 1);
	ASSERT_EQ(io_uring_submit(&ring), 1);
	ASSERT_EQ(uring_reap(&ring, 5000, &res, NULL), 1);
	ASSERT_EQ(kcm_u_msg_check(rbufs[1], res), 5);
	ASSERT_EQ(kcm_recv_check(kcm, rbufs[0], RBUF), 6);
	io_uring_queue_exit(&ring);
	close(kcm);
}

/* Waits up to 2 s for /proc/net/kcm to show @socks KCM sockets. */
static int wait_socks(int socks)
{
	struct kcm_proc p;
	int ms;

	for (ms = 0; ms < 2000; ms += 20) {
		if (kcm_proc_read(&p) == 0 && p.socks == socks)
			return 0;
		usleep(20000);
	}
	return -1;
}

/*
 * close() of a KCM socket with a receive in flight: the request holds
 * the file, so the socket lives on and the receive still completes with
 * the next message; once it has, the socket goes.
 */
TEST(close_with_recv_in_flight)
{
	int peer, local, kcm;
	struct io_uring ring;
	int res;

	kcm_enter_netns();
	kcm = kcm_with_tcp(SOCK_DGRAM, &peer, &local);
	uring_init(&ring);
	uring_recv(&ring, kcm, 0);
	ASSERT_EQ(io_uring_submit(&ring), 1);
	ASSERT_EQ(uring_reap(&ring, 100, &res, NULL), -1);
	ASSERT_OK(close(kcm));
	ASSERT_EQ(uring_reap(&ring, 200, &res, NULL), -1);
	ASSERT_OK(wait_socks(1));
	ASSERT_OK(kcm_send_msgs(peer, 9, 1, 64));
	ASSERT_EQ(uring_reap(&ring, 5000, &res, NULL), 0);
	ASSERT_EQ(kcm_u_msg_check(rbufs[0], res), 9);
	ASSERT_OK(wait_socks(0));
	io_uring_queue_exit(&ring);
}

/*
 * close() of the KCM socket and then of the ring with a receive in
 * flight: the ring's teardown cancels it, and the socket, its mux and
 * the attached TCP socket all go (nothing leaks, nothing hangs).
 */
TEST(close_ring_with_recv_in_flight)
{
	int peer, local, kcm;
	struct io_uring ring;
	struct kcm_proc p;
	int res;

	kcm_enter_netns();
	kcm = kcm_with_tcp(SOCK_DGRAM, &peer, &local);
	close(local);
	uring_init(&ring);
	uring_recv(&ring, kcm, 0);
	ASSERT_EQ(io_uring_submit(&ring), 1);
	ASSERT_EQ(uring_reap(&ring, 100, &res, NULL), -1);
	ASSERT_OK(close(kcm));
	io_uring_queue_exit(&ring);
	ASSERT_OK(wait_socks(0));
	ASSERT_OK(kcm_proc_read(&p));
	ASSERT_EQ(p.muxes, 0);
	/* The TCP socket was released: the peer sees its end of stream. */
	ASSERT_EQ(read(peer, rbufs[0], 1), 0);
}

/*
 * Receives in flight while messages of different sizes share and
 * straddle TCP segments: the documented offset-0 parser only frames them
 * on this module (upstream's parser sees the segment's first header).
 */
TEST_DIFFERS(recv_straddling,
	     "the parser sees the segment, not the message: load_word(skb, 0) mis-frames")
{
	int peer, local, kcm = kcm_with_tcp(SOCK_DGRAM, &peer, &local);
	static char buf[NMSG * 256];
	struct io_uring ring;
	size_t len = 0, off;
	int i;

	uring_init(&ring);
	for (i = 0; i < NMSG; i++) {
		len += kcm_u_msg_build(buf + len, 40 + i * 17, i);
		uring_recv(&ring, kcm, i);
	}
	ASSERT_EQ(io_uring_submit(&ring), NMSG);
	for (off = 0; off < len; off += 70) {
		ASSERT_OK(kcm_u_write_all(peer, buf + off,
					  len - off < 70 ? len - off : 70));
		usleep(20000);
	}
	reap_msgs(&ring, 0, NMSG);
	io_uring_queue_exit(&ring);
	close(kcm);
}

/* ---- batched receive (KCM_RECV_BATCH, not in upstream Linux) ---------- */

#define NO_BATCH	"KCM_RECV_BATCH fails with ENOPROTOOPT"
#define BATCH		8		/* KCM_RECV_BATCH of these tests */
#define NBATCHED	(3 * BATCH)	/* messages queued at once */
#define BPLEN		96		/* their payload */
#define BMSG		(KCM_U_HDR + BPLEN)

static void set_batch(int fd, int n)
{
	ASSERT_OK(setsockopt(fd, SOL_KCM, KCM_RECV_BATCH, &n, sizeof(n)));
}

/* The number of KCM_MSG_LENS entries in @mh, or -1 without one. */
static int lens_of(struct msghdr *mh, __u32 *lens, int max)
{
	struct cmsghdr *c = CMSG_FIRSTHDR(mh);
	int n;

	if (!c)
		return -1;
	ASSERT_EQ(c->cmsg_level, SOL_KCM);
	ASSERT_EQ(c->cmsg_type, KCM_MSG_LENS);
	n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(__u32);
	ASSERT_LE(n, max);
	memcpy(lens, CMSG_DATA(c), n * sizeof(__u32));
	return n;
}

/*
 * A batched DGRAM socket with NBATCHED messages from @first on queued,
 * all framed before the test reads: a batched MSG_PEEK sees them all.
 */
static int batched_kcm(int *peer, int first)
{
	char ctl[CMSG_SPACE(NBATCHED * sizeof(__u32))];
	struct iovec iov = { rbufs[0], RBUF };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	int local, kcm = kcm_with_tcp(SOCK_DGRAM, peer, &local), i;
	__u32 lens[NBATCHED];

	set_batch(kcm, NBATCHED);
	ASSERT_OK(kcm_send_msgs(*peer, first, NBATCHED, BPLEN));
	for (i = 0; i < 500; i++) {
		mh.msg_control = ctl;
		mh.msg_controllen = sizeof(ctl);
		if (recvmsg(kcm, &mh, MSG_PEEK | MSG_DONTWAIT) ==
		    NBATCHED * BMSG && lens_of(&mh, lens, NBATCHED) == NBATCHED)
			break;
		usleep(10000);
	}
	ASSERT_LT(i, 500);
	set_batch(kcm, BATCH);
	return kcm;
}

/* @n messages of @buf, back to back, are @first, @first + 1, ... */
static void check_run(const char *buf, int res, int n, int first)
{
	int i;

	ASSERT_EQ(res, n * BMSG);
	for (i = 0; i < n; i++)
		ASSERT_EQ(kcm_u_msg_check(buf + i * BMSG, BMSG), first + i);
}

/*
 * IORING_OP_RECV has no control buffer, so no room for the lengths of a
 * batch: each completion is one whole message, as without the option.
 */
TEST_DIFFERS(recv_batched_one_per_recv, NO_BATCH)
{
	int peer, kcm = batched_kcm(&peer, 0), i, round, res;
	struct io_uring ring;
	char seen[NBATCHED] = { 0 };

	uring_init(&ring);
	for (round = 0; round < NBATCHED / NMSG; round++) {
		for (i = 0; i < NMSG; i++)
			uring_recv(&ring, kcm, i);
		ASSERT_EQ(io_uring_submit(&ring), NMSG);
		for (i = 0; i < NMSG; i++) {
			long long d = uring_reap(&ring, 5000, &res, NULL);
			long seq;

			ASSERT_TRUE(d >= 0 && d < NMSG);
			ASSERT_EQ(res, BMSG);
			seq = kcm_u_msg_check(rbufs[d], res);
			ASSERT_TRUE(seq >= 0 && seq < NBATCHED);
			seen[seq]++;
		}
	}
	ASSERT_EQ(seen_all(seen, 0, NBATCHED), NBATCHED);
	ASSERT_ERRNO(recv(kcm, rbufs[0], 1, MSG_DONTWAIT), EAGAIN);
	io_uring_queue_exit(&ring);
	close(kcm);
}

/*
 * IORING_OP_RECVMSG with a control buffer: a completion is a batch, as
 * many messages as the buffer has lengths for, up to KCM_RECV_BATCH.
 */
TEST_DIFFERS(recv_batched_recvmsg, NO_BATCH)
{
	static const int room[] = { BATCH, 3, BATCH + 5, 1 };
	char ctl[CMSG_SPACE((BATCH + 5) * sizeof(__u32))];
	int peer, kcm = batched_kcm(&peer, 0), i, j, res, p = 0, want;
	struct iovec iov = { rbufs[0], RBUF };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct io_uring ring;
	__u32 lens[BATCH + 5];

	uring_init(&ring);
	for (i = 0; i < (int)ARRAY_SIZE(room); i++) {
		want = room[i] < BATCH ? room[i] : BATCH;
		mh.msg_control = ctl;
		mh.msg_controllen = CMSG_LEN(room[i] * sizeof(__u32));
		mh.msg_flags = 0;
		io_uring_prep_recvmsg(uring_sqe(&ring, i), kcm, &mh, 0);
		ASSERT_EQ(io_uring_submit(&ring), 1);
		ASSERT_EQ(uring_reap(&ring, 5000, &res, NULL), i);
		check_run(rbufs[0], res, want, p);
		ASSERT_TRUE(mh.msg_flags & MSG_EOR);
		ASSERT_EQ(mh.msg_flags & MSG_CTRUNC, 0);
		ASSERT_EQ(lens_of(&mh, lens, BATCH + 5), want);
		for (j = 0; j < want; j++)
			ASSERT_EQ(lens[j], BMSG);
		p += want;
	}
	ASSERT_EQ(p, 2 * BATCH + 4);
	io_uring_queue_exit(&ring);
	close(kcm);
}

/*
 * Multishot receive into provided buffers, no control buffer: one whole
 * message per completion, in order (one reader).
 */
TEST_DIFFERS(recv_batched_multishot, NO_BATCH)
{
	int peer, kcm = batched_kcm(&peer, 0), i, res, bid;
	struct io_uring_sqe *sqe;
	struct io_uring ring;
	unsigned int flags;

	uring_init(&ring);
	buf_ring(&ring, &rbufs[0][0]);
	sqe = uring_sqe(&ring, 42);
	io_uring_prep_recv_multishot(sqe, kcm, NULL, 0, 0);
	sqe->flags |= IOSQE_BUFFER_SELECT;
	sqe->buf_group = BGID;
	ASSERT_EQ(io_uring_submit(&ring), 1);
	for (i = 0; i < NBUFS; i++) {
		ASSERT_EQ(uring_reap(&ring, 5000, &res, &flags), 42);
		ASSERT_TRUE(flags & IORING_CQE_F_BUFFER);
		bid = flags >> IORING_CQE_BUFFER_SHIFT;
		ASSERT_LT(bid, NBUFS);
		check_run(&rbufs[0][0] + bid * (RBUF / 4), res, 1, i);
	}
	io_uring_queue_exit(&ring);
	close(kcm);
}

/*
 * Multishot IORING_OP_RECVMSG into provided buffers: each completion's
 * buffer holds a batch, its KCM_MSG_LENS in the buffer's control part
 * (struct io_uring_recvmsg_out, then the control messages, then the
 * messages), BATCH messages each.
 */
TEST_DIFFERS(recv_batched_multishot_recvmsg, NO_BATCH)
{
	int peer, kcm = batched_kcm(&peer, 0), i, j, res, bid, n, p = 0;
	struct msghdr mh = { .msg_controllen =
			     CMSG_SPACE(BATCH * sizeof(__u32)) };
	struct io_uring_recvmsg_out *out;
	struct io_uring_sqe *sqe;
	struct io_uring ring;
	struct cmsghdr *c;
	unsigned int flags;
	__u32 lens[BATCH];
	char *buf;

	uring_init(&ring);
	buf_ring(&ring, &rbufs[0][0]);
	sqe = uring_sqe(&ring, 42);
	io_uring_prep_recvmsg_multishot(sqe, kcm, &mh, 0);
	sqe->flags |= IOSQE_BUFFER_SELECT;
	sqe->buf_group = BGID;
	ASSERT_EQ(io_uring_submit(&ring), 1);
	for (i = 0; i < NBATCHED / BATCH; i++) {
		ASSERT_EQ(uring_reap(&ring, 5000, &res, &flags), 42);
		if (res < 0)
			TH_LOG("completion %d: %s", i, strerror(-res));
		ASSERT_GT(res, 0);
		ASSERT_TRUE(flags & IORING_CQE_F_BUFFER);
		bid = flags >> IORING_CQE_BUFFER_SHIFT;
		ASSERT_LT(bid, NBUFS);
		buf = &rbufs[0][0] + bid * (RBUF / 4);
		out = io_uring_recvmsg_validate(buf, res, &mh);
		ASSERT_TRUE(out);
		ASSERT_EQ(out->flags & MSG_CTRUNC, 0);
		ASSERT_TRUE(out->flags & MSG_EOR);
		c = io_uring_recvmsg_cmsg_firsthdr(out, &mh);
		ASSERT_TRUE(c);
		ASSERT_EQ(c->cmsg_type, KCM_MSG_LENS);
		n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(__u32);
		ASSERT_EQ(n, BATCH);
		memcpy(lens, CMSG_DATA(c), sizeof(lens));
		for (j = 0; j < n; j++)
			ASSERT_EQ(lens[j], BMSG);
		check_run(io_uring_recvmsg_payload(out, &mh),
			  io_uring_recvmsg_payload_length(out, res, &mh), n, p);
		p += n;
	}
	ASSERT_EQ(p, NBATCHED);
	io_uring_queue_exit(&ring);
	close(kcm);
}

/* ---- a message may not outgrow the send buffer ------------------------ */

/*
 * io_uring sends of the pieces of one message: the piece that makes it
 * longer than SO_SNDBUF completes with -EMSGSIZE, as does every piece
 * after it up to its end; the next message goes out whole.
 */
/*
 * Steering by key (KCM_RECV_KEY) with receives in flight on two sockets
 * of a mux: the key of a message is its number & 3 (classic BPF); every
 * message arrives once, and all those of a key at one socket.
 */
TEST_DIFFERS(recv_steered, "KCM_RECV_KEY fails with ENOPROTOOPT")
{
	struct sock_filter key2[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, KCM_U_HDR),
		BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 3),
		BPF_STMT(BPF_RET | BPF_A, 0),
	};
	struct kcm_recv_key k = { .key_type = KCM_BPF_TYPE_PROG };
	int peer, local, kcm[2], owner[4] = { -1, -1, -1, -1 };
	int i, res, got = 0, n = 32;
	char seen[32] = { 0 };
	struct io_uring ring;
	long long d;
	long seq;

	kcm[0] = kcm_with_tcp(SOCK_DGRAM, &peer, &local);
	kcm[1] = kcm_u_clone(kcm[0]);
	ASSERT_GE(kcm[1], 0);
	k.fprog.len = ARRAY_SIZE(key2);
	k.fprog.filter = key2;
	ASSERT_OK(setsockopt(kcm[1], SOL_KCM, KCM_RECV_KEY, &k, sizeof(k)));
	uring_init(&ring);
	for (i = 0; i < NMSG; i++)
		uring_recv(&ring, kcm[i % 2], i);
	ASSERT_EQ(io_uring_submit(&ring), NMSG);
	ASSERT_OK(kcm_send_msgs(peer, 0, n, 100));
	while (got < n) {
		d = uring_reap(&ring, 5000, &res, NULL);
		ASSERT_TRUE(d >= 0 && d < NMSG);
		ASSERT_GT(res, 0);
		seq = kcm_u_msg_check(rbufs[d], res);
		ASSERT_TRUE(seq >= 0 && seq < n);
		seen[seq]++;
		if (owner[seq & 3] < 0)
			owner[seq & 3] = d % 2;
		ASSERT_EQ(owner[seq & 3], d % 2);
		got++;
		uring_recv(&ring, kcm[d % 2], d);
		ASSERT_EQ(io_uring_submit(&ring), 1);
	}
	ASSERT_EQ(seen_all(seen, 0, n), n);
	io_uring_queue_exit(&ring);
	close(kcm[1]);
	close(kcm[0]);
}

TEST_DIFFERS(send_too_big, "an open message grows without limit")
{
	int peer, local, kcm = kcm_with_tcp(SOCK_SEQPACKET, &peer, &local);
	int sndbuf = 16384, i, res, n = 2 * sndbuf / 8192;
	static char big[6 * 8192];
	struct io_uring ring;
	size_t len;

	uring_init(&ring);
	ASSERT_OK(setsockopt(kcm, SOL_SOCKET, SO_SNDBUF, &sndbuf,
			     sizeof(sndbuf)));
	kcm_u_msg_build(big, sizeof(big) - KCM_U_HDR, 1);
	for (i = 0; i < n + 2; i++) {
		io_uring_prep_send(uring_sqe(&ring, i), kcm, big + i * 8192,
				   8192, i == n + 1 ? MSG_EOR : 0);
		ASSERT_EQ(io_uring_submit(&ring), 1);
		ASSERT_EQ(uring_reap(&ring, 5000, &res, NULL), i);
		ASSERT_EQ(res, i < n ? 8192 : -EMSGSIZE);
	}
	len = kcm_u_msg_build(rbufs[1], 500, 2);
	io_uring_prep_send(uring_sqe(&ring, 9), kcm, rbufs[1], len, MSG_EOR);
	ASSERT_EQ(io_uring_submit(&ring), 1);
	ASSERT_EQ(uring_reap(&ring, 5000, &res, NULL), 9);
	ASSERT_EQ(res, len);
	ASSERT_EQ(kcm_u_read_msg(peer, rbufs[0], RBUF), len);
	ASSERT_EQ(kcm_u_msg_check(rbufs[0], len), 2);
	io_uring_queue_exit(&ring);
	close(kcm);
}

KCM_TEST_MAIN
