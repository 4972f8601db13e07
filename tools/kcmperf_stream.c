// SPDX-License-Identifier: GPL-2.0
/*
 * kcmperf: TCP stream ends.  A sender writes a source's messages back to
 * back, many per write(); a reader reads in large pieces and checks each
 * message where it lies.  They are raw TCP's both ends, the senders of rx
 * and the peers that check what KCM sends in tx.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kcmperf.h"

/*
 * Source @idx's messages over a stream, per_buf of them per write(); after
 * tx_stop it finishes the message it is in.  Counts whole messages.
 */
void *stream_sender(void *arg)
{
	long idx = (long)arg;
	struct counter *c = &txc[idx];
	int fd = opt.mode == MODE_TX ? local[idx] : peer[idx];
	char *buf = msgs_build(idx, per_buf);
	size_t total, off, len, sent = 0;
	uint64_t base = 0, i;
	unsigned int n;
	ssize_t w;

	set_timeo(fd, SO_SNDTIMEO, TICK_MS / 1000.0);
	while (!atomic_load_explicit(&tx_stop, memory_order_relaxed)) {
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
			if (atomic_load_explicit(&tx_stop, memory_order_relaxed)) {
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
				if (atomic_load(&tx_abort))
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
