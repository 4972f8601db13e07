// SPDX-License-Identifier: GPL-2.0
/*
 * kcmperf -m scale: the connections axis.  For each N of -c (1, 10, 100
 * and 1000 by default) N loopback TCP connections are attached to one mux
 * of M KCM sockets (-k) and carry small messages for -t seconds:
 *
 *   -d rx  writer threads put framed messages on every connection, round
 *          robin, non-blocking, a batch per write(); the KCM sockets read
 *          and check them (the readers of -m rx).
 *   -d tx  the KCM sockets send (the senders of -m tx, -S for
 *          sendmmsg()); reader threads epoll the N far ends, split and
 *          check each connection's stream.
 *
 * With -i user (rx only) no KCM socket is involved: the writers are the
 * same, and the tx readers frame and check the N receiving ends
 * instead, the user-space framer the KCM rows are held against.
 *
 * One line per N: the rate; the CPU time per message of the whole guest
 * (/proc/stat: every CPU's busy time, softirqs and kernel threads
 * included, over the messages of the window) and of this process
 * (getrusage); the wall time of attaching the N connections, of closing
 * the KCM sockets (the mux goes with the last one, and every psock with
 * it) and then of closing the N TCP sockets; and how the messages were
 * spread over the connections: how many carried any, and the fewest and
 * the most that one connection carried (tx: what the mux chose; rx: what
 * the writers got through).
 *
 * The receiving TCP sockets get SO_RCVBUF -T (32 KB unless given), and in
 * rx the writers SO_SNDBUF of the same size: up to 128 MB in flight on
 * 1000 connections, more than a 1 GB guest's default net.ipv4.tcp_mem
 * allows without memory pressure (make bench raises it).  Under pressure
 * TCP drops and retransmits, and what is measured is its timers: each
 * line says how often TCP entered memory pressure (tcp_mem_pressures).
 *
 * Those buffers fill while the receivers are slower than the writers
 * (with -d rx and one message per recv(), for tens of seconds at 1000
 * connections), and meanwhile part of the window's work is done for
 * messages it does not read: fill (report_msgs()) is what the window
 * sent and did not read, over what it read.  cpu_all_ns_per_msg counts
 * the whole run instead, from the warm-up until the receivers have read
 * every message sent, over all of them: nothing is left in the buffers
 * at its end.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kcmperf.h"

#define SCALE_THREADS	2	/* writers (rx) or readers (tx) */
#define SCALE_BATCH	64	/* messages a writer's write() carries */
#define SCALE_EVENTS	256

/* The far end of a connection: written (rx) or read (tx) by a thread. */
struct sconn {
	int fd;
	uint32_t src;		/* rx: the source number its messages carry */
	bool blocked;		/* rx: waiting for EPOLLOUT */
	uint64_t seq;		/* rx: sequence number of buf's first message */
	size_t off;		/* rx: bytes of buf written */
	size_t len;		/* rx: bytes in buf */
	char *buf;		/* rx: the batch being written; tx: a partial message */
	size_t have;		/* tx: bytes in buf */
	struct checker *ck;	/* tx */
	unsigned long msgs;	/* whole messages written (rx) or read (tx) */
};

/* A stream thread's connections, conns[first..first + n), and counter. */
struct sgroup {
	struct sconn *conns;
	int idx;
	int first;
	int n;
};

static struct sconn *sconns;	/* the far ends */
static struct sconn *rconns;	/* -i user: the receiving ends */
static struct sgroup groups[SCALE_THREADS];
static struct sgroup rgroups[SCALE_THREADS];	/* -i user: their readers */
static unsigned int batch;	/* messages per write() */

/* What a phase measured besides the messages. */
static struct {
	double attach_us;
	double close_kcm_us;
	double close_tcp_us;
	bool closed;
	bool spread;		/* the counts below are final */
	unsigned long pressures;	/* TCPMemoryPressures, at the start */
	int used;
	unsigned long min;
	unsigned long max;
} st;

/* ------------------------------------------------------------ rx writers */

/* The next batch of messages in @s->buf. */
static void writer_refill(struct sconn *s)
{
	unsigned int i;

	s->seq += s->len / opt.size;
	for (i = 0; i < batch; i++)
		msg_fill(s->buf + i * opt.size, s->src, s->seq + i);
	s->len = (size_t)batch * opt.size;
	s->off = 0;
}

/*
 * One write() on @s; with @stop only what ends the message it is in.
 * Returns the messages it completed, or -1 when @s has to wait for room.
 */
