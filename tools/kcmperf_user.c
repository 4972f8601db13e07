// SPDX-License-Identifier: GPL-2.0
/*
 * kcmperf -i user: what an application does without KCM (rx and rr).  One
 * I/O thread polls the connections (epoll), reads at least 64 KB at a
 * time into reference-counted 1 MB chunks, splits them at the length
 * prefixes and hands each complete message, in place, to the next of M
 * worker threads through a single-producer ring (batched publication,
 * futex wake-ups only for a sleeping worker, a per-worker byte limit like
 * SO_RCVBUF); a worker checks (rr: answers) and releases the chunk.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "kcmperf.h"

/*
 * Receive chunks: the I/O thread reads into one per connection and hands
 * out messages that lie in it; every message handed out holds a reference.
 */
struct chunk {
	atomic_int refs;
	size_t cap;
	struct chunk *next;
	char data[];
};

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct chunk *pool;

static struct chunk *chunk_get(size_t need)
{
	struct chunk *c = NULL;

	if (need <= CHUNK_BYTES) {
		need = CHUNK_BYTES;
		pthread_mutex_lock(&pool_lock);
		c = pool;
		if (c)
			pool = c->next;
		pthread_mutex_unlock(&pool_lock);
	}
	if (!c) {
		c = malloc(sizeof(*c) + need);
		if (!c)
			die("out of memory");
		c->cap = need;
	}
	atomic_init(&c->refs, 1);
	return c;
}

static void chunk_put(struct chunk *c, int refs)
{
	if (atomic_fetch_sub_explicit(&c->refs, refs, memory_order_acq_rel) !=
	    refs)
		return;
	if (c->cap != CHUNK_BYTES) {
		free(c);
		return;
	}
	pthread_mutex_lock(&pool_lock);
	c->next = pool;
	pool = c;
	pthread_mutex_unlock(&pool_lock);
}

struct desc {
	struct chunk *c;
	uint32_t off;
	uint32_t len;
	uint32_t src;
};

/* A worker's queue: single producer (the I/O thread), single consumer. */
struct wq {
	struct {			/* written by the I/O thread */
		atomic_uint tail;
		atomic_int wake;	/* futex the worker sleeps on */
		unsigned int next;	/* tail not published yet */
		unsigned int head_seen;
		unsigned long in;	/* bytes queued, ever */
		unsigned long out_seen;
	} __attribute__((aligned(64))) p;
	struct {			/* written by the worker */
		atomic_uint head;
		atomic_ulong out;	/* bytes taken, ever */
		atomic_int sleeping;
	} __attribute__((aligned(64))) c;
	struct desc *ring;
	int idx;
};

struct uconn {
	int fd;
	uint32_t src;
	struct chunk *c;
	size_t start;		/* first byte not handed out */
	size_t end;		/* bytes in c */
	int refs;		/* handed out, not yet added to c->refs */
	bool dead;
	pthread_mutex_t wlock;	/* rr: one answer at a time */
};

static struct wq wqs[MAX_KCMS];
static struct uconn uconns[MAX_CONNS];
static unsigned long qlimit;
static unsigned int next_wq;
static atomic_int space_seq;	/* futex the I/O thread waits on */
static atomic_int io_waiting;
static unsigned long io_bad;

static bool wq_room(struct wq *q)
{
	if (q->p.next - q->p.head_seen < RING_SLOTS &&
	    (q->p.in - q->p.out_seen < qlimit || q->p.in == q->p.out_seen))
		return true;
	q->p.head_seen = atomic_load_explicit(&q->c.head, memory_order_acquire);
	q->p.out_seen = atomic_load_explicit(&q->c.out, memory_order_acquire);
	return q->p.next - q->p.head_seen < RING_SLOTS &&
	       (q->p.in - q->p.out_seen < qlimit || q->p.in == q->p.out_seen);
}

/* The next worker in turn with room, skipping full ones (as KCM does). */
static struct wq *wq_pick(void)
{
	unsigned int i;
	struct wq *q;

	for (i = 0; i < (unsigned int)opt.kcms; i++) {
		q = &wqs[(next_wq + i) % opt.kcms];
		if (wq_room(q)) {
			next_wq = q->idx + 1;
			return q;
		}
	}
	return NULL;
}

/* -m steer: the worker of @msg's key if it has room (kcmperf_steer.c). */
static struct wq *wq_for(const char *msg)
{
	struct wq *q;

