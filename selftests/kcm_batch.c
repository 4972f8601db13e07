// SPDX-License-Identifier: GPL-2.0
/*
 * Batched receive (KCM_RECV_BATCH, not in upstream Linux): one recvmsg()
 * returns several whole messages back to back, with a KCM_MSG_LENS control
 * message holding their lengths (and, with KCM_RECV_CONN_ID, a KCM_CONN_ID
 * one holding their connections).
 *
 * Every test sends messages of known bytes, waits until they are all
 * queued on the KCM socket (a batched MSG_PEEK sees them all), then checks
 * each call against a model: as many messages as the count and the buffer
 * allow, never a part of one, each byte and each length as sent.  The
 * distro module answers ENOPROTOOPT to the option, which the TEST_DIFFERS
 * reasons record.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <sys/mman.h>
#include <time.h>

#include "kcm_data.h"

#define NO_BATCH "KCM_RECV_BATCH fails with ENOPROTOOPT"

#define MAXB		256		/* most messages one call here returns */
#define MAXPLEN		3000		/* longest test payload */
#define BUFSZ		(1 << 20)
#define GAP		16		/* between the iovecs of one call */
#define CANARY		0xa5
#define CTL_NONE	((size_t)-1)	/* msg_control NULL */
#define CTL_FULL	(2 * CMSG_SPACE(MAXB * sizeof(__u32)))
#define CTL_BIG		CMSG_SPACE(5000 * sizeof(__u32))

static char rbuf[BUFSZ + 8 * GAP];
static char got[BUFSZ];

static int set_batch(int fd, int n)
{
	return setsockopt(fd, SOL_KCM, KCM_RECV_BATCH, &n, sizeof(n));
}

static int get_batch(int fd)
{
	return kcm_u_getsockopt_int(fd, SOL_KCM, KCM_RECV_BATCH);
}

static int set_conn_id(int fd, int on)
{
	return setsockopt(fd, SOL_KCM, KCM_RECV_CONN_ID, &on, sizeof(on));
}

/* A deterministic pseudo-random number below @n. */
static unsigned int rnd_state = 1;

static size_t rnd(size_t n)
{
	rnd_state = rnd_state * 1103515245 + 12345;
	return n ? (rnd_state >> 8) % n : 0;
}

/* ---- what one call returned ------------------------------------------ */

struct batch {
	ssize_t ret;
	int flags;
	int nlens;		/* entries of KCM_MSG_LENS, -1 without one */
	int nids;		/* entries of KCM_CONN_ID, -1 without one */
	__u32 lens[MAXB];
	__u32 ids[MAXB];
};

static int cmsg_entries(const struct cmsghdr *c, int trunc, __u32 *out)
{
	size_t n;

	ASSERT_GE(c->cmsg_len, CMSG_LEN(0));
	n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(__u32);
	/* Whole entries, unless the control buffer cut it. */
	if (!trunc)
		ASSERT_EQ(c->cmsg_len, CMSG_LEN(n * sizeof(__u32)));
	ASSERT_LE(n, MAXB);
	memcpy(out, CMSG_DATA(c), n * sizeof(__u32));
	return n;
}

/* Fills @b from a msghdr recvmsg() returned @ret for. */
static void parse_msg(struct msghdr *msg, ssize_t ret, struct batch *b)
{
	int trunc = msg->msg_flags & MSG_CTRUNC;
	struct cmsghdr *c;

	b->ret = ret;
	b->flags = msg->msg_flags;
	b->nlens = -1;
	b->nids = -1;
	if (ret < 0 || !msg->msg_control)
		return;
	for (c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR(msg, c)) {
		ASSERT_EQ(c->cmsg_level, SOL_KCM);
		if (c->cmsg_type == KCM_MSG_LENS) {
			/* One, and before the ids. */
			ASSERT_EQ(b->nlens, -1);
			ASSERT_EQ(b->nids, -1);
			b->nlens = cmsg_entries(c, trunc, b->lens);
		} else {
			ASSERT_EQ(c->cmsg_type, KCM_CONN_ID);
			ASSERT_EQ(b->nids, -1);
			b->nids = cmsg_entries(c, trunc, b->ids);
		}
	}
}

/* recvmsg() with @ctl bytes of control space (CTL_NONE: NULL). */
static void recv_iov(int fd, struct iovec *iov, int niov, int flags,
		     size_t ctl, struct batch *b)
{
	static char cbuf[CTL_BIG] __attribute__((aligned(8)));
	struct msghdr msg = { .msg_iov = iov, .msg_iovlen = niov };
	ssize_t ret;
	int err;

	memset(cbuf, 0, sizeof(cbuf));
	if (ctl != CTL_NONE) {
		ASSERT_LE(ctl, sizeof(cbuf));
		msg.msg_control = cbuf;
		msg.msg_controllen = ctl;
	}
	ret = recvmsg(fd, &msg, flags);
	err = errno;
	parse_msg(&msg, ret, b);
	errno = err;
}

static void recv_buf(int fd, void *buf, size_t len, int flags, size_t ctl,
		     struct batch *b)
{
	struct iovec iov = { .iov_base = buf, .iov_len = len };

	recv_iov(fd, &iov, 1, flags, ctl, b);
}

/* ---- what was sent ---------------------------------------------------- */

#define NMAX	256

/* Messages in the order the KCM socket is to receive them. */
struct stream {
	int n;
	size_t off[NMAX + 1];
	char data[NMAX * (KCM_U_HDR + MAXPLEN)];
};

static size_t msg_len(const struct stream *s, int i)
{
	return s->off[i + 1] - s->off[i];
}

/* The bytes of messages @p .. @p + @k - 1. */
static size_t span(const struct stream *s, int p, int k)
{
	return s->off[p + k] - s->off[p];
}

static void stream_add(struct stream *s, size_t plen, uint32_t seq)
{
	ASSERT_LT(s->n, NMAX);
	ASSERT_LE(s->off[s->n] + KCM_U_HDR + plen, sizeof(s->data));
	s->off[s->n + 1] = s->off[s->n] +
			   kcm_u_msg_build(s->data + s->off[s->n], plen, seq);
	s->n++;
}

/* @n messages of 0 to MAXPLEN payload bytes, seq from @seq0. */
static void stream_build(struct stream *s, int n, uint32_t seq0,
			 unsigned int salt)
{
	int i;

	s->n = 0;
	s->off[0] = 0;
	for (i = 0; i < n; i++) {
		unsigned int h = (i + 1) * 2654435761u ^ (salt * 40503u);
		size_t plen = i % 11 == 3 ? (size_t)(i % 4) :
			      (h >> 8) % (MAXPLEN + 1);

		stream_add(s, plen, seq0 + i);
	}
}

static void stream_sizes(struct stream *s, const size_t *plen, int n,
			 uint32_t seq0)
{
	int i;

	s->n = 0;
	s->off[0] = 0;
	for (i = 0; i < n; i++)
		stream_add(s, plen[i], seq0 + i);
}

/*
 * Waits until @n messages of @bytes in all are queued on @fd: a batched
 * MSG_PEEK then returns them all.  The batch option is restored.
 */
