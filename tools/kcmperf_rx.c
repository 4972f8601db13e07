// SPDX-License-Identifier: GPL-2.0
/*
 * kcmperf -m rx: N loopback TCP connections feed one mux with M KCM
 * sockets, each read by a thread of its own (recv(), recvmmsg() with -R,
 * our KCM_RECV_BATCH with -G into a buffer of that many messages,
 * io_uring with -U); a forked process writes each connection's messages,
 * many per write() (kcmperf_stream.c), so that the sender is not what
 * is measured.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/kcm.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "kcmperf.h"

/* The KCM_MSG_LENS control message of @mh: its lengths, or NULL. */
static const uint32_t *batch_lens(struct msghdr *mh, unsigned int *n)
{
	struct cmsghdr *cm;

	for (cm = CMSG_FIRSTHDR(mh); cm; cm = CMSG_NXTHDR(mh, cm)) {
		if (cm->cmsg_level != SOL_KCM || cm->cmsg_type != KCM_MSG_LENS)
			continue;
		*n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(uint32_t);
		return (const uint32_t *)CMSG_DATA(cm);
	}
	return NULL;
}

/*
 * KCM socket kfd[@idx] with KCM_RECV_BATCH (-G): each recvmsg() returns
 * up to opt.kbatch whole messages back to back; KCM_MSG_LENS splits them.
 * The lengths must account for every byte returned.
 */
static void *kcm_batch_reader(void *arg)
{
	long idx = (long)arg;
	struct counter *c = &rxc[idx];
	int fd = kfd[idx], nb = opt.kbatch;
	size_t cap = (size_t)nb * (opt.size + RCV_SLACK), ctl_len;
	struct checker *ck = rx_checker("kcm-%d", idx);
	unsigned long ok = 0, bad = 0;
	const uint32_t *lens;
	unsigned int n, i;
	struct msghdr mh;
	struct iovec iov;
	size_t off;
	char *buf, *ctl;
	long s;

	ctl_len = CMSG_SPACE(nb * sizeof(uint32_t));
	buf = malloc(cap);
	ctl = malloc(ctl_len);
	if (!buf || !ctl)
		die("out of memory");
	thread_name("kp-kcm-%ld", idx);
	set_int(fd, SOL_KCM, KCM_RECV_BATCH, nb);
	set_timeo(fd, SO_RCVTIMEO, RX_TIMEO_MS / 1000.0);
	set_timeo(fd, SO_SNDTIMEO, TICK_MS / 1000.0);
	while (!atomic_load_explicit(&rx_stop, memory_order_relaxed)) {
		iov.iov_base = buf;
		iov.iov_len = cap;
		memset(&mh, 0, sizeof(mh));
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		mh.msg_control = ctl;
		mh.msg_controllen = ctl_len;
		s = recvmsg(fd, &mh, 0);
		if (s < 0) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			note_err(errno);
			break;
		}
		if (!s) {
			note_err(EPIPE);
			break;
		}
		lens = batch_lens(&mh, &n);
		if (!lens || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
			show_bad(ck, buf, s, lens ? "truncated batch" : "no KCM_MSG_LENS");
			count(c, &ok, &bad, -1);
			continue;
		}
		for (i = 0, off = 0; i < n && off + lens[i] <= (size_t)s; i++) {
			long r = rx_check(ck, buf + off, lens[i]);

			count(c, &ok, &bad, r);
			if (r >= 0 && opt.mode == MODE_RR)
				kcm_answer(fd, buf + off);
			off += lens[i];
		}
		if (i != n || off != (size_t)s) {
			show_bad(ck, buf, s, "lengths do not add up");
			count(c, &ok, &bad, -1);
		}
	}
	atomic_store(&c->done, 1);
	free(ctl);
	free(buf);
	return NULL;
}

/* KCM socket kfd[@idx]: recv() or recvmmsg() whole messages; rr: answer. */
void *kcm_reader(void *arg)
{
	long idx = (long)arg;
	struct counter *c = &rxc[idx];
	int fd = kfd[idx], nb = opt.rbatch, i, n;
	size_t cap = opt.size + RCV_SLACK;
	unsigned long ok = 0, bad = 0;
	struct checker *ck;
	struct mmsghdr *mm;
	struct iovec *iov;
	char *buf;
	long s;

	if (opt.kbatch > 1)
		return kcm_batch_reader(arg);
	if (opt.uring)
		return kcm_uring_reader(arg);
	ck = rx_checker("kcm-%d", idx);
	buf = malloc(nb * cap);
	if (!buf)
		die("out of memory");
	mm = mmsg_alloc(nb);
	iov = mm[0].msg_hdr.msg_iov;
	thread_name("kp-kcm-%ld", idx);
	set_timeo(fd, SO_RCVTIMEO, RX_TIMEO_MS / 1000.0);
	set_timeo(fd, SO_SNDTIMEO, TICK_MS / 1000.0);
	for (i = 0; i < nb; i++) {
		iov[i].iov_base = buf + i * cap;
		iov[i].iov_len = cap;
	}
	while (!atomic_load_explicit(&rx_stop, memory_order_relaxed)) {
		if (nb == 1) {
			mm[0].msg_hdr.msg_flags = 0;
			s = recvmsg(fd, &mm[0].msg_hdr, 0);
			if (s >= 0)
				mm[0].msg_len = s;
			n = s < 0 ? -1 : 1;
		} else {
			n = recvmmsg(fd, mm, nb, MSG_WAITFORONE, NULL);
		}
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			note_err(errno);
			break;
		}
		for (i = 0; i < n; i++) {
			char *p = iov[i].iov_base;

			s = -1;
			if (mm[i].msg_hdr.msg_flags & MSG_TRUNC)
				show_bad(ck, p, mm[i].msg_len, "truncated");
			else
				s = rx_check(ck, p, mm[i].msg_len);
			count(c, &ok, &bad, s);
			if (s >= 0 && opt.mode == MODE_RR)
				kcm_answer(fd, p);
		}
		if (!n) {
			note_err(EPIPE);
			break;
		}
	}
	atomic_store(&c->done, 1);
	mmsg_free(mm);
	free(buf);
	return NULL;
}

/*
 * The receiving end of rx and rr, on the accepted sockets: KCM readers
 * (rr: a mux per connection, so that the answer goes back on it), the
 * user-space framer, or TCP stream readers (rr: answering).
 */
void setup_receivers(void)
{
	bool rr = opt.mode == MODE_RR;
	long i;

	for (i = 0; i < opt.conns; i++)
		tcp_rcvbuf(local[i]);
	switch (opt.impl) {
	case IMPL_KCM:
		if (rr) {
			for (i = 0; i < opt.conns; i++)
				kcm_mux(&local[i], 1);
		} else {
			kcm_mux(local, opt.conns);
		}
		for (i = 0; i < n_kfd; i++)
			spawn(kcm_reader, (void *)i);
		n_rx = n_kfd;
		break;
	case IMPL_USER:
		user_framer();
		break;
	case IMPL_RAW:
		if (rr)
			stream_readers(local, opt.conns, true);
		else
			stream_epoll_reader(local);
		break;
	}
}

/* The senders were forked (fork_tx) before any thread: they start now. */
static void setup_rx(void)
{
	setup_receivers();
	senders_go();
}

const struct perf_mode mode_rx = {
	.name = "rx",
	.setup = setup_rx,
	.report = report_stream,
	.fork_tx = true,
};
