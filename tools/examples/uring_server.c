// SPDX-License-Identifier: GPL-2.0
/*
 * uring_server: one thread serves a KCM multiplexor through io_uring.
 *
 * The server attaches the client's TCP connections to one KCM socket and
 * keeps QUEUE IORING_OP_RECVs in flight on it.  Each completion is one
 * whole request (KCM frames the stream; a receive never returns half a
 * message or two); the server checks it, queues an IORING_OP_SEND of a
 * small reply, which KCM writes whole to one of the connections, and
 * posts that receive slot again.  No poll loop, no framing, one thread.
 *
 * The client (forked here, plain TCP: ex_client() of kcm_example.h, which
 * prefork_server shares) sends REQUESTS requests of varying sizes over
 * CONNS connections, several per write, checks that every request gets
 * exactly one reply, then sends one STOP request.  The server cancels
 * its receives still in flight (each completes with -ECANCELED) and
 * checks that it received every request and byte.
 *
 *   uring_server [-q QUEUE] [-c CONNS] [-n REQUESTS]
 *
 * Needs liburing (liburing-dev; linked statically here).  Exit status 0
 * when every check held.
 */
#include <liburing.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "kcm_example.h"

#define MAX_QUEUE	256
#define REPLY_SIZE	(KCM_U_HDR + EX_REPLY_PLEN)
#define SEND_TAG	(1ULL << 32)	/* user_data of a send: tag | slot */
#define CANCEL_TAG	(2ULL << 32)

static int queue = 16, conns = 3, requests = 1000;

/* The server's ring, its buffers and what it counted. */
struct server {
	struct io_uring ring;
	int kcm;
	char req[MAX_QUEUE][EX_REQ_MAX];	/* one receive buffer per slot */
	char reply[MAX_QUEUE][REPLY_SIZE];
	long requests, bytes, bad, replies, cancelled, in_flight;
	int stopping;
};

static struct io_uring_sqe *get_sqe(struct server *s)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&s->ring);

	if (!sqe) {	/* the submission queue is full: make room */
		io_uring_submit(&s->ring);
		sqe = io_uring_get_sqe(&s->ring);
	}
	if (!sqe)
		ex_die("io_uring_get_sqe");
	return sqe;
}

/* Posts the receive of slot @i: one whole request into s->req[i]. */
static void post_recv(struct server *s, int i)
{
	struct io_uring_sqe *sqe = get_sqe(s);

	io_uring_prep_recv(sqe, s->kcm, s->req[i], EX_REQ_MAX, 0);
	io_uring_sqe_set_data64(sqe, i);
	s->in_flight++;
}

/* Queues the reply to request @seq from slot @i: one whole message. */
static void post_reply(struct server *s, int i, uint32_t seq)
{
	struct io_uring_sqe *sqe = get_sqe(s);
	size_t len = kcm_u_msg_build(s->reply[i], EX_REPLY_PLEN, seq);

	io_uring_prep_send(sqe, s->kcm, s->reply[i], len, 0);
	io_uring_sqe_set_data64(sqe, SEND_TAG | i);
}

/* Cancels every receive still in flight (any request on the KCM fd). */
static void cancel_recvs(struct server *s)
{
	struct io_uring_sqe *sqe = get_sqe(s);

	io_uring_prep_cancel_fd(sqe, s->kcm, IORING_ASYNC_CANCEL_ALL);
	io_uring_sqe_set_data64(sqe, CANCEL_TAG);
	s->stopping = 1;
}

/* A receive of slot @i completed with @res: a request, or why not. */
static void on_recv(struct server *s, int i, int res)
{
	long seq;

	s->in_flight--;
	if (res == -ECANCELED) {
		s->cancelled++;
		return;
	}
	if (res <= 0) {
		errno = -res;
		ex_die("server: recv");
	}
	seq = kcm_u_msg_check(s->req[i], res);
	if (seq == EX_STOP) {
		cancel_recvs(s);
		return;
	}
	if (seq < 0) {
		s->bad++;
	} else {
		s->requests++;
		s->bytes += res;
		/* The reply is built in its own buffer: the slot can go on. */
		post_reply(s, i, seq);
	}
	if (!s->stopping)
		post_recv(s, i);
}