static void wait_queued(int fd, int n, size_t bytes)
{
	int old = get_batch(fd), i;
	struct batch b;

	ASSERT_GE(old, 0);
	ASSERT_LE(n, MAXB);
	ASSERT_LE(bytes, sizeof(got));
	ASSERT_OK(set_batch(fd, KCM_RECV_BATCH_MAX));
	for (i = 0; i < 1000; i++) {
		recv_buf(fd, got, sizeof(got), MSG_PEEK | MSG_DONTWAIT,
			 CTL_FULL, &b);
		if (b.ret == (ssize_t)bytes && b.nlens == n)
			break;
		if (b.ret < 0)
			ASSERT_EQ(errno, EAGAIN);
		else
			ASSERT_LT(b.ret, bytes);
		usleep(10000);
	}
	if (i == 1000)
		TH_LOG("queued: %zd bytes in %d messages, want %zu in %d",
		       b.ret, b.nlens, bytes, n);
	ASSERT_LT(i, 1000);
	ASSERT_OK(set_batch(fd, old));
}

static void stream_queue(int kcm, int peer, const struct stream *s)
{
	ASSERT_OK(kcm_u_write_all(peer, s->data, s->off[s->n]));
	wait_queued(kcm, s->n, s->off[s->n]);
}

/*
 * A KCM socket of @type reading @local, with room for all a test sends;
 * @tcp_rcvbuf, when not 0, is set on @local before it is attached (the
 * longest message it may carry).
 */
static int batch_kcm_tcp(int type, int *peer, int *local, int tcp_rcvbuf)
{
	int kcm = kcm_socket(type), prog = kcm_u_parser_len4(), big = 8 << 20;

	ASSERT_GE(kcm, 0);
	ASSERT_GE(prog, 0);
	ASSERT_OK(kcm_u_tcp_pair(peer, local));
	if (tcp_rcvbuf)
		ASSERT_OK(setsockopt(*local, SOL_SOCKET, SO_RCVBUFFORCE,
				     &tcp_rcvbuf, sizeof(tcp_rcvbuf)));
	ASSERT_OK(kcm_u_attach(kcm, *local, prog));
	close(prog);
	ASSERT_OK(setsockopt(kcm, SOL_SOCKET, SO_RCVBUFFORCE, &big,
			     sizeof(big)));
	kcm_u_set_timeo(kcm, SO_RCVTIMEO, 5000);
	kcm_u_set_timeo(*peer, SO_RCVTIMEO, 10000);
	return kcm;
}

static int batch_kcm(int type, int *peer, int *local)
{
	return batch_kcm_tcp(type, peer, local, 0);
}

/*
 * The tests that hold for both message types run as "batch.dgram.NAME"
 * and "batch.seqpacket.NAME": one KCM socket of that type, with the
 * batch-sized receive buffer, fed by one TCP connection from self->peer.
 */
FIXTURE(batch) {
	int kcm, peer, local;
};

FIXTURE_VARIANT(batch) {
	int type;
};

FIXTURE_VARIANT_ADD(batch, dgram) {
	.type = SOCK_DGRAM,
};

FIXTURE_VARIANT_ADD(batch, seqpacket) {
	.type = SOCK_SEQPACKET,
};

FIXTURE_SETUP(batch)
{
	self->kcm = batch_kcm(variant->type, &self->peer, &self->local);
}

FIXTURE_TEARDOWN(batch)
{
	close(self->kcm);
	close(self->peer);
	close(self->local);
}

/* ---- checking a batch ------------------------------------------------- */

/*
 * @b holds messages @p .. @p + @k - 1 of @s, whole, @data their bytes;
 * @lens: whether a KCM_MSG_LENS control message is expected.
 */
static void check_batch(const struct batch *b, const char *data,
			const struct stream *s, int p, int k, int lens)
{
	size_t bytes = span(s, p, k), i;
	int j;

	if (b->ret < 0)
		TH_LOG("messages %d..%d: errno %d (%s)", p, p + k - 1, errno,
		       strerror(errno));
	ASSERT_EQ(b->ret, bytes);
	ASSERT_TRUE(b->flags & MSG_EOR);
	ASSERT_EQ(b->flags & (MSG_TRUNC | MSG_CTRUNC), 0);
	for (i = 0; i < bytes; i++)
		if (data[i] != s->data[s->off[p] + i])
			break;
	if (i < bytes) {
		for (j = p; s->off[j + 1] <= s->off[p] + i; j++)
			;
		TH_LOG("batch of %d from %d: byte %zu differs (message %d)",
		       k, p, i, j);
	}
	ASSERT_EQ(i, bytes);
	if (!lens) {
		ASSERT_EQ(b->nlens, -1);
		return;
	}
	ASSERT_EQ(b->nlens, k);
	for (j = 0; j < k; j++)
		ASSERT_EQ(b->lens[j], msg_len(s, p + j));
}

/* How many whole messages from @p a call may take: the model. */
static int model_count(const struct stream *s, int p, size_t len, int max)
{
	size_t used = 0;
	int k = 0;

	if (max < 2)
		max = 1;
	while (p + k < s->n && k < max && used + msg_len(s, p + k) <= len) {
		used += msg_len(s, p + k);
		k++;
	}
	return k;
}

/* A byte of rbuf that the call must not have written. */
static void check_canary(size_t from, size_t to)
{
	size_t i;

	for (i = from; i < to; i++)
		if ((unsigned char)rbuf[i] != CANARY)
			break;
	if (i < to)
		TH_LOG("byte %zu of the buffer written, outside the batch", i);
	ASSERT_EQ(i, to);
}

/*
 * One non-blocking call with a @len byte buffer cut into @niov iovecs
 * (with gaps between them) and the batch option @batch, checked against
 * the model; advances *@p.  Returns how many messages it took.  A @len of
 * BUFSZ stands for "room for all that is queued".
 */
static int read_model(int kcm, const struct stream *s, int *p, size_t len,
		      int batch, int niov)
{
	size_t cut[4], at = 0, done = 0, n;
	struct iovec iov[4];
	struct batch b;
	int k, i;

	/* BUFSZ: room for all that is left (and some, not a megabyte). */
	if (len == BUFSZ)
		len = span(s, *p, s->n - *p) + 512;
	k = model_count(s, *p, len, batch);
	ASSERT_GE(k, 1);	/* the first message fits, in these calls */
	ASSERT_TRUE(niov >= 1 && niov <= 4);
	ASSERT_LE(len + niov * GAP, sizeof(rbuf));
	for (i = 0; i < niov - 1; i++)
		cut[i] = rnd(len + 1);
	cut[niov - 1] = len;
	for (i = 0; i < niov - 1; i++) {	/* sorted: a few, insertion */
		int j;

		for (j = i + 1; j < niov - 1; j++) {
			if (cut[j] < cut[i]) {
				size_t t = cut[i];

				cut[i] = cut[j];
				cut[j] = t;
			}
		}
	}
	memset(rbuf, CANARY, len + niov * GAP);
	for (i = 0; i < niov; i++) {
		iov[i].iov_base = rbuf + at + i * GAP;
		iov[i].iov_len = cut[i] - at;
		at = cut[i];
	}
	ASSERT_OK(set_batch(kcm, batch));
	recv_iov(kcm, iov, niov, MSG_DONTWAIT, CTL_FULL, &b);
	if (b.ret < 0)
		TH_LOG("len %zu batch %d niov %d at message %d: errno %d",
		       len, batch, niov, *p, errno);
	ASSERT_GE(b.ret, 0);
	/* Gather, and check nothing outside the data was written. */
	for (i = 0; i < niov; i++) {
		char *base = iov[i].iov_base;
		size_t off = base - rbuf;

		n = (size_t)b.ret - done;
		if (n > iov[i].iov_len)
			n = iov[i].iov_len;
		memcpy(got + done, base, n);
		done += n;
		check_canary(off + n, off + iov[i].iov_len + GAP);
	}
	ASSERT_EQ(done, b.ret);
	check_batch(&b, got, s, *p, k, batch > 1);
	*p += k;
	return k;
}

