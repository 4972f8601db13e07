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
 * The client (forked here, plain TCP) sends REQUESTS requests of varying
 * sizes over CONNS connections, several per write, and checks that every
 * request gets exactly one reply.  Then it stops the workers.  The server
 * checks that the workers together received every request and byte.
 *
 *   prefork_server [-w WORKERS] [-c CONNS] [-n REQUESTS] [-k KCMSTAT]
 *
 * -k: run that kcmstat while the mux is busy (make run shows it).
 * Exit status 0 when every check held.
 */
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>

#include "kcm_example.h"

#define MAX_WORKERS	64
#define MAX_CONNS	64
#define STOP		0xffffffffu
#define REQ_SIZE(seq)	(8 + ((seq) * 37) % 400)	/* payload bytes */

/* What a worker tells the server when it stops. */
struct report {
	int worker;
	long requests;
	long bytes;
	long bad;
};

static int workers = 4, conns = 3, requests = 300;
static const char *kcmstat;

/* The message that tells the worker that gets it to stop. */
static void send_stop(int fd)
{
	char buf[16];

	if (ex_write_all(fd, buf, ex_msg_build(buf, STOP, 4)))
		ex_die("client: write stop");
}

/* Reads replies from all connections until @n arrived; 0 if all good. */
static int client_replies(const int *fds, int n)
{
	static unsigned char seen[1 << 16];
	struct pollfd pfd[MAX_CONNS];
	int got = 0, bad = 0, i;
	char buf[64];

	for (i = 0; i < conns; i++)
		pfd[i] = (struct pollfd){ .fd = fds[i], .events = POLLIN };
	while (got < n) {
		if (poll(pfd, conns, 5000) <= 0) {
			fprintf(stderr, "client: %d of %d replies, none for 5 s\n", got, n);
			return -1;
		}
		for (i = 0; i < conns; i++) {
			ssize_t len;
			long seq;

			if (!(pfd[i].revents & POLLIN))
				continue;
			len = ex_read_msg(fds[i], buf, sizeof(buf));
			seq = len < 0 ? -1 : ex_msg_check(buf, len);
			if (seq < 0 || seq >= n || seen[seq]++)
				bad++;
			got++;
		}
	}
	printf("client: %d replies over %d connections, %d bad\n", got, conns, bad);
	return bad ? -1 : 0;
}

/* The client: requests round robin over the connections, 5 per write. */
static void run_client(const struct sockaddr_in *sin)
{
	static char buf[5 * (EX_HDR + 512)];
	int fds[MAX_CONNS], i, k, rc;

	alarm(60);
	for (i = 0; i < conns; i++)
		fds[i] = ex_connect(sin);
	for (i = 0; i < requests; i += 5) {
		size_t len = 0;

		for (k = i; k < i + 5 && k < requests; k++)
			len += ex_msg_build(buf + len, k, REQ_SIZE(k));
		if (ex_write_all(fds[(i / 5) % conns], buf, len))
			ex_die("client: write");
	}
	rc = client_replies(fds, requests);
	if (rc)
		exit(1);
	if (kcmstat) {
		fflush(stdout);
		if (system(kcmstat) != 0)
			fprintf(stderr, "client: %s failed\n", kcmstat);
	}
	/* One stop per worker: a stopped worker leaves the turn. */
	for (i = 0; i < workers; i++)
		send_stop(fds[0]);
	/* The server closes everything when the last worker is gone. */
	for (i = 0; i < conns; i++)
		while (read(fds[i], buf, sizeof(buf)) > 0)
			;
	exit(0);
}

/* A worker: whole requests in, one reply each, until told to stop. */
static void run_worker(int id, int fd, int report_fd)
{
	static char buf[EX_HDR + 1024];
	struct report r = { .worker = id };
	char reply[32];

	alarm(60);
	for (;;) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		long seq = n > 0 ? ex_msg_check(buf, n) : -1;
		size_t len;

		if (n <= 0)
			ex_die("worker: recv");
		if (seq == STOP)
			break;
		if (seq < 0) {
			r.bad++;
			continue;
		}
		r.requests++;
		r.bytes += n;
		len = ex_msg_build(reply, seq, 8);
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
	    conns > MAX_CONNS || requests < 1 || requests > 65535) {
		fprintf(stderr, "prefork_server: 1..%d workers and connections",
			MAX_WORKERS);
		fprintf(stderr, ", 1..65535 requests\n");
		exit(2);
	}
}

/* Sums the workers' reports; returns 0 when they add up. */
static int collect(int report_fd)
{
	long total = 0, bytes = 0, want_bytes = 0, bad = 0;
	struct report r;
	int i;

	for (i = 0; i < requests; i++)
		want_bytes += EX_HDR + REQ_SIZE(i);
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
	int kcm[MAX_WORKERS], pipefd[2], lfd, prog, i, j, status, rc;
	struct sockaddr_in sin;
	pid_t client, pids[MAX_WORKERS];

	parse_args(argc, argv);
	setvbuf(stdout, NULL, _IOLBF, 0);
	alarm(60);	/* an example must never hang a test run */
	kcm[0] = socket(AF_KCM, SOCK_DGRAM, KCMPROTO_CONNECTED);
	if (kcm[0] < 0)
		ex_die("socket(AF_KCM)");
	for (i = 1; i < workers; i++) {
		kcm[i] = ex_clone(kcm[0]);
		if (kcm[i] < 0)
			ex_die("SIOCKCMCLONE");
	}
	lfd = ex_listen(&sin);
	client = fork();
	if (client == 0) {
		/* Else the client would keep the mux alive. */
		for (i = 0; i < workers; i++)
			close(kcm[i]);
		close(lfd);
		run_client(&sin);
	}
	prog = ex_parser_raw();
	if (prog < 0)
		ex_die("bpf(BPF_PROG_LOAD)");
	for (i = 0; i < conns; i++) {
		int tcp = accept(lfd, NULL, NULL);

		if (tcp < 0 || ex_attach(kcm[0], tcp, prog))
			ex_die("SIOCKCMATTACH");
		close(tcp);	/* the mux holds the connection now */
	}
	close(prog);
	close(lfd);
	printf("server: mux with %d KCM sockets and %d connections\n", workers, conns);

	if (pipe(pipefd))
		ex_die("pipe");
	for (i = 0; i < workers; i++) {
		pids[i] = fork();
		if (pids[i] == 0) {
			for (j = 0; j < workers; j++)
				if (j != i)
					close(kcm[j]);
			close(pipefd[0]);
			run_worker(i, kcm[i], pipefd[1]);
		}
	}
	/* Only the workers hold the KCM sockets: the last one out ends the mux. */
	for (i = 0; i < workers; i++)
		close(kcm[i]);
	close(pipefd[1]);

	/*
	 * The client ends when every worker has stopped and the mux has
	 * closed the connections; the workers' reports are in the pipe by
	 * then.  If it failed, workers may still wait for requests.
	 */
	if (waitpid(client, &status, 0) != client || !WIFEXITED(status) ||
	    WEXITSTATUS(status)) {
		printf("server: the client failed\n");
		for (i = 0; i < workers; i++)
			kill(pids[i], SIGTERM);
		rc = -1;
	} else {
		rc = collect(pipefd[0]);
	}
	for (i = 0; i < workers; i++)
		waitpid(pids[i], NULL, 0);
	printf("prefork_server: %s\n", rc ? "FAIL" : "PASS");
	return rc ? 1 : 0;
}