static long writer_write(struct sconn *s, bool stop)
{
	size_t len = s->len - s->off, before = s->off / opt.size;
	unsigned long done;
	ssize_t w;

	if (stop)
		len = (opt.size - s->off % opt.size) % opt.size;
	w = write(s->fd, s->buf + s->off, len);
	if (w < 0) {
		if (errno != EAGAIN && errno != EINTR) {
			/* never armed again: the run stalls and fails */
			note_err(errno);
			s->fd = -1;
		}
		return -1;
	}
	s->off += w;
	done = s->off / opt.size - before;
	s->msgs += done;
	if (s->off == s->len)
		writer_refill(s);
	return done;
}

/* @s waits for room: one EPOLLOUT, then it is written again. */
static void writer_block(int ep, struct sconn *s)
{
	struct epoll_event e = { .events = EPOLLOUT | EPOLLONESHOT,
				 .data.ptr = s };

	s->blocked = true;
	if (s->fd >= 0 && epoll_ctl(ep, EPOLL_CTL_MOD, s->fd, &e))
		die_errno("epoll_ctl");
}

static int writer_epoll(struct sgroup *g)
{
	int ep = epoll_create1(0), i;

	if (ep < 0)
		die_errno("epoll_create1");
	for (i = g->first; i < g->first + g->n; i++) {
		struct epoll_event e = { .events = EPOLLONESHOT,
					 .data.ptr = &g->conns[i] };

		if (epoll_ctl(ep, EPOLL_CTL_ADD, g->conns[i].fd, &e))
			die_errno("epoll_ctl");
	}
	return ep;
}

/*
 * Writes messages on the connections of group @arg in turn, skipping
 * those that are full until epoll says they have room; after tx_stop it
 * ends each connection's message in progress.  Counts whole messages.
 */
static void *scale_writer(void *arg)
{
	struct sgroup *g = arg;
	struct counter *c = &sh->txc[g->idx];
	struct epoll_event ev[SCALE_EVENTS];
	int ep = writer_epoll(g), i, n, left;
	unsigned long sent = 0;
	bool stop = false, wrote;
	struct sconn *s;
	long r;

	while (!atomic_load_explicit(&sh->tx_abort, memory_order_relaxed)) {
		stop = stop || atomic_load_explicit(&sh->tx_stop,
						    memory_order_relaxed);
		wrote = false;
		left = 0;
		for (i = g->first; i < g->first + g->n; i++) {
			s = &g->conns[i];
			if (stop && !(s->off % opt.size))
				continue;
			left++;
			if (s->blocked)
				continue;
			r = writer_write(s, stop);
			if (r < 0) {
				writer_block(ep, s);
				continue;
			}
			wrote = true;
			sent += r;
		}
		atomic_store_explicit(&c->ok, sent, memory_order_relaxed);
		if (stop && !left)
			break;
		n = epoll_wait(ep, ev, SCALE_EVENTS, wrote ? 0 : TICK_MS);
		for (i = 0; i < n; i++)
			((struct sconn *)ev[i].data.ptr)->blocked = false;
	}
	close(ep);
	atomic_store(&c->done, 1);
	return NULL;
}

/* ------------------------------------------------------------ tx readers */

/*
 * One read() on @s into @buf (after the partial message @s kept), then
 * every whole message checked in place.  False when @s is done for.
 */
static bool reader_read(struct sconn *s, char *buf, size_t cap,
			struct counter *c, unsigned long *ok,
			unsigned long *bad)
{
	size_t end, off = 0, mlen;
	uint32_t hdr;
	ssize_t n;
	long r;

	memcpy(buf, s->buf, s->have);
	n = read(s->fd, buf + s->have, cap - s->have);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return true;
	if (n <= 0) {
		note_err(n ? errno : EPIPE);
		return false;
	}
	end = s->have + n;
	while (end - off >= 4) {
		memcpy(&hdr, buf + off, 4);
		mlen = 4 + (size_t)ntohl(hdr);
		if (mlen > opt.size + RCV_SLACK) {
			show_bad(s->ck, buf + off, end - off,
				 "length out of range");
			count(c, ok, bad, -1);
			return false;
		}
		if (end - off < mlen)
			break;
		r = msg_check(s->ck, buf + off, mlen, 0);
		count(c, ok, bad, r);
		if (r >= 0)
			s->msgs++;
		off += mlen;
	}
	s->have = end - off;
	memcpy(s->buf, buf + off, s->have);
	return true;
}