/* ---- the option ------------------------------------------------------- */

TEST_DIFFERS(batch_option, NO_BATCH)
{
	static const int good[] = { 0, 1, 2, 64, KCM_RECV_BATCH_MAX - 1,
				    KCM_RECV_BATCH_MAX, 0, 7 };
	static const int bad[] = { -1, INT_MIN, KCM_RECV_BATCH_MAX + 1,
				   INT_MAX };
	int fd = kcm_socket(SOCK_DGRAM), sp = kcm_socket(SOCK_SEQPACKET);
	int c, a, v = 3;
	socklen_t len = sizeof(v);
	unsigned int i;

	ASSERT_GE(fd, 0);
	ASSERT_GE(sp, 0);
	ASSERT_EQ(get_batch(fd), 0);
	ASSERT_EQ(get_batch(sp), 0);
	for (i = 0; i < ARRAY_SIZE(good); i++) {
		ASSERT_OK(set_batch(fd, good[i]));
		ASSERT_EQ(get_batch(fd), good[i]);
		ASSERT_OK(set_batch(sp, good[i]));
		ASSERT_EQ(get_batch(sp), good[i]);
	}
	/* Refused values leave the one set before. */
	for (i = 0; i < ARRAY_SIZE(bad); i++)
		ASSERT_ERRNO(set_batch(fd, bad[i]), EINVAL);
	ASSERT_ERRNO(setsockopt(fd, SOL_KCM, KCM_RECV_BATCH, &v,
				sizeof(v) - 1), EINVAL);
	ASSERT_ERRNO(setsockopt(fd, SOL_KCM, KCM_RECV_BATCH, &v, 0), EINVAL);
	ASSERT_ERRNO(setsockopt(fd, SOL_KCM, KCM_RECV_BATCH, NULL,
				sizeof(v)), EFAULT);
	ASSERT_EQ(get_batch(fd), 7);
	ASSERT_OK(getsockopt(fd, SOL_KCM, KCM_RECV_BATCH, &v, &len));
	ASSERT_EQ(len, sizeof(int));
	ASSERT_EQ(v, 7);

	/* Clones and accepted sockets start at 0, and are their own. */
	c = kcm_u_clone(fd);
	ASSERT_GE(c, 0);
	ASSERT_EQ(get_batch(c), 0);
	a = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
	ASSERT_GE(a, 0);
	ASSERT_EQ(get_batch(a), 0);
	ASSERT_OK(set_batch(c, 5));
	ASSERT_EQ(get_batch(c), 5);
	ASSERT_EQ(get_batch(a), 0);
	ASSERT_EQ(get_batch(fd), 7);
	a = kcm_u_clone(c);
	ASSERT_GE(a, 0);
	ASSERT_EQ(get_batch(a), 0);
}

/* The distro module's answer, observed there; ours takes the option. */
TEST(batch_option_by_module)
{
	int fd = kcm_socket(SOCK_DGRAM), v = 4;
	socklen_t len = sizeof(v);

	ASSERT_GE(fd, 0);
	if (kcm_test_against_distro()) {
		ASSERT_ERRNO(set_batch(fd, 4), ENOPROTOOPT);
		ASSERT_ERRNO(getsockopt(fd, SOL_KCM, KCM_RECV_BATCH, &v, &len),
			     ENOPROTOOPT);
	} else {
		ASSERT_OK(set_batch(fd, 4));
		ASSERT_EQ(get_batch(fd), 4);
	}
}

/* 0 and 1: one message per call, no KCM_MSG_LENS, as without the option. */
TEST_DIFFERS(batch_off_one_per_call, NO_BATCH)
{
	static struct stream s;
	int peer, local, kcm = batch_kcm(SOCK_DGRAM, &peer, &local);
	struct batch b;
	int i, on;

	for (on = 0; on < 2; on++) {
		ASSERT_OK(set_batch(kcm, on));
		stream_build(&s, 6, 10 * on, on);
		stream_queue(kcm, peer, &s);
		ASSERT_OK(set_batch(kcm, on));
		for (i = 0; i < 6; i++) {
			recv_buf(kcm, rbuf, BUFSZ, 0, CTL_FULL, &b);
			check_batch(&b, rbuf, &s, i, 1, 0);
			ASSERT_EQ(b.nids, -1);
		}
		ASSERT_ERRNO(recv(kcm, rbuf, BUFSZ, MSG_DONTWAIT), EAGAIN);
	}
}

/* ---- byte-exact batches ----------------------------------------------- */

enum { BY_COUNT, BY_EXACT, BY_SHORT };

/*
 * Batches of K messages, the first of @phase, so that over the phases
 * 1..K a batch ends at every boundary between messages; each stopped by
 * the count (@how BY_COUNT), by a buffer exactly their size (BY_EXACT) or
 * by one a byte short of taking the next one too (BY_SHORT); the last
 * batch of each run stops on the empty queue.
 */
TEST_F_DIFFERS(batch, boundaries, NO_BATCH)
{
	enum { N = 40, K = 4 };
	static struct stream s;
	int peer = self->peer, kcm = self->kcm;
	int how, phase, p, want;
	size_t len;

	for (how = BY_COUNT; how <= BY_SHORT; how++) {
		for (phase = 1; phase <= K; phase++) {
			stream_build(&s, N, (how * K + phase) * 1000,
				     how * 16 + phase);
			stream_queue(kcm, peer, &s);
			for (p = 0; p < N; ) {
				want = p ? K : phase;
				if (p + want >= N) {
					want = N - p;
					ASSERT_EQ(read_model(kcm, &s, &p, BUFSZ,
							     64, 1), want);
					continue;
				}
				if (how == BY_COUNT) {
					ASSERT_EQ(read_model(kcm, &s, &p, BUFSZ,
							     want, 1), want);
					continue;
				}
				len = how == BY_EXACT ? span(&s, p, want) :
				      span(&s, p, want + 1) - 1;
				ASSERT_EQ(read_model(kcm, &s, &p, len, 64, 1),
					  want);
			}
			ASSERT_EQ(p, N);
			ASSERT_ERRNO(recv(kcm, rbuf, BUFSZ, MSG_DONTWAIT),
				     EAGAIN);
		}
	}
}

/*
 * Random counts (2..10), buffer sizes (from the next message's size to
 * past what the count allows) and iovec cuts, each call against the
 * model: nothing lost, reordered, split or written outside the batch.
 */
