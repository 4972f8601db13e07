// SPDX-License-Identifier: GPL-2.0
/*
 * kcmperf: TCP stream ends.  A sender writes a source's messages back to
 * back, many per write(); a reader reads in large pieces and checks each
 * message where it lies.  They are raw TCP's both ends, the senders of rx
 * and the peers that check what KCM sends in tx.
 *
 * rx (fork_tx) runs its senders in a process of its own, forked before
 * any thread exists: a thread per connection, TCP_NODELAY, writes of
 * about RX_WRITE_BYTES, SO_SNDBUF left to TCP's autotuning.  What they
 * count and the flags that stop them are in the MAP_SHARED struct
 * shared; they start when the receivers are set up (senders_go()).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kcmperf.h"

static pid_t sender_pid;

/*
 * Source @idx's messages over a stream, per_buf of them per write(); after
 * tx_stop it finishes the message it is in.  Counts whole messages.
 */
void *stream_sender(void *arg)
{
	long idx = (long)arg;
	struct counter *c = &sh->txc[idx];
	int fd = opt.mode == MODE_TX ? local[idx] : peer[idx];
	char *buf = msgs_build(idx, per_buf);
	size_t total, off, len, sent = 0;
	uint64_t base = 0, i;
	unsigned int n;
	ssize_t w;

	thread_name("kp-send-%ld", idx);
	set_timeo(fd, SO_SNDTIMEO, TICK_MS / 1000.0);
	while (!atomic_load_explicit(&sh->tx_stop, memory_order_relaxed)) {
		n = per_buf;
		if (opt.count && opt.count - base < n)
			n = opt.count - base;
		if (!n)
			break;
		if (base)
			for (i = 0; i < n; i++)
				msg_set_seq(buf + i * opt.size, base + i);
		total = n * opt.size;
		for (off = 0; off < total; off += w) {
			len = total - off;
			if (atomic_load_explicit(&sh->tx_stop, memory_order_relaxed)) {
				len = (opt.size - off % opt.size) % opt.size;
				if (!len)
					goto out;
			}
			w = write(fd, buf + off, len);
			if (w > 0) {
				sent += w;
				atomic_store_explicit(&c->ok, sent / opt.size,
						      memory_order_relaxed);
				continue;
			}
			w = 0;
			if (errno == EAGAIN || errno == EINTR) {
				if (atomic_load(&sh->tx_abort))
					goto out;
				continue;
			}
			note_err(errno);
			goto out;
		}
		base += n;
	}
out:
	atomic_store(&c->done, 1);
	free(buf);
	return NULL;
}

/*
 * rx: fork the process that sends on peer[] (this one keeps local[]); it
 * waits for senders_go(), and once its senders are done keeps the
 * connections open until senders_reap(), or dies with this process.
 * Before any thread exists: the child runs on its own.
 */
void senders_fork(void)
{
	pid_t parent = getpid();
	long i;

	for (i = 0; i < opt.conns; i++)
		set_int(peer[i], IPPROTO_TCP, TCP_NODELAY, 1);
	n_tx = opt.conns;
	fflush(NULL);
	sender_pid = fork();
	if (sender_pid < 0)
		die_errno("fork");
	if (sender_pid) {
		for (i = 0; i < opt.conns; i++)
			close(peer[i]);
		return;
	}
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() != parent)
		_exit(2);
	for (i = 0; i < opt.conns; i++)
		close(local[i]);
	while (!atomic_load(&sh->tx_go))
		usleep(1000);
	for (i = 0; i < opt.conns; i++)
		spawn(stream_sender, (void *)i);
	join_all();
	while (!atomic_load(&sh->tx_exit))
		usleep(10000);
	_exit(0);
}

/* The forked senders start. */
void senders_go(void)
{
	atomic_store(&sh->tx_go, 1);
}

/*
 * After the senders are done: the process closes the connections and
 * ends (or is killed, if its senders are not done).
 */
void senders_reap(void)
{
	int status;

	if (!sender_pid)
		return;
	/* what the receiving ends saw, before the peers close */
	err_save();
	atomic_store(&sh->tx_exit, 1);
	if (sum_done(sh->txc, n_tx) < n_tx)
		kill(sender_pid, SIGKILL);
	if (waitpid(sender_pid, &status, 0) == sender_pid &&
	    (!WIFEXITED(status) || WEXITSTATUS(status)))
		fprintf(stderr, "# kcmperf: sender process ended with status %#x\n",
			status);
	sender_pid = 0;
}

/* A stream being read: bytes [start, end) of buf are not split yet. */
struct sbuf {
	int fd;
	char *buf;
	size_t cap;
	size_t start;
	size_t end;
};

static void sbuf_init(struct sbuf *b, int fd)
{
	b->fd = fd;
	b->cap = 2 * opt.size + READ_MIN;
	if (b->cap < CHUNK_BYTES)
		b->cap = CHUNK_BYTES;
	b->buf = malloc(b->cap);
	if (!b->buf)
		die("out of memory");
	b->start = 0;
	b->end = 0;
}

/* One read() into @b, with room for a large read or the rest of a message. */
static ssize_t sbuf_read(struct sbuf *b)
{
	size_t mlen = 0, avail = b->end - b->start;
	uint32_t hdr;

	if (avail >= 4) {
		memcpy(&hdr, b->buf + b->start, 4);
		mlen = 4 + (size_t)ntohl(hdr) - avail;
	}
	if (b->cap - b->end < READ_MIN || b->cap - b->end < mlen) {
		memmove(b->buf, b->buf + b->start, avail);
		b->end = avail;
		b->start = 0;
	}
	return read(b->fd, b->buf + b->end, b->cap - b->end);
}