	if (opt.mode != MODE_STEER)
		return wq_pick();
	q = &wqs[steer_worker(msg)];
	return wq_room(q) ? q : NULL;
}

static void wq_publish(struct wq *q)
{
	if (atomic_load_explicit(&q->p.tail, memory_order_relaxed) == q->p.next)
		return;
	atomic_store(&q->p.tail, q->p.next);
	if (atomic_load(&q->c.sleeping)) {
		atomic_fetch_add(&q->p.wake, 1);
		futex_wake(&q->p.wake);
	}
}

/* References first: a worker may drop its own as soon as it is published. */
static void io_publish(struct uconn *u)
{
	int i;

	if (u->refs) {
		atomic_fetch_add_explicit(&u->c->refs, u->refs,
					  memory_order_relaxed);
		u->refs = 0;
	}
	for (i = 0; i < opt.kcms; i++)
		wq_publish(&wqs[i]);
}

/* The worker for @msg is full: stop reading until it makes room. */
static struct wq *io_wait_room(struct uconn *u, const char *msg)
{
	struct wq *q;
	int seq;

	io_publish(u);
	for (;;) {
		if (atomic_load(&rx_stop))
			return NULL;
		seq = atomic_load(&space_seq);
		atomic_store(&io_waiting, 1);
		q = wq_for(msg);
		if (!q)
			futex_wait(&space_seq, seq, TICK_MS);
		atomic_store(&io_waiting, 0);
		if (q)
			return q;
	}
}

static void io_kill(struct uconn *u, const char *why)
{
	struct checker ck = { .who = "user-io" };

	show_bad(&ck, u->c->data + u->start, u->end - u->start, why);
	io_bad++;
	atomic_store_explicit(&rxc[opt.kcms].bad, io_bad, memory_order_relaxed);
	u->dead = true;
}

/* Hands out the complete messages in u->c; false when the stream is bad. */
static bool io_split(struct uconn *u)
{
	struct desc *d;
	struct wq *q;
	uint32_t hdr;
	size_t mlen;

	while (u->end - u->start >= 4) {
		memcpy(&hdr, u->c->data + u->start, 4);
		mlen = 4 + (size_t)ntohl(hdr);
		if (mlen > MAX_SIZE) {
			io_publish(u);	/* what was handed out stands */
			io_kill(u, "length out of range");
			return false;
		}
		if (u->end - u->start < mlen)
			break;
		q = wq_for(u->c->data + u->start);
		if (!q)
			q = io_wait_room(u, u->c->data + u->start);
		if (!q)
			return false;
		d = &q->ring[q->p.next++ & (RING_SLOTS - 1)];
		d->c = u->c;
		d->off = u->start;
		d->len = mlen;
		d->src = u->src;
		q->p.in += mlen;
		u->refs++;
		u->start += mlen;
	}
	io_publish(u);
	return true;
}

/* One read() on a readable connection; false when there is no more. */
static bool io_read(struct uconn *u)
{
	size_t avail = u->end - u->start, mlen = 0, room;
	struct chunk *nc;
	uint32_t hdr;
	ssize_t n;

	if (avail >= 4) {
		memcpy(&hdr, u->c->data + u->start, 4);
		mlen = 4 + (size_t)ntohl(hdr);
	}
	room = u->c->cap - u->end;
	if (!avail && atomic_load_explicit(&u->c->refs,
					   memory_order_acquire) == 1) {
		/* nothing handed out is still in use: start over */
		u->start = 0;
		u->end = 0;
		room = u->c->cap;
	}
	if (mlen ? room < mlen - avail : room < READ_MIN) {
		/* move the partial message to a fresh chunk that holds it */
		nc = chunk_get(mlen + READ_MIN);
		memcpy(nc->data, u->c->data + u->start, avail);
		chunk_put(u->c, 1);
		u->c = nc;
		u->start = 0;
		u->end = avail;
	}
	n = read(u->fd, u->c->data + u->end, u->c->cap - u->end);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return false;
	if (n <= 0) {
		note_err(n ? errno : EPIPE);
		u->dead = true;
		return false;
	}
	u->end += n;
	return io_split(u);
}