TEST_F_DIFFERS(batch, random_splits, NO_BATCH)
{
	enum { N = 48, ROUNDS = 6 };
	static struct stream s;
	int peer = self->peer, kcm = self->kcm;
	int round, p, batch, more;
	size_t lo, hi;

	rnd_state = 1;
	for (round = 0; round < ROUNDS; round++) {
		stream_build(&s, N, round * 1000, 77 + round);
		stream_queue(kcm, peer, &s);
		for (p = 0; p < N; ) {
			batch = 2 + rnd(9);
			more = N - p < batch + 1 ? N - p : batch + 1;
			lo = msg_len(&s, p);
			hi = span(&s, p, more) + 1;
			read_model(kcm, &s, &p, lo + rnd(hi - lo + 1), batch,
				   1 + rnd(4));
		}
		ASSERT_ERRNO(recv(kcm, rbuf, BUFSZ, MSG_DONTWAIT), EAGAIN);
	}
}

/* A batched MSG_PEEK checked against the model; consumes nothing. */
static void peek_model(int kcm, const struct stream *s, int p, size_t len,
		       int batch)
{
	struct batch b;
	int k;

	if (len == BUFSZ)
		len = span(s, p, s->n - p) + 512;
	k = model_count(s, p, len, batch);
	ASSERT_GE(k, 1);
	ASSERT_OK(set_batch(kcm, batch));
	recv_buf(kcm, got, len, MSG_PEEK | MSG_DONTWAIT, CTL_FULL, &b);
	check_batch(&b, got, s, p, k, batch > 1);
}

/*
 * Many tiny messages written at once (they share TCP segments, and may
 * share buffers in the kernel): batched reads of every size mixed with
 * one-message reads (option 0 and 1) and peeks, from wherever the last
 * read stopped.
 */
TEST_F_DIFFERS(batch, tiny_mixed, NO_BATCH)
{
	enum { N = 250, ROUNDS = 3 };
	static struct stream s;
	int peer = self->peer, kcm = self->kcm;
	int round, p, i, batch, more;
	size_t lo, hi, len;

	rnd_state = 7;
	for (round = 0; round < ROUNDS; round++) {
		s.n = 0;
		s.off[0] = 0;
		for (i = 0; i < N; i++)
			stream_add(&s, (i * 5 + round) % 13, round * 1000 + i);
		stream_queue(kcm, peer, &s);
		for (p = 0; p < N; ) {
			switch (rnd(4)) {
			case 0:
				/* One message, as without the option. */
				read_model(kcm, &s, &p, BUFSZ, rnd(2), 1);
				continue;
			case 1:
				batch = 2 + rnd(63);
				peek_model(kcm, &s, p, BUFSZ, batch);
				read_model(kcm, &s, &p, BUFSZ, batch, 1);
				continue;
			}
			batch = 2 + rnd(63);
			more = N - p < batch + 1 ? N - p : batch + 1;
			lo = msg_len(&s, p);
			hi = span(&s, p, more) + 1;
			len = lo + rnd(hi - lo + 1);
			read_model(kcm, &s, &p, len, batch, 1 + rnd(4));
		}
		ASSERT_ERRNO(recv(kcm, rbuf, BUFSZ, MSG_DONTWAIT), EAGAIN);
	}
}

/* Messages of up to 200 KB among small ones, in one batch and split. */
TEST_DIFFERS(batch_large_messages, NO_BATCH)
{
	static const size_t plen[] = { 100000, 10, 20, 65536, 5, 200000, 1,
				       3000 };
	static struct stream s;
	int peer, local, kcm, round, p;
	size_t hi;

	kcm = batch_kcm_tcp(SOCK_DGRAM, &peer, &local, 2 << 20);
	rnd_state = 3;
	stream_sizes(&s, plen, ARRAY_SIZE(plen), 1);
	stream_queue(kcm, peer, &s);
	p = 0;
	ASSERT_EQ(read_model(kcm, &s, &p, BUFSZ, 8, 3), 8);
	for (round = 0; round < 4; round++) {
		stream_sizes(&s, plen, ARRAY_SIZE(plen), 10 * round);
		stream_queue(kcm, peer, &s);
		for (p = 0; p < s.n; ) {
			hi = span(&s, p, s.n - p < 3 ? s.n - p : 3) + 1;
			read_model(kcm, &s, &p, msg_len(&s, p) +
				   rnd(hi - msg_len(&s, p) + 1), 8,
				   1 + rnd(4));
		}
		ASSERT_ERRNO(recv(kcm, rbuf, BUFSZ, MSG_DONTWAIT), EAGAIN);
	}
}

/* ---- a first message bigger than the buffer --------------------------- */

/* One piece of message @i of @s, from @from, @len bytes, one lens entry. */
static void check_piece(const struct batch *b, const char *data,
			const struct stream *s, int i, size_t from,
			size_t len, int flags)
{
	if (b->ret < 0)
		TH_LOG("message %d from %zu: errno %d", i, from, errno);
	ASSERT_EQ(b->ret, len);
	ASSERT_EQ(b->flags & (MSG_EOR | MSG_TRUNC | MSG_CTRUNC), flags);
	ASSERT_EQ(memcmp(data, s->data + s->off[i] + from, len), 0);
	ASSERT_EQ(b->nlens, 1);
	ASSERT_EQ(b->lens[0], len);
}

TEST_DIFFERS(batch_first_too_big_dgram, NO_BATCH)
{
	static const size_t plen[] = { 1000, 100, 37, 250, 2000, 0 };
	static struct stream s;
	int peer, local, kcm = batch_kcm(SOCK_DGRAM, &peer, &local), p;
	struct batch b;

	stream_sizes(&s, plen, ARRAY_SIZE(plen), 1);
	stream_queue(kcm, peer, &s);
	ASSERT_OK(set_batch(kcm, 8));
	/* As without batching: MSG_TRUNC, the rest of it discarded. */
	recv_buf(kcm, rbuf, 500, 0, CTL_FULL, &b);
	EXPECT_TRUE(b.flags & MSG_EOR);
	check_piece(&b, rbuf, &s, 0, 0, 500, (b.flags & MSG_EOR) | MSG_TRUNC);
	/* Then a batch, stopped by message 4 that does not fit... */
	p = 1;
	ASSERT_EQ(read_model(kcm, &s, &p, 1000, 8, 1), 3);
	/* ... which is truncated in turn when it comes first. */
	recv_buf(kcm, rbuf, 100, 0, CTL_FULL, &b);
	check_piece(&b, rbuf, &s, 4, 0, 100, (b.flags & MSG_EOR) | MSG_TRUNC);
	p = 5;
	ASSERT_EQ(read_model(kcm, &s, &p, BUFSZ, 8, 1), 1);
	ASSERT_ERRNO(recv(kcm, rbuf, BUFSZ, MSG_DONTWAIT), EAGAIN);
}

/*
 * A batched read notes its lengths on the stack (a few), in an array its
 * socket keeps for the next reads (up to 4096) or in one for that read
 * only (more): reads that go from one to another, with control room for
 * 8 to 5000 lengths and a buffer for 40 messages, each return as many as
 * it has room for the lengths of, every length given.
 */
