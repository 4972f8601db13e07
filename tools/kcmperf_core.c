// SPDX-License-Identifier: GPL-2.0
/*
 * kcmperf's helpers, shared by every mode: errors, time, threads and
 * their counters, the messages and their checks, loopback TCP pairs and
 * socket options.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "kcmperf.h"

struct counter rxc[MAX_THREADS];
int n_rx, n_tx;
struct shared *sh;

atomic_int rx_stop;
atomic_int measuring;
atomic_int rr_stalled;
static atomic_int bad_shown;

char *pattern;
unsigned int per_buf;
int ncpus;

static pthread_t threads[MAX_THREADS];
static int n_threads;

int *peer;
int *local;
int kfd[MAX_CONNS * MAX_KCMS];
int n_kfd;
int eff_rcvbuf;
int eff_tcp_rcvbuf;

void die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "kcmperf: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

void die_errno(const char *what)
{
	die("%s: %s", what, strerror(errno));
}

/* CLOCK_MONOTONIC in seconds */
double now(void)
{
	return kcm_u_now_ns() / 1e9;
}

void sleep_s(double s)
{
	struct timespec ts;

	if (s <= 0)
		return;
	ts.tv_sec = (time_t)s;
	ts.tv_nsec = (long)((s - ts.tv_sec) * 1e9);
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

void note_err(int err)
{
	int zero = 0;

	atomic_compare_exchange_strong(&sh->first_err, &zero, err);
}

void futex_wait(atomic_int *addr, int val, int ms)
{
	struct timespec ts = { .tv_sec = ms / 1000,
			       .tv_nsec = (ms % 1000) * 1000000L };

	syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, &ts, NULL, 0);
}