/*
 * The next whole message in @b, consumed, with its length in @mlen; NULL
 * when there is none yet, or (*@mlen 0) when its length cannot be.
 */
static char *sbuf_next(struct sbuf *b, size_t *mlen)
{
	uint32_t hdr;
	char *p;

	*mlen = 1;
	if (b->end - b->start < 4)
		return NULL;
	p = b->buf + b->start;
	memcpy(&hdr, p, 4);
	*mlen = 4 + (size_t)ntohl(hdr);
	if (*mlen > b->cap - READ_MIN) {
		*mlen = 0;
		return NULL;
	}
	if (b->end - b->start < *mlen)
		return NULL;
	b->start += *mlen;
	if (b->start == b->end) {
		b->start = 0;
		b->end = 0;
	}
	return p;
}

/*
 * Checks the whole messages in @b (with @reply, answers each one); false
 * when the stream is bad or an answer could not be written.
 */
static bool sbuf_split(struct sbuf *b, struct checker *ck, struct counter *c,
		       unsigned long *ok, unsigned long *bad, bool reply)
{
	size_t mlen;
	uint32_t src;
	char *p;
	long s;

	while ((p = sbuf_next(b, &mlen))) {
		s = msg_check(ck, p, mlen, 0);
		count(c, ok, bad, s);
		if (!reply || s < 0)
			continue;
		memcpy(&src, p + 4, 4);
		src |= RESP_FLAG;
		memcpy(p + 4, &src, 4);
		if (!write_all(b->fd, p, mlen))
			return false;
	}
	if (mlen)
		return true;
	show_bad(ck, b->buf + b->start, b->end - b->start,
		 "length out of range");
	count(c, ok, bad, -1);
	return false;
}

/*
 * Reads a TCP stream in large pieces, splits it at the length prefixes and
 * checks each message where it lies; with @reply, answers each one.
 */
void *stream_reader(void *arg)
{
	struct stream_rd *rd = arg;
	struct counter *c = &rxc[rd->idx];
	struct checker *ck = checker_new(rd->nsrc, "tcp-%d", rd->idx);
	unsigned long ok = 0, bad = 0;
	struct sbuf b;
	ssize_t n;

	thread_name("kp-tcp-%ld", rd->idx);
	sbuf_init(&b, rd->fd);
	set_timeo(rd->fd, SO_RCVTIMEO, TICK_MS / 1000.0);
	while (!atomic_load_explicit(&rx_stop, memory_order_relaxed)) {
		n = sbuf_read(&b);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n <= 0) {
			note_err(n ? errno : EPIPE);
			break;
		}
		b.end += n;
		if (!sbuf_split(&b, ck, c, &ok, &bad, rd->reply))
			break;
	}
	atomic_store(&c->done, 1);
	free(b.buf);
	return NULL;
}

/*
 * A stream reader on each of opt.conns connections @fds, whose messages
 * come from @nsrc sources; with @reply, each answers what it reads (rr).
 */
void stream_readers(const int *fds, unsigned int nsrc, bool reply)
{
	static struct stream_rd rd[MAX_CONNS];
	int i;

	for (i = 0; i < opt.conns; i++) {
		rd[i] = (struct stream_rd){ .fd = fds[i], .idx = i,
					    .nsrc = nsrc, .reply = reply };
		spawn(stream_reader, &rd[i]);
	}
	n_rx = opt.conns;
}

static struct sbuf ebufs[MAX_CONNS];

/* Reads what is there on @b and checks it; false when @b is done with. */
static bool epoll_drain(struct sbuf *b, struct checker *ck, struct counter *c,
			unsigned long *ok, unsigned long *bad)
{
	int budget;
	ssize_t n;

	for (budget = 4; budget; budget--) {
		n = sbuf_read(b);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return true;
		if (n <= 0) {
			note_err(n ? errno : EPIPE);
			return false;
		}
		b->end += n;
		if (!sbuf_split(b, ck, c, ok, bad, false))
			return false;
	}
	return true;
}

/* rx's raw TCP: one thread epolls every connection, 1 MB reads. */
static void *epoll_reader(void *arg)
{
	struct epoll_event ev[MAX_CONNS];
	struct checker *ck = checker_new(opt.conns, "tcp-%d", 0);
	struct counter *c = &rxc[0];
	unsigned long ok = 0, bad = 0;
	int ep = epoll_create1(0), i, n;
	struct sbuf *b;

	(void)arg;
	thread_name("kp-tcp-%ld", 0);
	if (ep < 0)
		die_errno("epoll_create1");
	for (i = 0; i < opt.conns; i++) {
		struct epoll_event e = { .events = EPOLLIN,
					 .data.ptr = &ebufs[i] };

		if (epoll_ctl(ep, EPOLL_CTL_ADD, ebufs[i].fd, &e))
			die_errno("epoll_ctl");
	}
	while (!atomic_load_explicit(&rx_stop, memory_order_relaxed)) {
		n = epoll_wait(ep, ev, MAX_CONNS, TICK_MS);
		for (i = 0; i < n; i++) {
			b = ev[i].data.ptr;
			if (!epoll_drain(b, ck, c, &ok, &bad))
				epoll_ctl(ep, EPOLL_CTL_DEL, b->fd, NULL);
		}
	}
	close(ep);
	atomic_store(&c->done, 1);
	for (i = 0; i < opt.conns; i++)
		free(ebufs[i].buf);
	return NULL;
}

/* One epoll thread reading opt.conns connections @fds; counter rxc[0]. */
void stream_epoll_reader(const int *fds)
{
	int i;

	for (i = 0; i < opt.conns; i++) {
		sbuf_init(&ebufs[i], fds[i]);
		set_nonblock(fds[i]);
	}
	spawn(epoll_reader, NULL);
	n_rx = 1;
}
