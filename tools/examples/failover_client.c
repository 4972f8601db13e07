// SPDX-License-Identifier: GPL-2.0
/*
 * failover_client: a KCM client that sends over two TCP connections and
 * survives one of them dropping.
 *
 * The client attaches two connections to one KCM socket and sends
 * messages; KCM writes each message whole to one connection.  Halfway,
 * the server resets the connection the messages came on.  The client does
 * nothing about it: its next send()s succeed, KCM notices the dead
 * connection and carries on over the other one.  The server (forked here,
 * plain TCP) checks that it got every message exactly once and whole, and
 * that those sent after the drop all came over the surviving connection.
 *
 *   failover_client [-n MESSAGES] [-k KCMSTAT]
 *
 * -k: run that kcmstat after the drop (make run shows it).
 * Exit status 0 when every check held.
 */
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>

#include "kcm_example.h"

#define MAX_MSGS	10000
#define PLEN(seq)	(16 + ((seq) * 53) % 1000)

static int nmsgs = 200;
static const char *kcmstat;

/* Server: reads from both connections until @want messages came. */
static int server_read(int *fds, int want, int *count, int *on, int *bad)
{
	static char buf[KCM_U_HDR + 2048];
	static unsigned char seen[MAX_MSGS];
	struct pollfd pfd[2];
	int got = 0, i;

	while (got < want) {
		for (i = 0; i < 2; i++)
			pfd[i] = (struct pollfd){ .fd = fds[i], .events = POLLIN };
		if (poll(pfd, 2, 10000) <= 0)
			return -1;
		for (i = 0; i < 2; i++) {
			long len, seq;

			if (fds[i] < 0 || !(pfd[i].revents & (POLLIN | POLLHUP)))
				continue;
			len = kcm_u_read_msg(fds[i], buf, sizeof(buf));
			if (len < 0) {
				fds[i] = -1;	/* reset or closed */
				continue;
			}
			seq = kcm_u_msg_check(buf, len);
			if (seq < 0 || seq >= nmsgs || seen[seq]++)
				(*bad)++;
			else
				on[seq] = i;
			count[i]++;
			got++;
		}
	}
	return 0;
}

/*
 * The server: phase 1, the first half; then it resets the connection
 * that carried them and tells the client; phase 2, the rest.
 */
static void run_server(int lfd, int ready_fd)
{
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };
	int fds[2], count[2] = { 0, 0 }, bad = 0, i, drop, rc = 0;
	static int on[MAX_MSGS];
	int half = nmsgs / 2;

	alarm(60);
	for (i = 0; i < 2; i++)
		fds[i] = accept(lfd, NULL, NULL);
	if (server_read(fds, half, count, on, &bad))
		ex_die("server: phase 1");
	drop = count[0] >= count[1] ? 0 : 1;
	printf("server: phase 1: %d + %d messages; resetting connection %d\n",
	       count[0], count[1], drop);
	setsockopt(fds[drop], SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(fds[drop]);
	fds[drop] = -1;
	if (write(ready_fd, &drop, sizeof(drop)) != sizeof(drop))
		ex_die("server: notify");
	count[0] = 0;
	count[1] = 0;
	if (server_read(fds, nmsgs - half, count, on, &bad)) {
		printf("server: phase 2: only %d messages\n", count[0] + count[1]);
		rc = 1;
	}
	for (i = half; i < nmsgs; i++)
		if (on[i] == drop)
			rc = 1;
	printf("server: phase 2: %d messages, all on connection %d: %s; %d bad\n",
	       count[0] + count[1], !drop, rc ? "no" : "yes", bad);
	exit(rc || bad ? 1 : 0);
}

/* Sends messages @from..@to-1 on KCM socket @kcm; every send must succeed. */
static void send_range(int kcm, int from, int to)
{
	static char buf[KCM_U_HDR + 2048];
	int i;

	for (i = from; i < to; i++) {
		size_t len = kcm_u_msg_build(buf, PLEN(i), i);

		if (send(kcm, buf, len, 0) != (ssize_t)len)
			ex_die("client: send");
	}
}

int main(int argc, char **argv)
{
	int kcm, tcp[2], prog, ready[2], drop, status, i, opt;
	struct sockaddr_in sin;
	struct pollfd pfd;
	pid_t server;
	int lfd;

	while ((opt = getopt(argc, argv, "n:k:")) != -1) {
		if (opt == 'n') {
			nmsgs = atoi(optarg);
		} else if (opt == 'k') {
			kcmstat = optarg;
		} else {
			fprintf(stderr, "usage: failover_client [-n MESSAGES] [-k KCMSTAT]\n");
			return 2;
		}
	}
	if (nmsgs < 2 || nmsgs > MAX_MSGS) {
		fprintf(stderr, "failover_client: 2..%d messages\n", MAX_MSGS);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	alarm(60);
	signal(SIGPIPE, SIG_IGN);
	lfd = ex_listen(&sin);
	if (pipe(ready))
		ex_die("pipe");
	server = fork();
	if (server == 0) {
		close(ready[0]);
		run_server(lfd, ready[1]);
	}
	close(ready[1]);
	close(lfd);

	kcm = socket(AF_KCM, SOCK_DGRAM, KCMPROTO_CONNECTED);
	prog = kcm_u_parser_len4();
	if (kcm < 0 || prog < 0)
		ex_die("socket(AF_KCM) or the parser");
	for (i = 0; i < 2; i++) {
		tcp[i] = ex_connect(&sin);
		if (kcm_u_attach(kcm, tcp[i], prog))
			ex_die("SIOCKCMATTACH");
	}
	close(prog);

	send_range(kcm, 0, nmsgs / 2);
	if (read(ready[0], &drop, sizeof(drop)) != sizeof(drop))
		ex_die("client: wait for the drop");
	/* Not needed by KCM; only so that phase 2 starts after the reset. */
	pfd = (struct pollfd){ .fd = tcp[drop], .events = POLLIN };
	poll(&pfd, 1, 5000);
	printf("client: connection %d was reset (poll: %s%s)\n", drop,
	       pfd.revents & POLLHUP ? "POLLHUP " : "",
	       pfd.revents & POLLERR ? "POLLERR" : "");
	send_range(kcm, nmsgs / 2, nmsgs);
	printf("client: all %d send() calls succeeded\n", nmsgs);
	usleep(200000);
	if (kcmstat && system(kcmstat) != 0)
		fprintf(stderr, "client: %s failed\n", kcmstat);

	if (waitpid(server, &status, 0) != server || !WIFEXITED(status) ||
	    WEXITSTATUS(status)) {
		printf("failover_client: FAIL\n");
		return 1;
	}
	close(kcm);
	printf("failover_client: PASS\n");
	return 0;
}
