// SPDX-License-Identifier: GPL-2.0
/*
 * kcmperf -m tx: M KCM sockets send with send() or sendmmsg() (-S) over N
 * connections, a reader thread per TCP peer splits and checks.  user: M
 * threads share the connections, one writer at a time on each; raw: a
 * stream sender per connection.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "kcmperf.h"

/* KCM socket @idx sends its messages, one send() or a sendmmsg() batch. */
void *kcm_sender(void *arg)
{
	long idx = (long)arg;
	struct counter *c = &sh->txc[idx];
	int fd = kfd[idx], batch = opt.sbatch, i, n;
	char *buf = msgs_build(idx, per_buf);
	struct mmsghdr *mm = mmsg_alloc(batch);
	struct iovec *iov = mm[0].msg_hdr.msg_iov;
	uint64_t seq = 0;
	char *p;

	set_timeo(fd, SO_SNDTIMEO, TICK_MS / 1000.0);
	while (!atomic_load_explicit(&sh->tx_stop, memory_order_relaxed)) {
		n = batch;
		if (opt.count && opt.count - seq < (uint64_t)n)
			n = opt.count - seq;
		if (!n)
			break;
		for (i = 0; i < n; i++) {
			p = buf + ((seq + i) % per_buf) * opt.size;
			msg_set_seq(p, seq + i);
			iov[i].iov_base = p;
			iov[i].iov_len = opt.size;
		}
		if (n == 1)
			n = send(fd, iov[0].iov_base, opt.size, 0) ==
				(ssize_t)opt.size ? 1 : -1;
		else
			n = sendmmsg(fd, mm, n, 0);
		if (n > 0) {
			seq += n;
			atomic_store_explicit(&c->ok, seq, memory_order_relaxed);
		} else if (errno != EAGAIN && errno != EINTR) {
			note_err(errno);
			break;
		} else if (atomic_load(&sh->tx_abort)) {
			break;
		}
	}
	atomic_store(&c->done, 1);
	mmsg_free(mm);
	free(buf);
	return NULL;
}

/* User-space tx: threads share the connections, one writer each. */
static pthread_mutex_t conn_lock[MAX_CONNS];

static void *user_sender(void *arg)
{
	long idx = (long)arg;
	struct counter *c = &sh->txc[idx];
	char *buf = msgs_build(idx, per_buf);
	unsigned int turn = idx, slot, n, i;
	uint64_t seq = 0;
	int k, fd = -1;

	while (!atomic_load_explicit(&sh->tx_stop, memory_order_relaxed)) {
		slot = seq % per_buf;
		n = opt.sbatch;
		if (n > per_buf - slot)
			n = per_buf - slot;
		if (opt.count && opt.count - seq < n)
			n = opt.count - seq;
		if (!n)
			break;
		for (i = 0; i < n; i++)
			msg_set_seq(buf + (slot + i) * opt.size, seq + i);
		/* the first free connection, else wait for the next one */
		for (k = 0; k < opt.conns; k++) {
			fd = (turn + k) % opt.conns;
			if (!pthread_mutex_trylock(&conn_lock[fd]))
				break;
		}
		if (k == opt.conns) {
			fd = turn % opt.conns;
			pthread_mutex_lock(&conn_lock[fd]);
		}
		turn++;
		if (!write_all(local[fd], buf + slot * opt.size,
			       n * opt.size)) {
			pthread_mutex_unlock(&conn_lock[fd]);
			break;
		}
		pthread_mutex_unlock(&conn_lock[fd]);
		seq += n;
		atomic_store_explicit(&c->ok, seq, memory_order_relaxed);
	}
	atomic_store(&c->done, 1);
	free(buf);
	return NULL;
}

static void setup_tx(void)
{
	long i;

	for (i = 0; i < opt.conns; i++)
		tcp_rcvbuf(peer[i]);
	stream_readers(peer, opt.impl == IMPL_RAW ? opt.conns : opt.kcms,
		       false);
	switch (opt.impl) {
	case IMPL_KCM:
		kcm_mux(local, opt.conns);
		for (i = 0; i < n_kfd; i++)
			spawn(kcm_sender, (void *)i);
		n_tx = n_kfd;
		break;
	case IMPL_USER:
		for (i = 0; i < opt.conns; i++) {
			pthread_mutex_init(&conn_lock[i], NULL);
			set_timeo(local[i], SO_SNDTIMEO, TICK_MS / 1000.0);
		}
		for (i = 0; i < opt.kcms; i++)
			spawn(user_sender, (void *)i);
		n_tx = opt.kcms;
		break;
	case IMPL_RAW:
		for (i = 0; i < opt.conns; i++)
			spawn(stream_sender, (void *)i);
		n_tx = opt.conns;
		break;
	}
}

const struct perf_mode mode_tx = {
	.name = "tx",
	.setup = setup_tx,
	.report = report_stream,
};