TEST_DIFFERS(batch_lengths_any_room, NO_BATCH)
{
	static const size_t room[] = { 8, 500, 5000, 100, 5000, 500 };
	static struct stream s;
	int peer, local, kcm = batch_kcm(SOCK_DGRAM, &peer, &local);
	int p = 0, i, j, want;
	struct batch b;
	size_t bytes;

	stream_build(&s, NMAX, 1, 5);
	stream_queue(kcm, peer, &s);
	ASSERT_OK(set_batch(kcm, KCM_RECV_BATCH_MAX));
	for (i = 0; i < (int)ARRAY_SIZE(room); i++, p += want) {
		want = room[i] < 40 ? room[i] : 40;
		bytes = span(&s, p, want);
		recv_buf(kcm, rbuf, span(&s, p, 40), MSG_DONTWAIT,
			 CMSG_SPACE(room[i] * sizeof(__u32)), &b);
		ASSERT_EQ(b.ret, (ssize_t)bytes);
		ASSERT_EQ(memcmp(rbuf, s.data + s.off[p], bytes), 0);
		ASSERT_EQ(b.nlens, want);
		ASSERT_EQ(b.flags & MSG_CTRUNC, 0);
		for (j = 0; j < want; j++)
			ASSERT_EQ(b.lens[j], msg_len(&s, p + j));
	}
	want = NMAX - p;
	ASSERT_EQ(read_model(kcm, &s, &p, BUFSZ, MAXB, 1), want);
	ASSERT_ERRNO(recv(kcm, rbuf, BUFSZ, MSG_DONTWAIT), EAGAIN);
}

TEST_DIFFERS(batch_first_too_big_seqpacket, NO_BATCH)
{
	static const size_t plen[] = { 1000, 100, 37, 250, 100, 200, 3000,
				       50, 60 };
	static struct stream s;
	int peer, local, kcm = batch_kcm(SOCK_SEQPACKET, &peer, &local), p;
	struct batch b;

	stream_sizes(&s, plen, ARRAY_SIZE(plen), 1);
	stream_queue(kcm, peer, &s);
	/* Read in pieces, the first one before batching was on. */
	recv_buf(kcm, rbuf, 300, 0, CTL_FULL, &b);
	ASSERT_EQ(b.ret, 300);
	ASSERT_EQ(b.flags & (MSG_EOR | MSG_TRUNC), 0);
	ASSERT_EQ(memcmp(rbuf, s.data, 300), 0);
	ASSERT_OK(set_batch(kcm, 8));
	recv_buf(kcm, rbuf, 300, 0, CTL_FULL, &b);
	check_piece(&b, rbuf, &s, 0, 300, 300, 0);
	/* The remainder alone, though the next three would fit. */
	recv_buf(kcm, rbuf, BUFSZ, 0, CTL_FULL, &b);
	check_piece(&b, rbuf, &s, 0, 600, msg_len(&s, 0) - 600, MSG_EOR);
	/* Then batches again, up to message 6 that does not fit. */
	p = 1;
	ASSERT_EQ(read_model(kcm, &s, &p, 3000, 8, 1), 5);
	recv_buf(kcm, rbuf, 400, 0, CTL_FULL, &b);
	check_piece(&b, rbuf, &s, 6, 0, 400, 0);
	recv_buf(kcm, rbuf, BUFSZ, 0, CTL_FULL, &b);
	check_piece(&b, rbuf, &s, 6, 400, msg_len(&s, 6) - 400, MSG_EOR);
	p = 7;
	ASSERT_EQ(read_model(kcm, &s, &p, BUFSZ, 8, 1), 2);
	ASSERT_ERRNO(recv(kcm, rbuf, BUFSZ, MSG_DONTWAIT), EAGAIN);
}

/* ---- MSG_PEEK, poll ---------------------------------------------------- */

TEST_F_DIFFERS(batch, peek, NO_BATCH)
{
	static struct stream s;
	int peer = self->peer, kcm = self->kcm, i;
	struct batch b;

	stream_build(&s, 12, 500, 5);
	stream_queue(kcm, peer, &s);
	ASSERT_OK(set_batch(kcm, 5));
	for (i = 0; i < 2; i++) {
		recv_buf(kcm, rbuf, BUFSZ, MSG_PEEK, CTL_FULL, &b);
		check_batch(&b, rbuf, &s, 0, 5, 1);
	}
	/* A smaller buffer peeks a smaller batch. */
	recv_buf(kcm, rbuf, span(&s, 0, 3) - 1, MSG_PEEK, CTL_FULL, &b);
	check_batch(&b, rbuf, &s, 0, 2, 1);
	recv_buf(kcm, rbuf, BUFSZ, 0, CTL_FULL, &b);
	check_batch(&b, rbuf, &s, 0, 5, 1);
	recv_buf(kcm, rbuf, BUFSZ, MSG_PEEK | MSG_DONTWAIT, CTL_FULL, &b);
	check_batch(&b, rbuf, &s, 5, 5, 1);
	recv_buf(kcm, rbuf, BUFSZ, 0, CTL_FULL, &b);
	check_batch(&b, rbuf, &s, 5, 5, 1);
	recv_buf(kcm, rbuf, BUFSZ, MSG_PEEK, CTL_FULL, &b);
	check_batch(&b, rbuf, &s, 10, 2, 1);
	recv_buf(kcm, rbuf, BUFSZ, 0, CTL_FULL, &b);
	check_batch(&b, rbuf, &s, 10, 2, 1);
	ASSERT_ERRNO(recv(kcm, rbuf, BUFSZ, MSG_PEEK | MSG_DONTWAIT), EAGAIN);
}

TEST_DIFFERS(batch_poll, NO_BATCH)
{
	static struct stream s;
	int peer, local, kcm = batch_kcm(SOCK_DGRAM, &peer, &local), p = 0;

	ASSERT_OK(set_batch(kcm, 4));
	EXPECT_EQ(kcm_poll1(kcm, POLLIN, 0) & POLLIN, 0);
	stream_build(&s, 10, 0, 3);
	stream_queue(kcm, peer, &s);
	while (p < 10) {
		ASSERT_TRUE(kcm_poll1(kcm, POLLIN, 0) & POLLIN);
		read_model(kcm, &s, &p, BUFSZ, 4, 1);
	}
	ASSERT_EQ(kcm_poll1(kcm, POLLIN, 0) & POLLIN, 0);
}

/* ---- connection ids --------------------------------------------------- */

/* A KCM socket with two connections, psock 0 and psock 1. */
static int two_conns(int *peer, int *local)
{
	int kcm, prog, big = 8 << 20, i;

	kcm_enter_netns();
	kcm = kcm_socket(SOCK_DGRAM);
	prog = kcm_u_parser_len4();
	ASSERT_GE(kcm, 0);
	ASSERT_GE(prog, 0);
	kcm_u_set_timeo(kcm, SO_RCVTIMEO, 5000);
	ASSERT_OK(setsockopt(kcm, SOL_SOCKET, SO_RCVBUFFORCE, &big,
			     sizeof(big)));
	for (i = 0; i < 2; i++) {
		ASSERT_OK(kcm_u_tcp_pair(&peer[i], &local[i]));
		ASSERT_OK(kcm_u_attach(kcm, local[i], prog));
	}
	close(prog);
	return kcm;
}