/* Runs the ring until the STOP request came and every receive ended. */
static void serve(struct server *s)
{
	struct io_uring_cqe *cqe;
	int i;

	if (io_uring_queue_init(2 * MAX_QUEUE, &s->ring, 0) < 0)
		ex_die("io_uring_queue_init");
	for (i = 0; i < queue; i++)
		post_recv(s, i);
	while (!s->stopping || s->in_flight) {
		int ret = io_uring_submit_and_wait(&s->ring, 1);
		unsigned int head, n = 0;

		if (ret < 0 && ret != -EINTR) {
			errno = -ret;
			ex_die("io_uring_submit_and_wait");
		}
		io_uring_for_each_cqe(&s->ring, head, cqe) {
			uint64_t data = io_uring_cqe_get_data64(cqe);

			n++;
			if (data & SEND_TAG) {
				if (cqe->res != REPLY_SIZE)
					s->bad++;
				else
					s->replies++;
			} else if (!(data & CANCEL_TAG)) {
				on_recv(s, (int)data, cqe->res);
			}
		}
		io_uring_cq_advance(&s->ring, n);
	}
	io_uring_queue_exit(&s->ring);
}

static void parse_args(int argc, char **argv)
{
	int opt;

	while ((opt = getopt(argc, argv, "q:c:n:")) != -1) {
		switch (opt) {
		case 'q':
			queue = atoi(optarg);
			break;
		case 'c':
			conns = atoi(optarg);
			break;
		case 'n':
			requests = atoi(optarg);
			break;
		default:
			fprintf(stderr, "usage: uring_server [-q QUEUE] [-c CONNS]");
			fprintf(stderr, " [-n REQUESTS]\n");
			exit(2);
		}
	}
	if (queue < 1 || queue > MAX_QUEUE || conns < 1 || conns > EX_MAX_CONNS ||
	    requests < 1 || requests > 65535) {
		fprintf(stderr, "uring_server: 1..%d receives, 1..%d connections",
			MAX_QUEUE, EX_MAX_CONNS);
		fprintf(stderr, ", 1..65535 requests\n");
		exit(2);
	}
}

/*
 * io_uring may be left out of a kernel (CONFIG_IO_URING) or turned off
 * (kernel.io_uring_disabled): say so and exit 4, the kselftest "skip".
 */
static void need_uring(void)
{
	struct io_uring ring;
	int ret = io_uring_queue_init(1, &ring, 0);

	/* Without the system call, io_uring_setup(1, NULL) is no EFAULT. */
	if (ret == -EPERM || (ret < 0 &&
			      !(syscall(__NR_io_uring_setup, 1, NULL) < 0 &&
				errno == EFAULT))) {
		printf("uring_server: io_uring is not available: %s\n",
		       strerror(-ret));
		exit(4);
	}
	if (!ret)
		io_uring_queue_exit(&ring);
}

int main(int argc, char **argv)
{
	static struct server s;
	long want_bytes = ex_request_bytes(requests);
	struct sockaddr_in sin;
	int lfd, status, rc;
	pid_t client;

	parse_args(argc, argv);
	setvbuf(stdout, NULL, _IOLBF, 0);
	need_uring();
	alarm(60);	/* an example must never hang a test run */
	s.kcm = socket(AF_KCM, SOCK_DGRAM, KCMPROTO_CONNECTED);
	if (s.kcm < 0)
		ex_die("socket(AF_KCM)");
	lfd = ex_listen(&sin);
	client = fork();
	if (client == 0) {
		close(s.kcm);	/* else the client would keep the mux alive */
		close(lfd);
		ex_client(&sin, conns, requests, 1, NULL);
	}
	ex_accept_attach(s.kcm, lfd, conns);
	printf("server: one KCM socket, %d connections, %d receives in flight\n",
	       conns, queue);

	serve(&s);
	close(s.kcm);	/* the mux goes, and with it the connections */
	printf("server: io_uring received %ld of %d requests, %ld of %ld bytes, ",
	       s.requests, requests, s.bytes, want_bytes);
	printf("%ld replies, %ld bad, %ld receives cancelled\n", s.replies,
	       s.bad, s.cancelled);
	rc = s.requests == requests && s.bytes == want_bytes &&
	     s.replies == requests && !s.bad && s.cancelled == queue - 1 ? 0 : -1;
	if (waitpid(client, &status, 0) != client || !WIFEXITED(status) ||
	    WEXITSTATUS(status)) {
		printf("server: the client failed\n");
		rc = -1;
	}
	printf("uring_server: %s\n", rc ? "FAIL" : "PASS");
	return rc ? 1 : 0;
}
