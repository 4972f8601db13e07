// SPDX-License-Identifier: GPL-2.0
/*
 * prefork_server: a pre-forked worker server on one KCM multiplexor.
 *
 * The server makes a KCM socket, clones it once per worker, accepts the
 * client's TCP connections and attaches them with a length parser, then
 * forks the workers.  Each worker recv()s whole requests on its own clone
 * (KCM hands them out in turn, from whichever connection they came) and
 * answers each with a small reply that KCM writes whole to one of the
 * connections.  No worker frames, locks or reassembles anything.
 *
 * The client (forked here, plain TCP: ex_client() of kcm_example.h, which
 * uring_server shares) sends REQUESTS requests of varying sizes over
 * CONNS connections, several per write, and checks that every request
 * gets exactly one reply.  Then it stops the workers.  The server
 * checks that the workers together received every request and byte.
 *
 *   prefork_server [-w WORKERS] [-c CONNS] [-n REQUESTS] [-k KCMSTAT]
 *
 * -k: run that kcmstat while the mux is busy (make run shows it).
 * Exit status 0 when every check held.
 */
#include "kcm_example.h"

#define MAX_WORKERS	64

/* What a worker tells the server when it stops. */
struct report {
	int worker;
	long requests;
	long bytes;
	long bad;
};

static int workers = 4, conns = 3, requests = 300;
static const char *kcmstat;

/* A worker: whole requests in, one reply each, until told to stop. */
static void run_worker(int id, int fd, int report_fd)
{
	static char buf[KCM_U_HDR + 1024];
	struct report r = { .worker = id };
	char reply[32];

	alarm(60);
	for (;;) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		long seq = n > 0 ? kcm_u_msg_check(buf, n) : -1;
		size_t len;

		if (n <= 0)
			ex_die("worker: recv");
		if (seq == EX_STOP)
			break;
		if (seq < 0) {
			r.bad++;
			continue;
		}
		r.requests++;
		r.bytes += n;
		len = kcm_u_msg_build(reply, EX_REPLY_PLEN, seq);
		if (send(fd, reply, len, 0) != (ssize_t)len)
			ex_die("worker: send");
	}
	if (write(report_fd, &r, sizeof(r)) != sizeof(r))
		ex_die("worker: report");
	exit(0);
}

static void parse_args(int argc, char **argv)
{
	int opt;

	while ((opt = getopt(argc, argv, "w:c:n:k:")) != -1) {
		switch (opt) {
		case 'w':
			workers = atoi(optarg);
			break;
		case 'c':
			conns = atoi(optarg);
			break;
		case 'n':
			requests = atoi(optarg);
			break;
		case 'k':
			kcmstat = optarg;
			break;
		default:
			fprintf(stderr, "usage: prefork_server [-w WORKERS] [-c CONNS]");
			fprintf(stderr, " [-n REQUESTS] [-k KCMSTAT]\n");
			exit(2);
		}
	}
	if (workers < 1 || workers > MAX_WORKERS || conns < 1 ||
	    conns > EX_MAX_CONNS || requests < 1 || requests > 65535) {
		fprintf(stderr, "prefork_server: 1..%d workers and connections",
			MAX_WORKERS);
		fprintf(stderr, ", 1..65535 requests\n");
		exit(2);
	}
}

/* Sums the workers' reports; returns 0 when they add up. */
static int collect(int report_fd)
{
	long total = 0, bytes = 0, want_bytes = ex_request_bytes(requests);
	struct report r;
	long bad = 0;
	int i;

	for (i = 0; i < workers; i++) {
		if (read(report_fd, &r, sizeof(r)) != sizeof(r))
			ex_die("server: worker report");
		printf("worker %d: %ld requests, %ld bytes\n", r.worker,
		       r.requests, r.bytes);
		total += r.requests;
		bytes += r.bytes;
		bad += r.bad;
	}
	printf("server: %d workers received %ld of %d requests, %ld of %ld bytes, %ld bad\n",
	       workers, total, requests, bytes, want_bytes, bad);
	return total == requests && bytes == want_bytes && !bad ? 0 : -1;
}

int main(int argc, char **argv)
{
	int kcm[MAX_WORKERS], report, lfd, i, rc;
	struct sockaddr_in sin;
	pid_t client, pids[MAX_WORKERS];

	parse_args(argc, argv);
	setvbuf(stdout, NULL, _IOLBF, 0);
	alarm(60);	/* an example must never hang a test run */
	ex_kcm_socks(kcm, workers);
	lfd = ex_listen(&sin);
	client = fork();
	if (client == 0) {
		/* Else the client would keep the mux alive. */
		for (i = 0; i < workers; i++)
			close(kcm[i]);
		close(lfd);
		/* one stop per worker: a stopped worker leaves the turn */
		ex_client(&sin, conns, requests, workers, kcmstat);
	}
	ex_accept_attach(kcm[0], lfd, conns);
	printf("server: mux with %d KCM sockets and %d connections\n", workers, conns);

	report = ex_fork_workers(kcm, workers, pids, run_worker);
	rc = ex_wait_client(client, pids, workers);
	if (!rc)
		rc = collect(report);
	ex_reap(pids, workers);
	printf("prefork_server: %s\n", rc ? "FAIL" : "PASS");
	return rc ? 1 : 0;
}
