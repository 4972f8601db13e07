// SPDX-License-Identifier: GPL-2.0
/*
 * tls_server: a pool of worker threads serving whole requests that arrive
 * over TLS connections, on one KCM multiplexor.
 *
 * A TLS server does its handshake on each accepted TCP connection, then
 * hands the keys it agreed on to kernel TLS (TCP_ULP "tls", SOL_TLS
 * TLS_TX and TLS_RX), which encrypts and decrypts from then on.  Here
 * the keys are a fixed test key on both ends (ex_tls() of
 * kcm_example.h), as the kernel's own TLS selftests do: the handshake is
 * not the point.  The connection, with kernel TLS on it, is then attached
 * to the mux: KCM frames the decrypted stream into requests, and writes
 * each reply whole through kernel TLS.  Each worker thread recv()s whole
 * requests on a KCM socket of its own (a clone) and answers them; none
 * of them sees a TLS record or a partial request.
 *
 * KCM goes through kernel TLS from Linux 6.6 on; before, the attach
 * fails with EOPNOTSUPP, and this program says so and exits 4 (skip).
 *
 * The client (forked here: ex_client() with kernel TLS on its
 * connections) sends REQUESTS requests over CONNS connections, several
 * per write, and checks that every request gets exactly one reply.
 *
 *   tls_server [-w WORKERS] [-c CONNS] [-n REQUESTS]
 *
 * Exit status 0 when every check held, 4 on a kernel before 6.6.
 */
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>

#include "kcm_example.h"

#define MAX_WORKERS	64

struct worker {
	pthread_t thread;
	int fd;			/* its KCM socket */
	long requests;
	long bytes;
	long bad;
};

static int nworkers = 4, conns = 3, requests = 300;
static struct worker workers[MAX_WORKERS];

/* A worker: whole requests in, one reply each, until told to stop. */
static void *run_worker(void *arg)
{
	struct worker *w = arg;
	char buf[KCM_U_HDR + 1024], reply[32];

	for (;;) {
		ssize_t n = recv(w->fd, buf, sizeof(buf), 0);
		long seq = n > 0 ? kcm_u_msg_check(buf, n) : -1;
		size_t len;

		if (n <= 0)
			ex_die("worker: recv");
		if (seq == EX_STOP)
			break;
		if (seq < 0) {
			w->bad++;
			continue;
		}
		w->requests++;
		w->bytes += n;
		len = kcm_u_msg_build(reply, EX_REPLY_PLEN, seq);
		if (send(w->fd, reply, len, 0) != (ssize_t)len)
			ex_die("worker: send");
	}
	/* It leaves the turn: the next stop goes to another worker. */
	close(w->fd);
	return NULL;
}

/*
 * Accepts @n connections on @lfd, puts kernel TLS on each (where the
 * handshake would end) and attaches it to the mux of @kcm.  Returns 0,
 * or -1 when this kernel's KCM does not go through kernel TLS.
 */
static int accept_tls_attach(int kcm, int lfd, int n)
{
	int prog = kcm_u_parser_len4(), i;

	if (prog < 0)
		ex_die("bpf(BPF_PROG_LOAD)");
	for (i = 0; i < n; i++) {
		int tcp = accept(lfd, NULL, NULL);

		if (tcp < 0)
			ex_die("accept");
		ex_tls(tcp);
		if (kcm_u_attach(kcm, tcp, prog)) {
			if (errno == EOPNOTSUPP)
				return -1;
			ex_die("SIOCKCMATTACH");
		}
		close(tcp);
	}
	close(prog);
	close(lfd);
	return 0;
}

static void parse_args(int argc, char **argv)
{
	int opt;

	while ((opt = getopt(argc, argv, "w:c:n:")) != -1) {
		switch (opt) {
		case 'w':
			nworkers = atoi(optarg);
			break;
		case 'c':
			conns = atoi(optarg);
			break;
		case 'n':
			requests = atoi(optarg);
			break;
		default:
			fprintf(stderr, "usage: tls_server [-w WORKERS] [-c CONNS]");
			fprintf(stderr, " [-n REQUESTS]\n");
			exit(2);
		}
	}
	if (nworkers < 1 || nworkers > MAX_WORKERS || conns < 1 ||
	    conns > EX_MAX_CONNS || requests < 1 || requests > 65535) {
		fprintf(stderr, "tls_server: 1..%d workers and connections, 1..65535 requests\n",
			MAX_WORKERS);
		exit(2);
	}
}

/* Sums the workers' counts; returns 0 when they add up. */
static int collect(void)
{
	long total = 0, bytes = 0, bad = 0, want = ex_request_bytes(requests);
	int i;

	for (i = 0; i < nworkers; i++) {
		printf("worker %d: %ld requests, %ld bytes\n", i,
		       workers[i].requests, workers[i].bytes);
		total += workers[i].requests;
		bytes += workers[i].bytes;
		bad += workers[i].bad;
	}
	printf("server: %d workers received %ld of %d requests over TLS",
	       nworkers, total, requests);
	printf(", %ld of %ld bytes, %ld bad\n", bytes, want, bad);
	return total == requests && bytes == want && !bad ? 0 : -1;
}

int main(int argc, char **argv)
{
	struct sockaddr_in sin;
	int lfd, i, status, rc;
	pid_t client;

	parse_args(argc, argv);
	setvbuf(stdout, NULL, _IOLBF, 0);
	alarm(60);	/* an example must never hang a test run */
	ex_ktls = 1;
	workers[0].fd = socket(AF_KCM, SOCK_DGRAM, KCMPROTO_CONNECTED);
	if (workers[0].fd < 0)
		ex_die("socket(AF_KCM)");
	for (i = 1; i < nworkers; i++) {
		workers[i].fd = kcm_u_clone(workers[0].fd);
		if (workers[i].fd < 0)
			ex_die("SIOCKCMCLONE");
	}
	lfd = ex_listen(&sin);
	client = fork();
	if (client == 0) {
		for (i = 0; i < nworkers; i++)
			close(workers[i].fd);
		close(lfd);
		/* one stop per worker: a stopped worker leaves the turn */
		ex_client(&sin, conns, requests, nworkers, NULL);
	}
	if (accept_tls_attach(workers[0].fd, lfd, conns)) {
		kill(client, SIGTERM);
		waitpid(client, NULL, 0);
		printf("tls_server: SKIP: KCM does not go through kernel TLS");
		printf(" before Linux 6.6 (attach: EOPNOTSUPP)\n");
		return 4;
	}
	printf("server: mux with %d KCM sockets and %d TLS connections\n",
	       nworkers, conns);
	for (i = 0; i < nworkers; i++)
		if (pthread_create(&workers[i].thread, NULL, run_worker,
				   &workers[i]))
			ex_die("pthread_create");
	/* The mux goes with the last worker and closes the connections. */
	for (i = 0; i < nworkers; i++)
		pthread_join(workers[i].thread, NULL);
	rc = collect();
	if (waitpid(client, &status, 0) != client || !WIFEXITED(status) ||
	    WEXITSTATUS(status)) {
		printf("server: the client failed\n");
		rc = -1;
	}
	printf("tls_server: %s\n", rc ? "FAIL" : "PASS");
	return rc ? 1 : 0;
}