TEST_DIFFERS(batch_conn_ids, NO_BATCH)
{
	static const char order[] = "0010110100111010";
	static struct stream s, c[2];
	int peer[2], local[2], kcm = two_conns(peer, local);
	int next[2] = { 0 }, i, k, n;
	size_t off, total;
	struct batch b;

	ASSERT_OK(set_conn_id(kcm, 1));
	ASSERT_OK(set_batch(kcm, 16));

	/* A known interleaving: each message queued before the next. */
	stream_build(&s, 16, 0, 11);
	for (i = 0; i < 16; i++) {
		ASSERT_OK(kcm_u_write_all(peer[order[i] - '0'],
					  s.data + s.off[i], msg_len(&s, i)));
		wait_queued(kcm, i + 1, s.off[i + 1]);
	}
	recv_buf(kcm, rbuf, BUFSZ, 0, CTL_FULL, &b);
	check_batch(&b, rbuf, &s, 0, 16, 1);
	ASSERT_EQ(b.nids, 16);
	for (i = 0; i < 16; i++)
		ASSERT_EQ(b.ids[i], order[i] - '0');

	/* Both connections at once: each one's order, each message's id. */
	for (i = 0; i < 2; i++)
		stream_build(&c[i], 30, 1000 * i, 20 + i);
	for (i = 0; i < 30; i++)
		for (k = 0; k < 2; k++)
			ASSERT_OK(kcm_u_write_all(peer[k],
						  c[k].data + c[k].off[i],
						  msg_len(&c[k], i)));
	total = c[0].off[30] + c[1].off[30];
	wait_queued(kcm, 60, total);
	for (n = 0; n < 60; n += b.nlens) {
		recv_buf(kcm, rbuf, BUFSZ, MSG_DONTWAIT, CTL_FULL, &b);
		ASSERT_GE(b.ret, 0);
		ASSERT_EQ(b.flags & (MSG_TRUNC | MSG_CTRUNC), 0);
		ASSERT_EQ(b.nlens, 60 - n < 16 ? 60 - n : 16);
		ASSERT_EQ(b.nids, b.nlens);
		for (i = 0, off = 0; i < b.nlens; off += b.lens[i++]) {
			const struct stream *from;
			__u32 id = b.ids[i];

			ASSERT_LT(id, 2);
			from = &c[id];
			ASSERT_LT(next[id], 30);
			ASSERT_EQ(b.lens[i], msg_len(from, next[id]));
			ASSERT_EQ(memcmp(rbuf + off,
					 from->data + from->off[next[id]],
					 b.lens[i]), 0);
			next[id]++;
		}
		ASSERT_EQ(off, b.ret);
	}
	ASSERT_EQ(next[0], 30);
	ASSERT_EQ(next[1], 30);
	ASSERT_ERRNO(recv(kcm, rbuf, BUFSZ, MSG_DONTWAIT), EAGAIN);
}

/* ---- control space ---------------------------------------------------- */

#define L(n)	((n) * sizeof(__u32))

static const struct ctl_case {
	size_t ctl;
	int conn_id;
} ctl_cases[] = {
	{ CMSG_LEN(L(7)), 0 },
	{ CMSG_SPACE(L(7)), 0 },
	{ CMSG_SPACE(L(7)) + 64, 0 },
	{ CMSG_LEN(L(3)), 0 },
	{ CMSG_LEN(L(3)) + 3, 0 },
	{ CMSG_LEN(L(6)) + 2, 0 },
	{ CMSG_LEN(L(1)), 0 },
	{ CMSG_LEN(0), 0 },
	{ sizeof(struct cmsghdr) - 1, 0 },
	{ 0, 0 },
	{ CTL_NONE, 0 },
	{ CMSG_SPACE(L(7)) + CMSG_LEN(L(7)), 1 },
	{ CMSG_SPACE(L(7)) + CMSG_LEN(L(2)), 1 },
	{ CMSG_SPACE(L(7)) + CMSG_LEN(L(2)) + 1, 1 },
	{ CMSG_SPACE(L(7)) + sizeof(struct cmsghdr) - 1, 1 },
	/* the lengths and part of their padding (none on 32-bit) */
	{ CMSG_LEN(L(7)) + (CMSG_SPACE(L(7)) - CMSG_LEN(L(7))) / 2, 1 },
	{ CMSG_SPACE(L(1)) + CMSG_LEN(L(1)), 1 },
	{ CMSG_LEN(L(3)), 1 },
	{ CMSG_LEN(L(1)) - 1, 1 },
	{ CTL_NONE, 1 },
};

/*
 * The documented rule: a batched read returns no more messages than
 * @ctl bytes of control space can describe, a KCM_MSG_LENS entry each
 * and, with @ids, a KCM_CONN_ID entry each after them.
 */
static int ctl_fit(size_t ctl, int ids)
{
	size_t need;
	int n;

	if (ctl == CTL_NONE)
		return 0;
	for (n = MAXB; n > 0; n--) {
		need = ids ? CMSG_SPACE(L(n)) + CMSG_LEN(L(n)) : CMSG_LEN(L(n));
		if (need <= ctl)
			return n;
	}
	return 0;
}

/*
 * Seven messages queued, a read with each size of control buffer: as
 * many whole messages as it can give lengths (and ids) for, each length
 * and id given, never MSG_CTRUNC.  With room for none, one message as
 * without the option: no KCM_MSG_LENS, and its KCM_CONN_ID (with
 * MSG_CTRUNC where even that does not fit).  The rest come next.
 */