static void *user_io(void *arg)
{
	struct epoll_event ev[MAX_CONNS];
	int ep = epoll_create1(0), i, n, budget;
	struct uconn *u;

	(void)arg;
	thread_name("kp-io", 0);
	if (ep < 0)
		die_errno("epoll_create1");
	for (i = 0; i < opt.conns; i++) {
		struct epoll_event e = { .events = EPOLLIN,
					 .data.ptr = &uconns[i] };

		if (epoll_ctl(ep, EPOLL_CTL_ADD, uconns[i].fd, &e))
			die_errno("epoll_ctl");
	}
	while (!atomic_load_explicit(&rx_stop, memory_order_relaxed)) {
		n = epoll_wait(ep, ev, MAX_CONNS, TICK_MS);
		for (i = 0; i < n; i++) {
			u = ev[i].data.ptr;
			for (budget = 4; budget && io_read(u); budget--)
				;
			if (u->dead)
				epoll_ctl(ep, EPOLL_CTL_DEL, u->fd, NULL);
		}
	}
	close(ep);
	atomic_store(&rxc[opt.kcms].done, 1);
	return NULL;
}

static void wq_sleep(struct wq *q, unsigned int head)
{
	int seq = atomic_load(&q->p.wake);

	atomic_store(&q->c.sleeping, 1);
	if (atomic_load(&q->p.tail) == head && !atomic_load(&rx_stop))
		futex_wait(&q->p.wake, seq, TICK_MS);
	atomic_store(&q->c.sleeping, 0);
}

/* rr: the answer goes back on the request's connection. */
static void user_answer(struct desc *d)
{
	struct uconn *u = &uconns[d->src];
	char *p = d->c->data + d->off;
	uint32_t src;

	memcpy(&src, p + 4, 4);
	src |= RESP_FLAG;
	memcpy(p + 4, &src, 4);
	pthread_mutex_lock(&u->wlock);
	write_all(u->fd, p, d->len);
	pthread_mutex_unlock(&u->wlock);
}

static void *user_worker(void *arg)
{
	struct wq *q = arg;
	struct counter *c = &rxc[q->idx];
	struct checker *ck = rx_checker("worker-%d", q->idx);
	unsigned int head = 0, tail;
	unsigned long ok = 0, bad = 0, out = 0;
	struct chunk *held = NULL;
	int refs = 0;
	struct desc *d;
	long s;

	thread_name("kp-work-%ld", q->idx);
	for (;;) {
		tail = atomic_load_explicit(&q->p.tail, memory_order_acquire);
		if (tail == head) {
			if (atomic_load(&rx_stop))
				break;
			wq_sleep(q, head);
			continue;
		}
		if (tail - head > WORKER_BATCH)
			tail = head + WORKER_BATCH;
		for (; head != tail; head++) {
			d = &q->ring[head & (RING_SLOTS - 1)];
			s = rx_check(ck, d->c->data + d->off, d->len);
			count(c, &ok, &bad, s);
			if (s >= 0 && opt.mode == MODE_RR)
				user_answer(d);
			out += d->len;
			if (d->c != held) {
				if (held)
					chunk_put(held, refs);
				held = d->c;
				refs = 0;
			}
			refs++;
		}
		chunk_put(held, refs);
		held = NULL;
		atomic_store_explicit(&q->c.out, out, memory_order_release);
		atomic_store(&q->c.head, head);
		if (atomic_load(&io_waiting)) {
			atomic_fetch_add(&space_seq, 1);
			futex_wake(&space_seq);
		}
	}
	atomic_store(&c->done, 1);
	return NULL;
}

/* I/O thread over local[], opt.kcms workers; counters rxc[0..kcms]. */
void user_framer(void)
{
	int i;

	qlimit = opt.rcvbuf ? opt.rcvbuf : USER_QLIMIT;
	eff_rcvbuf = qlimit;
	for (i = 0; i < opt.kcms; i++) {
		wqs[i].idx = i;
		wqs[i].ring = calloc(RING_SLOTS, sizeof(struct desc));
		if (!wqs[i].ring)
			die("out of memory");
		spawn(user_worker, &wqs[i]);
	}
	for (i = 0; i < opt.conns; i++) {
		uconns[i].fd = local[i];
		uconns[i].src = i;
		uconns[i].c = chunk_get(CHUNK_BYTES);
		pthread_mutex_init(&uconns[i].wlock, NULL);
		set_nonblock(local[i]);
	}
	n_rx = opt.kcms + 1;
	spawn(user_io, NULL);
}
