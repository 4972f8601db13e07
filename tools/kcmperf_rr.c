// SPDX-License-Identifier: GPL-2.0
/*
 * kcmperf -m rr: one request at a time.  A client writes a request on its
 * TCP connection, the server receives it on a KCM socket and answers on
 * the same socket, the client times the round trip.  Prints the median
 * and tail latencies.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "kcmperf.h"

/* rr: send back the request at @p as its answer. */
void kcm_answer(int fd, char *p)
{
	uint32_t src;

	memcpy(&src, p + 4, 4);
	src |= RESP_FLAG;
	memcpy(p + 4, &src, 4);
	while (send(fd, p, opt.size, 0) < 0) {
		if (errno != EAGAIN && errno != EINTR) {
			note_err(errno);
			break;
		}
		if (atomic_load(&rx_stop))
			break;
	}
}

struct rr_client {
	int idx;
	uint32_t *lat;		/* round trips in ns */
	size_t n;
	size_t cap;
};

static struct rr_client clients[MAX_CONNS];

/* The answer to a request; a read that times out (-W) is a stall. */
static bool read_answer(int fd, char *p)
{
	if (!kcm_u_read_full(fd, p, opt.size))
		return true;
	if (errno == EAGAIN)
		atomic_store(&rr_stalled, 1);
	else
		note_err(errno);
	return false;
}

static void *rr_client(void *arg)
{
	struct rr_client *cl = arg;
	struct counter *c = &sh->txc[cl->idx];
	struct checker *ck = checker_new(opt.conns, "client-%d", cl->idx);
	int fd = peer[cl->idx];
	char *req = malloc(opt.size), *resp = malloc(opt.size);
	unsigned long ok = 0, bad = 0;
	uint64_t seq, t0, t;
	long s;

	if (!req || !resp)
		die("out of memory");
	set_timeo(fd, SO_RCVTIMEO, opt.stall);
	for (seq = 0; !atomic_load_explicit(&sh->tx_stop, memory_order_relaxed) &&
	     (!opt.count || seq < opt.count); seq++) {
		msg_fill(req, cl->idx, seq);
		t0 = kcm_u_now_ns();
		if (!write_all(fd, req, opt.size) ||
		    !read_answer(fd, resp))
			break;
		t = kcm_u_now_ns() - t0;
		ck->next[cl->idx] = seq;
		s = msg_check(ck, resp, opt.size, RESP_FLAG);
		if (s >= 0 && (s != cl->idx || memcmp(resp + 8, &seq, 8))) {
			show_bad(ck, resp, opt.size, "not the answer");
			s = -1;
		}
		count(c, &ok, &bad, s);
		if (!atomic_load_explicit(&measuring, memory_order_relaxed))
			continue;
		if (cl->n == cl->cap) {
			cl->cap = cl->cap ? 2 * cl->cap : 65536;
			cl->lat = realloc(cl->lat, cl->cap * sizeof(*cl->lat));
			if (!cl->lat)
				die("out of memory");
		}
		cl->lat[cl->n++] = t > UINT32_MAX ? UINT32_MAX : t;
	}
	atomic_store(&c->done, 1);
	free(req);
	free(resp);
	return NULL;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static int report_rr(bool watchdog)
{
	double secs = res.t1 - res.t0;
	size_t n = 0, k, i;
	uint32_t *all;
	bool fail;
	int c;

	for (c = 0; c < opt.conns; c++)
		n += clients[c].n;
	all = malloc((n + 1) * sizeof(*all));
	if (!all)
		die("out of memory");
	for (c = 0, k = 0; c < opt.conns; c++)
		for (i = 0; i < clients[c].n; i++)
			all[k++] = clients[c].lat[i];
	qsort(all, n, sizeof(*all), cmp_u32);
	fail = res.bad || res.stalled || watchdog || !n;
	print_common(secs);
	printf(" reqs=%zu rps=%.0f", n, secs > 0 ? n / secs : 0);
	if (n)
		printf(" p50_us=%.1f p99_us=%.1f p999_us=%.1f max_us=%.1f",
		       all[(size_t)(n * 0.5)] / 1e3, all[(size_t)(n * 0.99)] / 1e3,
		       all[(size_t)(n * 0.999)] / 1e3, all[n - 1] / 1e3);
	print_cpu();
	printf(" bad=%lu stalled=%d err=%s result=%s%s\n", res.bad,
	       res.stalled || watchdog, err_name(), fail ? "FAIL" : "ok",
	       watchdog ? " note=watchdog" : "");
	free(all);
	return fail;
}

static void setup_rr(void)
{
	long i;

	for (i = 0; i < opt.conns; i++) {
		set_int(peer[i], IPPROTO_TCP, TCP_NODELAY, 1);
		set_int(local[i], IPPROTO_TCP, TCP_NODELAY, 1);
	}
	setup_receivers();
	for (i = 0; i < opt.conns; i++) {
		clients[i].idx = i;
		spawn(rr_client, &clients[i]);
	}
	n_tx = opt.conns;
}

const struct perf_mode mode_rr = {
	.name = "rr",
	.setup = setup_rr,
	.report = report_rr,
};