void futex_wake(atomic_int *addr)
{
	syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* The state senders share, before anything forks. */
void shared_init(void)
{
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		die_errno("mmap(MAP_SHARED)");
}

/* Names the calling thread, so that perf and top tell the roles apart. */
void thread_name(const char *fmt, long i)
{
	char name[16];

	snprintf(name, sizeof(name), fmt, i);
	prctl(PR_SET_NAME, name);
}

void spawn(void *(*fn)(void *), void *arg)
{
	int err;

	if (n_threads == MAX_THREADS)
		die("too many threads");
	err = pthread_create(&threads[n_threads], NULL, fn, arg);
	if (err)
		die("pthread_create: %s", strerror(err));
	n_threads++;
}

/* Before another run in the same process (scale): counters and flags. */
void counters_reset(void)
{
	memset(rxc, 0, sizeof(rxc));
	memset(sh, 0, sizeof(*sh));
	n_rx = 0;
	n_tx = 0;
	n_kfd = 0;
	atomic_store(&rx_stop, 0);
	atomic_store(&measuring, 0);
	atomic_store(&rr_stalled, 0);
	atomic_store(&bad_shown, 0);
}

void join_all(void)
{
	while (n_threads)
		pthread_join(threads[--n_threads], NULL);
}

unsigned long sum_ok(struct counter *c, int n)
{
	unsigned long s = 0;
	int i;

	for (i = 0; i < n; i++)
		s += atomic_load_explicit(&c[i].ok, memory_order_relaxed);
	return s;
}

unsigned long sum_bad(struct counter *c, int n)
{
	unsigned long s = 0;
	int i;

	for (i = 0; i < n; i++)
		s += atomic_load_explicit(&c[i].bad, memory_order_relaxed);
	return s;
}

int sum_done(struct counter *c, int n)
{
	int s = 0, i;

	for (i = 0; i < n; i++)
		s += atomic_load(&c[i].done);
	return s;
}

void count(struct counter *c, unsigned long *ok, unsigned long *bad, long src)
{
	if (src < 0)
		atomic_store_explicit(&c->bad, ++*bad, memory_order_relaxed);
	else
		atomic_store_explicit(&c->ok, ++*ok, memory_order_relaxed);
}

/* ------------------------------------------------------------ messages */

void pattern_init(void)
{
	uint64_t x = 0x9e3779b97f4a7c15ull;
	size_t i, len = opt.size + PAT_SPAN;

	pattern = malloc(len);
	if (!pattern)
		die("out of memory");
	for (i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		pattern[i] = (char)(x >> 24);
	}
}

static size_t pat_off(uint64_t seq)
{
	return (seq % per_buf) & (PAT_SPAN - 1);
}

/* Bytes of a message's trailer: none below HDR + TRAILER bytes. */
static size_t trailer_len(size_t n)
{
	return n >= HDR + TRAILER ? TRAILER : 0;
}

/* The sequence number, and the trailer that repeats it (complemented). */
void msg_set_seq(char *p, uint64_t seq)
{
	uint64_t t = ~seq;

	memcpy(p + 8, &seq, 8);
	if (trailer_len(opt.size))
		memcpy(p + opt.size - TRAILER, &t, TRAILER);
}

void msg_fill(char *p, uint32_t src, uint64_t seq)
{
	uint32_t len = htonl(opt.size - 4);

	memcpy(p, &len, 4);
	memcpy(p + 4, &src, 4);
	memcpy(p + HDR, pattern + pat_off(seq), opt.size - HDR);
	msg_set_seq(p, seq);
}

/* @n messages of source @src with sequence numbers 0..n-1 */
char *msgs_build(uint32_t src, unsigned int n)
{
	char *buf = malloc(n * opt.size);
	unsigned int i;

	if (!buf)
		die("out of memory");
	for (i = 0; i < n; i++)
		msg_fill(buf + i * opt.size, steer_src(src, i), i);
	return buf;
}

void show_bad(struct checker *ck, const char *p, size_t n, const char *why)
{
	uint32_t len = 0, src = 0;
	uint64_t seq = 0;

	if (atomic_exchange(&bad_shown, 1) && !opt.verbose)
		return;
	if (n >= 4)
		memcpy(&len, p, 4);
	if (n >= 8)
		memcpy(&src, p + 4, 4);
	if (n >= HDR)
		memcpy(&seq, p + 8, 8);
	fprintf(stderr,
		"# kcmperf: bad message on %s: %s: %zu bytes, header length %u, source %u, seq %llu\n",
		ck->who, why, n, ntohl(len), src, (unsigned long long)seq);
}

/*
 * The payload of message @p (@n bytes, sequence number @seq) between its
 * header and its trailer: all of it with -X, else 8 bytes every
 * CHECK_STRIDE, the first right after the header.
 */
static bool payload_ok(const char *p, size_t n, uint64_t seq)
{
	const char *want = pattern + pat_off(seq);
	size_t end = n - trailer_len(n) - HDR, off;

	p += HDR;
	if (opt.full_check)
		return !memcmp(p, want, end);
	for (off = 0; off + 8 <= end; off += CHECK_STRIDE)
		if (memcmp(p + off, want + off, 8))
			return false;
	return true;
}

/*
 * Checks message @p of @n bytes: its size, header, sequence number (not
 * below the last of its source), payload (payload_ok()) and trailer;
 * @flag is the source bit it must carry (RESP_FLAG on answers).  Returns
 * its source, or -1 when it is bad.
 */
long msg_check(struct checker *ck, const char *p, size_t n, uint32_t flag)
{
	uint32_t len, src;
	uint64_t seq, t;

	if (n != opt.size) {
		show_bad(ck, p, n, "wrong size");
		return -1;
	}
	memcpy(&len, p, 4);
	memcpy(&src, p + 4, 4);
	memcpy(&seq, p + 8, 8);
	if (ntohl(len) != n - 4 || (src & RESP_FLAG) != flag ||
	    (src & ~RESP_FLAG) >= ck->nsrc) {
		show_bad(ck, p, n, "bad header");
		return -1;
	}
	src &= ~RESP_FLAG;
	if (seq < ck->next[src]) {
		show_bad(ck, p, n, "sequence number went back");
		return -1;
	}
	if (!payload_ok(p, n, seq)) {
		show_bad(ck, p, n, "payload differs");
		return -1;
	}
	if (trailer_len(n)) {
		memcpy(&t, p + n - TRAILER, TRAILER);
		if (t != ~seq) {
			show_bad(ck, p, n, "trailer differs");
			return -1;
		}
	}
	ck->next[src] = seq + 1;
	return src;
}

/* A checker of sources 0..@nsrc-1, named by @fmt and @i. */
struct checker *checker_new(unsigned int nsrc, const char *fmt, int i)
{
	struct checker *ck = calloc(1, sizeof(*ck) + nsrc * sizeof(ck->next[0]));
	char *who;

	if (!ck || asprintf(&who, fmt, i) < 0)
		die("out of memory");
	ck->nsrc = nsrc;
	ck->who = who;
	return ck;
}

/* ------------------------------------------------------------ sockets */

void set_int(int fd, int level, int name, int val)
{
	if (kcm_u_setsockopt_int(fd, level, name, val))
		die_errno("setsockopt");
}

/* An int socket option, 0 if it cannot be read. */
int get_int(int fd, int level, int name)
{
	int val = kcm_u_getsockopt_int(fd, level, name);

	return val < 0 ? 0 : val;
}

/* SO_RCVTIMEO or SO_SNDTIMEO of @s seconds, 1 ms at the least. */
void set_timeo(int fd, int name, double s)
{
	double ms = s * 1000;

	if (kcm_u_set_timeo(fd, name, ms < 1 ? 1 : ms < INT_MAX ? ms : INT_MAX))
		die_errno("setsockopt(SO_*TIMEO)");
}

void set_nonblock(int fd)
{
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK))
		die_errno("fcntl(O_NONBLOCK)");
}