TEST_DIFFERS(batch_control_space, NO_BATCH)
{
	static struct stream s;
	int peer, local, kcm = batch_kcm(SOCK_DGRAM, &peer, &local), i, j, p;
	int fit, n, ctrunc;
	struct batch b;

	ASSERT_OK(set_batch(kcm, 8));
	for (i = 0; i < (int)ARRAY_SIZE(ctl_cases); i++) {
		const struct ctl_case *t = &ctl_cases[i];

		fit = ctl_fit(t->ctl, t->conn_id);
		n = fit ? (fit < 7 ? fit : 7) : 1;
		ctrunc = !fit && t->conn_id &&
			 (t->ctl == CTL_NONE || t->ctl < CMSG_LEN(L(1)));
		ASSERT_OK(set_conn_id(kcm, t->conn_id));
		stream_build(&s, 7, 100 * i, 30 + i);
		stream_queue(kcm, peer, &s);
		recv_buf(kcm, rbuf, BUFSZ, 0, t->ctl, &b);
		TH_LOG("case %d: ctl %zd, ids %d: %zd bytes, flags %#x, %d lens, %d ids",
		       i, (ssize_t)t->ctl, t->conn_id, b.ret, b.flags,
		       b.nlens, b.nids);
		ASSERT_EQ(b.ret, span(&s, 0, n));
		ASSERT_EQ(memcmp(rbuf, s.data, b.ret), 0);
		ASSERT_TRUE(b.flags & MSG_EOR);
		ASSERT_EQ(b.flags & MSG_TRUNC, 0);
		ASSERT_EQ(!!(b.flags & MSG_CTRUNC), ctrunc);
		ASSERT_EQ(b.nlens, fit ? n : -1);
		for (j = 0; j < b.nlens; j++)
			ASSERT_EQ(b.lens[j], msg_len(&s, j));
		if (!t->conn_id)
			ASSERT_EQ(b.nids, -1);
		else if (fit)
			ASSERT_EQ(b.nids, n);
		else if (t->ctl != CTL_NONE && t->ctl >= sizeof(struct cmsghdr))
			ASSERT_EQ(b.nids, t->ctl >= CMSG_LEN(L(1)) ? 1 : 0);
		for (j = 0; j < b.nids; j++)
			ASSERT_EQ(b.ids[j], 0);
		p = n;
		while (p < 7)
			read_model(kcm, &s, &p, BUFSZ, 8, 1);
		ASSERT_ERRNO(recv(kcm, rbuf, BUFSZ, MSG_DONTWAIT), EAGAIN);
	}

	/* recv() and read(): no control at all, one message a call. */
	ASSERT_OK(set_conn_id(kcm, 0));
	stream_build(&s, 7, 5000, 3);
	stream_queue(kcm, peer, &s);
	for (i = 0; i < 7; i++) {
		ASSERT_EQ(i % 2 ? read(kcm, rbuf, BUFSZ) :
			  recv(kcm, rbuf, BUFSZ, 0), msg_len(&s, i));
		ASSERT_EQ(memcmp(rbuf, s.data + s.off[i], msg_len(&s, i)), 0);
	}
	ASSERT_ERRNO(recv(kcm, rbuf, BUFSZ, MSG_DONTWAIT), EAGAIN);
}

/* ---- recvmmsg ----------------------------------------------------------- */

#define MM_E	4
#define MM_B	8

static char mm_data[MM_E][MM_B * (KCM_U_HDR + MAXPLEN)];
static char mm_ctl[MM_E][CMSG_SPACE(L(MM_B))] __attribute__((aligned(8)));

static void mm_setup(struct mmsghdr *mm, struct iovec *iov)
{
	int e;

	memset(mm, 0, MM_E * sizeof(*mm));
	for (e = 0; e < MM_E; e++) {
		iov[e].iov_base = mm_data[e];
		iov[e].iov_len = sizeof(mm_data[e]);
		mm[e].msg_hdr.msg_iov = &iov[e];
		mm[e].msg_hdr.msg_iovlen = 1;
		mm[e].msg_hdr.msg_control = mm_ctl[e];
		mm[e].msg_hdr.msg_controllen = sizeof(mm_ctl[e]);
	}
}

/* The @n entries of @mm hold the whole of @s, batches of MM_B. */
static void mm_check(struct mmsghdr *mm, int n, const struct stream *s)
{
	struct batch b;
	int e, p = 0, k;

	for (e = 0; e < n; e++) {
		k = s->n - p < MM_B ? s->n - p : MM_B;
		parse_msg(&mm[e].msg_hdr, mm[e].msg_len, &b);
		check_batch(&b, mm_data[e], s, p, k, 1);
		p += k;
	}
	ASSERT_EQ(p, s->n);
}

TEST_DIFFERS(batch_recvmmsg, NO_BATCH)
{
	static struct stream s;
	int peer, local, kcm = batch_kcm(SOCK_DGRAM, &peer, &local);
	struct mmsghdr mm[MM_E];
	struct iovec iov[MM_E];

	ASSERT_OK(set_batch(kcm, MM_B));
	stream_build(&s, 30, 0, 9);
	stream_queue(kcm, peer, &s);
	mm_setup(mm, iov);
	ASSERT_EQ(recvmmsg(kcm, mm, MM_E, 0, NULL), MM_E);
	mm_check(mm, MM_E, &s);

	/* Ten: two entries, then the queue is empty. */
	stream_build(&s, 10, 100, 10);
	stream_queue(kcm, peer, &s);
	mm_setup(mm, iov);
	ASSERT_EQ(recvmmsg(kcm, mm, MM_E, 0, NULL), 2);
	mm_check(mm, 2, &s);
	ASSERT_ERRNO(recvmmsg(kcm, mm, MM_E, MSG_DONTWAIT, NULL), EAGAIN);
}

/* ---- blocking --------------------------------------------------------- */

/* A blocked batched read returns the first message, not a full batch. */
TEST_DIFFERS(batch_blocking_waits_for_first, NO_BATCH)
{
	static struct stream s;
	int peer, local, kcm = batch_kcm(SOCK_DGRAM, &peer, &local);
	uint64_t t0;
	struct batch b;
	long ms;
	pid_t pid;

	ASSERT_OK(set_batch(kcm, 8));
	ASSERT_ERRNO(recv(kcm, rbuf, BUFSZ, MSG_DONTWAIT), EAGAIN);
	ASSERT_OK(fcntl(kcm, F_SETFL, O_NONBLOCK));
	ASSERT_ERRNO(recv(kcm, rbuf, BUFSZ, 0), EAGAIN);
	ASSERT_OK(fcntl(kcm, F_SETFL, 0));

	stream_build(&s, 2, 40, 2);
	t0 = kcm_u_now_ns();
	pid = fork();
	ASSERT_GE(pid, 0);
	if (!pid) {
		usleep(300000);
		if (kcm_u_write_all(peer, s.data, msg_len(&s, 0)))
			_exit(1);
		usleep(1500000);
		_exit(kcm_u_write_all(peer, s.data + s.off[1], msg_len(&s, 1)) ?
		      1 : 0);
	}
	recv_buf(kcm, rbuf, BUFSZ, 0, CTL_FULL, &b);
	ms = kcm_u_ms_since(t0);
	TH_LOG("the first message after %ld ms", ms);
	check_batch(&b, rbuf, &s, 0, 1, 1);
	EXPECT_GE(ms, 250);
	ASSERT_LT(ms, 1500);
	recv_buf(kcm, rbuf, BUFSZ, 0, CTL_FULL, &b);
	check_batch(&b, rbuf, &s, 1, 1, 1);
	ASSERT_EQ(kcm_wait_child(pid), 0);

	/* SO_RCVTIMEO still ends the wait. */
	kcm_u_set_timeo(kcm, SO_RCVTIMEO, 200);
	t0 = kcm_u_now_ns();
	ASSERT_ERRNO(recv(kcm, rbuf, BUFSZ, 0), EAGAIN);
	EXPECT_GE(kcm_u_ms_since(t0), 150);
}

/* ---- two readers on one mux -------------------------------------------- */

#define FAIR_N	3000

struct fair {
	int total;
	int got[2];
	unsigned char seen[FAIR_N];
};

