// SPDX-License-Identifier: GPL-2.0
/*
 * kcmperf: TCP stream ends.  A sender writes a source's messages back to
 * back, many per write(); a reader reads in large pieces and checks each
 * message where it lies.  They are raw TCP's both ends, the senders of rx
 * and the peers that check what KCM sends in tx.
 *
 * rx (fork_tx) runs its senders in a process of their own, forked before
 * any thread exists: a thread per connection, TCP_NODELAY, RX_SNDBUF,
 * writes of about RX_WRITE_BYTES.  What they count and the flags that
 * stop them are in the MAP_SHARED struct shared; they start when the
 * receivers are set up (senders_go()).
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

	for (i = 0; i < opt.conns; i++) {
		set_int(peer[i], IPPROTO_TCP, TCP_NODELAY, 1);
		set_int(peer[i], SOL_SOCKET, SO_SNDBUF, RX_SNDBUF);
	}
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

/*
 * Reads a TCP stream in large pieces, splits it at the length prefixes and
 * checks each message where it lies; with @reply, answers each one.
 */
void *stream_reader(void *arg)
{
	struct stream_rd *rd = arg;
	struct counter *c = &rxc[rd->idx];
	struct checker *ck = checker_new(rd->nsrc, "tcp-%d", rd->idx);
	size_t cap = 2 * opt.size + READ_MIN, start = 0, end = 0, mlen;
	unsigned long ok = 0, bad = 0;
	uint32_t hdr, src;
	char *buf;
	ssize_t n;
	long s;

	if (cap < CHUNK_BYTES)
		cap = CHUNK_BYTES;
	buf = malloc(cap);
	if (!buf)
		die("out of memory");
	set_timeo(rd->fd, SO_RCVTIMEO, TICK_MS / 1000.0);
	while (!atomic_load_explicit(&rx_stop, memory_order_relaxed)) {
		mlen = 0;
		if (end - start >= 4) {
			memcpy(&hdr, buf + start, 4);
			mlen = 4 + (size_t)ntohl(hdr) - (end - start);
		}
		/* room for a large read, or for the rest of this message */
		if (cap - end < READ_MIN || cap - end < mlen) {
			memmove(buf, buf + start, end - start);
			end -= start;
			start = 0;
		}
		n = read(rd->fd, buf + end, cap - end);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n <= 0) {
			note_err(n ? errno : EPIPE);
			break;
		}
		end += n;
		while (end - start >= 4) {
			memcpy(&hdr, buf + start, 4);
			mlen = 4 + (size_t)ntohl(hdr);
			if (mlen > cap - READ_MIN) {
				show_bad(ck, buf + start, end - start,
					 "length out of range");
				count(c, &ok, &bad, -1);
				goto out;
			}
			if (end - start < mlen)
				break;
			s = msg_check(ck, buf + start, mlen, 0);
			count(c, &ok, &bad, s);
			if (rd->reply && s >= 0) {
				memcpy(&src, buf + start + 4, 4);
				src |= RESP_FLAG;
				memcpy(buf + start + 4, &src, 4);
				if (!write_all(rd->fd, buf + start, mlen))
					goto out;
			}
			start += mlen;
		}
		if (start == end) {
			start = 0;
			end = 0;
		}
	}
out:
	atomic_store(&c->done, 1);
	free(buf);
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