/* Reads and checks the connections of group @arg as epoll reports them. */
static void *scale_reader(void *arg)
{
	size_t cap = READ_MIN + opt.size + RCV_SLACK;
	struct sgroup *g = arg;
	struct counter *c = &rxc[g->idx];
	struct epoll_event ev[SCALE_EVENTS];
	int ep = epoll_create1(0), i, n;
	unsigned long ok = 0, bad = 0;
	char *buf = malloc(cap);
	struct sconn *s;

	if (ep < 0 || !buf)
		die("reader: %s", strerror(errno));
	for (i = g->first; i < g->first + g->n; i++) {
		struct epoll_event e = { .events = EPOLLIN,
					 .data.ptr = &g->conns[i] };

		if (epoll_ctl(ep, EPOLL_CTL_ADD, g->conns[i].fd, &e))
			die_errno("epoll_ctl");
	}
	while (!atomic_load_explicit(&rx_stop, memory_order_relaxed)) {
		n = epoll_wait(ep, ev, SCALE_EVENTS, TICK_MS);
		for (i = 0; i < n; i++) {
			s = ev[i].data.ptr;
			if (!reader_read(s, buf, cap, c, &ok, &bad))
				epoll_ctl(ep, EPOLL_CTL_DEL, s->fd, NULL);
		}
	}
	close(ep);
	free(buf);
	atomic_store(&c->done, 1);
	return NULL;
}

/* ------------------------------------------------------------ a phase */

/* TcpExt TCPMemoryPressures: how often TCP entered memory pressure. */
static unsigned long tcp_pressures(void)
{
	long r = kcm_u_tcpext("TCPMemoryPressures");

	return r < 0 ? 0 : r;
}

/* A reader's end @fd of a stream of @nsrc sources, named @fmt, @i. */
static void reader_init(struct sconn *s, int fd, unsigned int nsrc,
			const char *fmt, int i)
{
	s->fd = fd;
	s->buf = malloc(opt.size + RCV_SLACK);
	if (!s->buf)
		die("out of memory");
	set_nonblock(fd);
	s->ck = checker_new(nsrc, fmt, i);
}

/* Threads' shares of @n connections of @conns, a group each. */
static void groups_init(struct sgroup *g, struct sconn *conns, int n,
			int nthreads)
{
	int i;

	for (i = 0; i < nthreads; i++) {
		g[i].conns = conns;
		g[i].idx = i;
		g[i].first = (long)n * i / nthreads;
		g[i].n = (long)n * (i + 1) / nthreads - g[i].first;
	}
}

/*
 * The far ends of @n connections (and with -i user the receiving ends),
 * in groups of a thread each.
 */
static int sconns_init(int n)
{
	int nthreads = n < SCALE_THREADS ? n : SCALE_THREADS, i;
	bool user = opt.impl == IMPL_USER;

	sconns = calloc(n, sizeof(*sconns));
	rconns = user ? calloc(n, sizeof(*rconns)) : NULL;
	if (!sconns || (user && !rconns))
		die("out of memory");
	for (i = 0; i < n; i++) {
		struct sconn *s = &sconns[i];

		if (opt.dir == MODE_TX) {
			reader_init(s, peer[i], opt.kcms, "peer-%d", i);
			continue;
		}
		s->fd = peer[i];
		/* a stream read as it is written: its own single source */
		s->src = user ? 0 : i;
		s->buf = malloc((size_t)batch * opt.size);
		if (!s->buf)
			die("out of memory");
		set_nonblock(s->fd);
		writer_refill(s);
		if (user)
			reader_init(&rconns[i], local[i], 1, "conn-%d", i);
	}
	groups_init(groups, sconns, n, nthreads);
	if (user)
		groups_init(rgroups, rconns, n, nthreads);
	return nthreads;
}

static void conns_free(struct sconn *c, int n)
{
	int i;

	for (i = 0; c && i < n; i++) {
		free(c[i].buf);
		free(c[i].ck);
	}
	free(c);
}

static void sconns_free(int n)
{
	conns_free(sconns, n);
	conns_free(rconns, n);
	sconns = NULL;
	rconns = NULL;
}

/* Buffers, the mux and the timed attach of @n connections. */
static void scale_attach(int n)
{
	int i, first, prog;
	double t;

	for (i = 0; i < n; i++) {
		if (opt.dir == MODE_TX) {
			tcp_rcvbuf(peer[i]);
			continue;
		}
		tcp_rcvbuf(local[i]);
		if (opt.tcp_rcvbuf > 0)
			set_int(peer[i], SOL_SOCKET, SO_SNDBUF,
				(int)opt.tcp_rcvbuf);
	}
	if (opt.impl == IMPL_USER)
		return;
	prog = kcm_parser();
	first = kcm_socks();
	t = now();
	for (i = 0; i < n; i++)
		attach_tcp(kfd[first], local[i], prog);
	st.attach_us = (now() - t) * 1e6;
	if (prog >= 0)
		close(prog);
}

