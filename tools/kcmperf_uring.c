// SPDX-License-Identifier: GPL-2.0
/*
 * kcmperf -U N: a KCM reader that receives through io_uring, N
 * IORING_OP_RECVs in flight on its KCM socket, each completion one whole
 * message, each slot posted again as soon as its message is checked.
 * rx and rr use it in place of recv() (kcmperf_rx.c's kcm_reader).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <liburing.h>
#include <stdlib.h>
#include <string.h>

#include "kcmperf.h"

/* Posts the receive of slot @i into @buf + @i * @cap. */
static void uring_post(struct io_uring *ring, int fd, char *buf, size_t cap,
		       unsigned int i)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);

	if (!sqe)
		die("io_uring: no free submission entry");
	io_uring_prep_recv(sqe, fd, buf + i * cap, cap, 0);
	io_uring_sqe_set_data64(sqe, i);
}

/*
 * One completion of slot @i: a message to check (and answer, rr), or an
 * error.  Returns 1 to post the slot again, 0 if it is done, -1 to stop.
 */
static int uring_complete(struct checker *ck, struct counter *c, int fd,
			  char *p, int r, unsigned long *ok, unsigned long *bad)
{
	long s;

	if (r == -EAGAIN || r == -EINTR)
		return 1;
	if (r == -ECANCELED)
		return 0;
	if (r <= 0) {
		note_err(r ? -r : EPIPE);
		return -1;
	}
	s = msg_check(ck, p, r, 0);
	count(c, ok, bad, s);
	if (s >= 0 && opt.mode == MODE_RR)
		kcm_answer(fd, p);
	return 1;
}

/* Reaps what has completed; returns -1 when the reader must stop. */
static int uring_drain(struct io_uring *ring, struct checker *ck,
		       struct counter *c, int fd, char *buf, size_t cap,
		       unsigned long *ok, unsigned long *bad)
{
	struct io_uring_cqe *cqe;
	unsigned int head, n = 0;
	int ret = 0, again;

	io_uring_for_each_cqe(ring, head, cqe) {
		unsigned int i = cqe->user_data;

		n++;
		if (ret < 0)
			continue;
		again = uring_complete(ck, c, fd, buf + i * cap, cqe->res,
				       ok, bad);
		if (again < 0)
			ret = -1;
		else if (again)
			uring_post(ring, fd, buf, cap, i);
	}
	io_uring_cq_advance(ring, n);
	return ret;
}

void *kcm_uring_reader(void *arg)
{
	long idx = (long)arg;
	struct counter *c = &rxc[idx];
	int fd = kfd[idx], nq = opt.uring, ret;
	size_t cap = opt.size + RCV_SLACK;
	struct checker *ck = checker_new(opt.conns, "kcm-%d", idx);
	struct __kernel_timespec tick = { .tv_nsec = TICK_MS * 1000000L };
	unsigned long ok = 0, bad = 0;
	struct io_uring_cqe *cqe;
	struct io_uring ring;
	char *buf = malloc(nq * cap);
	int i;

	if (!buf)
		die("out of memory");
	thread_name("kp-kcm-%ld", idx);
	ret = io_uring_queue_init(nq, &ring, 0);
	if (ret < 0)
		die("io_uring_queue_init: %s", strerror(-ret));
	for (i = 0; i < nq; i++)
		uring_post(&ring, fd, buf, cap, i);
	while (!atomic_load_explicit(&rx_stop, memory_order_relaxed)) {
		ret = io_uring_submit_and_wait_timeout(&ring, &cqe, 1, &tick,
						       NULL);
		if (ret < 0 && ret != -ETIME && ret != -EINTR) {
			note_err(-ret);
			break;
		}
		if (uring_drain(&ring, ck, c, fd, buf, cap, &ok, &bad))
			break;
	}
	atomic_store(&c->done, 1);
	io_uring_queue_exit(&ring);
	free(buf);
	return NULL;
}