/* Reads batches from @fd until all FAIR_N are in, in order per socket. */
static void fair_reader(int fd, int who, struct fair *sh)
{
	time_t end = time(NULL) + 40;
	struct batch b;
	size_t off;
	long seq, last = -1;
	int i;

	while (__atomic_load_n(&sh->total, __ATOMIC_SEQ_CST) < FAIR_N) {
		ASSERT_LT(time(NULL), end);
		recv_buf(fd, rbuf, BUFSZ, 0, CTL_FULL, &b);
		if (b.ret < 0) {
			ASSERT_EQ(errno, EAGAIN);
			continue;
		}
		ASSERT_EQ(b.flags & (MSG_TRUNC | MSG_CTRUNC), 0);
		ASSERT_TRUE(b.nlens >= 1 && b.nlens <= 64);
		for (i = 0, off = 0; i < b.nlens; off += b.lens[i++]) {
			ASSERT_LE(off + b.lens[i], b.ret);
			seq = kcm_u_msg_check(rbuf + off, b.lens[i]);
			ASSERT_GE(seq, 0);
			ASSERT_LT(seq, FAIR_N);
			ASSERT_GT(seq, last);
			last = seq;
			__atomic_fetch_add(&sh->seen[seq], 1, __ATOMIC_SEQ_CST);
		}
		ASSERT_EQ(off, b.ret);
		__atomic_fetch_add(&sh->got[who], b.nlens, __ATOMIC_SEQ_CST);
		__atomic_fetch_add(&sh->total, b.nlens, __ATOMIC_SEQ_CST);
	}
}

/*
 * Two sockets of one mux read batches of 64 while one connection streams:
 * both get a fair share, every message arrives exactly once.
 */
TEST_DIFFERS(batch_two_readers, NO_BATCH)
{
	int peer, local, kcm = batch_kcm(SOCK_DGRAM, &peer, &local);
	int c = kcm_u_clone(kcm), big = 8 << 20, i;
	pid_t reader, sender;
	struct fair *sh;

	ASSERT_GE(c, 0);
	ASSERT_OK(setsockopt(c, SOL_SOCKET, SO_RCVBUFFORCE, &big,
			     sizeof(big)));
	ASSERT_OK(set_batch(kcm, 64));
	ASSERT_OK(set_batch(c, 64));
	kcm_u_set_timeo(kcm, SO_RCVTIMEO, 200);
	kcm_u_set_timeo(c, SO_RCVTIMEO, 200);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_TRUE(sh != MAP_FAILED);
	memset(sh, 0, sizeof(*sh));

	reader = fork();
	ASSERT_GE(reader, 0);
	if (!reader) {
		fair_reader(c, 1, sh);
		_exit(kcm_test_failed);
	}
	sender = fork();
	ASSERT_GE(sender, 0);
	if (!sender)
		_exit(kcm_send_msgs(peer, 0, FAIR_N, 60) ? 1 : 0);
	fair_reader(kcm, 0, sh);
	ASSERT_EQ(kcm_wait_child(sender), 0);
	ASSERT_EQ(kcm_wait_child(reader), 0);

	TH_LOG("socket 0: %d messages, socket 1: %d", sh->got[0], sh->got[1]);
	ASSERT_EQ(sh->total, FAIR_N);
	for (i = 0; i < FAIR_N; i++)
		ASSERT_EQ(sh->seen[i], 1);
	ASSERT_GE(sh->got[0], FAIR_N / 10);
	ASSERT_GE(sh->got[1], FAIR_N / 10);
	ASSERT_ERRNO(recv(kcm, rbuf, BUFSZ, MSG_DONTWAIT), EAGAIN);
	ASSERT_ERRNO(recv(c, rbuf, BUFSZ, MSG_DONTWAIT), EAGAIN);
}

/* ---- a buffer that faults part way ------------------------------------- */

/*
 * The buffer ends at an inaccessible page: the first message fits before
 * it, the second runs into it.  The first is returned (and consumed), the
 * second read whole by the next call.  A first message that faults is
 * EFAULT and nothing is consumed.
 */
TEST_F_DIFFERS(batch, fault_mid_batch, NO_BATCH)
{
	static const size_t plen[] = { 200, 600, 100 };
	static struct stream s;
	int peer = self->peer, kcm = self->kcm, p;
	long pg = sysconf(_SC_PAGESIZE);
	struct batch b;
	char *area, *buf;

	area = mmap(NULL, 2 * pg, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_TRUE(area != MAP_FAILED);
	ASSERT_OK(mprotect(area + pg, pg, PROT_NONE));
	stream_sizes(&s, plen, ARRAY_SIZE(plen), 1);
	stream_queue(kcm, peer, &s);
	ASSERT_OK(set_batch(kcm, 8));

	recv_buf(kcm, area + pg, 4096, 0, CTL_FULL, &b);
	ASSERT_EQ(b.ret, -1);
	ASSERT_EQ(errno, EFAULT);
	recv_buf(kcm, area + pg - 100, 4096, 0, CTL_FULL, &b);
	ASSERT_EQ(b.ret, -1);
	ASSERT_EQ(errno, EFAULT);

	buf = area + pg - (msg_len(&s, 0) + 100);
	recv_buf(kcm, buf, 4096, 0, CTL_FULL, &b);
	check_batch(&b, buf, &s, 0, 1, 1);
	p = 1;
	ASSERT_EQ(read_model(kcm, &s, &p, BUFSZ, 8, 1), 2);
	ASSERT_ERRNO(recv(kcm, rbuf, BUFSZ, MSG_DONTWAIT), EAGAIN);
	munmap(area, 2 * pg);
}

/*
 * Several messages fit before the inaccessible page: the call returns all
 * of those, with their lengths, and the one that runs into the page is
 * first in the queue; MSG_PEEK returns the same.  Five messages of 40
 * bytes into 100 writable bytes give two; eight of 200 into 1000 give
 * five.  They arrive in one write, so the faulting copy spans several
 * messages of one skb.
 */
static void fault_after(int kcm, int peer, size_t len, int n, size_t room,
			int want)
{
	size_t plen[8];
	static struct stream s;
	long pg = sysconf(_SC_PAGESIZE);
	struct batch b;
	char *area, *buf;
	int i, p;

	ASSERT_LE(n, (int)ARRAY_SIZE(plen));
	for (i = 0; i < n; i++)
		plen[i] = len - KCM_U_HDR;
	area = mmap(NULL, 2 * pg, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_TRUE(area != MAP_FAILED);
	ASSERT_OK(mprotect(area + pg, pg, PROT_NONE));
	stream_sizes(&s, plen, n, 1);
	stream_queue(kcm, peer, &s);
	ASSERT_OK(set_batch(kcm, 8));
	buf = area + pg - room;
	recv_buf(kcm, buf, 4096, MSG_PEEK, CTL_FULL, &b);
	check_batch(&b, buf, &s, 0, want, 1);
	recv_buf(kcm, buf, 4096, 0, CTL_FULL, &b);
	check_batch(&b, buf, &s, 0, want, 1);
	p = want;
	ASSERT_EQ(read_model(kcm, &s, &p, BUFSZ, 8, 1), n - want);
	ASSERT_ERRNO(recv(kcm, rbuf, BUFSZ, MSG_DONTWAIT), EAGAIN);
	munmap(area, 2 * pg);
}

TEST_F_DIFFERS(batch, fault_after_several, NO_BATCH)
{
	fault_after(self->kcm, self->peer, 40, 5, 100, 2);
	fault_after(self->kcm, self->peer, 200, 8, 1000, 5);
	/* Exactly at a message's end: that one is returned too. */
	fault_after(self->kcm, self->peer, 200, 8, 800, 4);
}

KCM_TEST_MAIN