static void scale_threads(int n)
{
	int nthreads = sconns_init(n);
	long i;

	if (opt.dir == MODE_RX && opt.impl == IMPL_USER) {
		for (i = 0; i < nthreads; i++)
			spawn(scale_reader, &rgroups[i]);
		n_rx = nthreads;
		for (i = 0; i < nthreads; i++)
			spawn(scale_writer, &groups[i]);
		n_tx = nthreads;
	} else if (opt.dir == MODE_RX) {
		for (i = 0; i < n_kfd; i++)
			spawn(kcm_reader, (void *)i);
		n_rx = n_kfd;
		for (i = 0; i < nthreads; i++)
			spawn(scale_writer, &groups[i]);
		n_tx = nthreads;
	} else {
		for (i = 0; i < nthreads; i++)
			spawn(scale_reader, &groups[i]);
		n_rx = nthreads;
		for (i = 0; i < n_kfd; i++)
			spawn(kcm_sender, (void *)i);
		n_tx = n_kfd;
	}
}

/* The timed close: the KCM sockets (and so the mux), then the TCP ones. */
static void scale_close(int n)
{
	double t = now();
	int i;

	for (i = 0; i < n_kfd; i++)
		close(kfd[i]);
	st.close_kcm_us = (now() - t) * 1e6;
	t = now();
	for (i = 0; i < n; i++)
		close(local[i]);
	st.close_tcp_us = (now() - t) * 1e6;
	for (i = 0; i < n; i++)
		close(peer[i]);
	st.closed = true;
}

/* How many connections carried messages, the fewest and the most. */
static void scale_spread(int n)
{
	unsigned long m;
	int i;

	st.min = ULONG_MAX;
	for (i = 0; i < n; i++) {
		m = sconns[i].msgs;
		st.used += m > 0;
		st.min = m < st.min ? m : st.min;
		st.max = m > st.max ? m : st.max;
	}
	st.spread = true;
}

/* Busy CPU time from @a to @b, in ns. */
/* cpu_ns_per_msg: report_msgs() */
static void scale_keys(double secs, unsigned long msgs)
{
	double self = (res.c1.self - res.c0.self) * 1e9;

	(void)secs;
	printf(" dir=%s self_ns_per_msg=%.0f attach_us=%.0f",
	       modes[opt.dir]->name, msgs ? self / msgs : 0, st.attach_us);
	/* every message sent was read: nothing of the run is left out */
	if (res.ca1.total && res.got)
		printf(" cpu_all_ns_per_msg=%.0f",
		       busy_ns(&res.ca0, &res.ca1) / res.got);
	if (st.closed)
		printf(" close_kcm_us=%.0f close_tcp_us=%.0f", st.close_kcm_us,
		       st.close_tcp_us);
	if (st.spread)
		printf(" conns_used=%d conn_msgs_min=%lu conn_msgs_max=%lu",
		       st.used, st.min, st.max);
	printf(" tcp_mem_pressures=%lu", tcp_pressures() - st.pressures);
}

static int scale_report(bool watchdog)
{
	return report_msgs(watchdog, scale_keys);
}

/* N connections on one mux: attach, the timed run, close; one line. */
static int scale_phase(int n)
{
	double limit = opt.warm + opt.secs + 2 * opt.stall + 15 + n * 0.02;

	watchdog_arm(limit);
	counters_reset();
	report_reset();
	memset(&st, 0, sizeof(st));
	st.pressures = tcp_pressures();
	opt.conns = n;
	tcp_pairs(n);
	scale_attach(n);
	scale_threads(n);
	run_timed(limit);
	err_save();
	scale_close(n);
	scale_spread(n);
	sconns_free(n);
	if (tcp_pressures() != st.pressures)
		fprintf(stderr,
			"# kcmperf: %d connections: TCP memory pressure: raise net.ipv4.tcp_mem or lower -T\n",
			n);
	if (!report_begin(false))
		return 1;
	return scale_report(false);
}

/* Two descriptors a connection and some: raised as root can. */
static void nofile_raise(rlim_t need)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		die_errno("getrlimit");
	if (rl.rlim_cur >= need)
		return;
	rl.rlim_cur = need;
	if (rl.rlim_max < need)
		rl.rlim_max = need;
	if (setrlimit(RLIMIT_NOFILE, &rl))
		die("RLIMIT_NOFILE: %lu descriptors needed: %s",
		    (unsigned long)need, strerror(errno));
}

static int scale_run(void)
{
	int i, max = 0, fail = 0;

	for (i = 0; i < opt.n_conn_list; i++)
		max = opt.conn_list[i] > max ? opt.conn_list[i] : max;
	nofile_raise(2 * (rlim_t)max + opt.kcms + 64);
	conns_alloc(max);
	if (opt.tcp_rcvbuf < 0)
		opt.tcp_rcvbuf = SCALE_TCP_BUF;
	batch = per_buf < SCALE_BATCH ? per_buf : SCALE_BATCH;
	for (i = 0; i < opt.n_conn_list; i++)
		fail |= scale_phase(opt.conn_list[i]);
	return fail;
}

const struct perf_mode mode_scale = {
	.name = "scale",
	.report = scale_report,
	.run = scale_run,
};