/*
 * @n mmsghdrs for recvmmsg() or sendmmsg(), each with an iovec of its own;
 * the iovecs are one array, at mm[0].msg_hdr.msg_iov.
 */
struct mmsghdr *mmsg_alloc(int n)
{
	struct mmsghdr *mm = calloc(n, sizeof(*mm));
	struct iovec *iov = calloc(n, sizeof(*iov));
	int i;

	if (!mm || !iov)
		die("out of memory");
	for (i = 0; i < n; i++) {
		mm[i].msg_hdr.msg_iov = &iov[i];
		mm[i].msg_hdr.msg_iovlen = 1;
	}
	return mm;
}

void mmsg_free(struct mmsghdr *mm)
{
	free(mm[0].msg_hdr.msg_iov);
	free(mm);
}

/* Room for @n connections in peer[] and local[]. */
void conns_alloc(int n)
{
	peer = calloc(n, sizeof(*peer));
	local = calloc(n, sizeof(*local));
	if (!peer || !local)
		die("out of memory");
}

/*
 * @n loopback connections: peer[i] connected, local[i] accepted.  One at
 * a time, so that the accepted socket is the one just connected.  rx
 * (fork_tx) sets the receiving ends' SO_RCVBUF, when it does, on the
 * listener, before the handshake that fixes their window scale.
 */
void tcp_pairs(int n)
{
	struct sockaddr_in sin;
	int l = kcm_u_tcp_listener(&sin), i;

	if (l < 0)
		die_errno("loopback listener");
	if (modes[opt.mode]->fork_tx)
		tcp_rcvbuf(l);
	for (i = 0; i < n; i++) {
		peer[i] = kcm_u_tcp_connect(&sin);
		if (peer[i] < 0)
			die_errno("connect");
		local[i] = accept(l, NULL, NULL);
		if (local[i] < 0)
			die_errno("accept");
		if (opt.ktls &&
		    (kcm_u_ktls(peer[i], TLS_1_3_VERSION,
				TLS_CIPHER_AES_GCM_128, 1) ||
		     kcm_u_ktls(local[i], TLS_1_3_VERSION,
				TLS_CIPHER_AES_GCM_128, 1)))
			die_errno("kTLS (TCP_ULP \"tls\", TLS_TX, TLS_RX)");
	}
	close(l);
}

/*
 * A receiving TCP socket: messages over 32 KB need a set SO_RCVBUF (KCM
 * takes no message longer), and room for TCP_RCVBUF_MSGS of them, so
 * that the senders do not wait for each read.
 */
void tcp_rcvbuf(int fd)
{
	long want = opt.tcp_rcvbuf;

	if (want < 0)
		want = opt.size > (32 << 10) ?
		       TCP_RCVBUF_MSGS * (long)opt.size : 0;
	if (want > INT_MAX / 2)
		want = INT_MAX / 2;
	if (want) {
		set_int(fd, SOL_SOCKET, SO_RCVBUF, (int)want);
		if (get_int(fd, SOL_SOCKET, SO_RCVBUF) < 2 * want)
			fprintf(stderr,
				"# kcmperf: TCP SO_RCVBUF %ld capped to %d: raise net.core.rmem_max\n",
				want, get_int(fd, SOL_SOCKET, SO_RCVBUF));
	}
	eff_tcp_rcvbuf = get_int(fd, SOL_SOCKET, SO_RCVBUF);
}

/* Writes all of @len bytes, waiting for room; false on error or abort. */
bool write_all(int fd, const char *p, size_t len)
{
	struct pollfd pfd = { .fd = fd, .events = POLLOUT };
	ssize_t n;

	while (len) {
		n = write(fd, p, len);
		if (n > 0) {
			p += n;
			len -= n;
		} else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			if (atomic_load(&sh->tx_abort))
				return false;
			poll(&pfd, 1, TICK_MS);
		} else {
			note_err(n ? errno : EPIPE);
			return false;
		}
	}
	return true;
}
