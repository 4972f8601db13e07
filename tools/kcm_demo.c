// SPDX-License-Identifier: GPL-2.0
/*
 * kcm_demo: what an application does with KCM, step by step.
 *
 * A server creates a multiplexor and clones it for a pool of worker
 * processes, accepts two TCP connections and attaches them with a BPF
 * length parser, printing each one's descriptor and TCP endpoints.  A
 * client sends length-prefixed requests over both connections, several per
 * write, each naming the client end of its connection; every worker's
 * recv() returns one whole request.  /proc/net/kcm is shown before
 * everything is closed.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kcm_util.h"

#define WORKERS		4
#define CONNS		2
#define REQUESTS	8

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static void show_proc(const char *when)
{
	char line[256];
	FILE *f;

	printf("--- /proc/net/kcm %s ---\n", when);
	f = fopen("/proc/net/kcm", "r");
	if (!f) {
		printf("(cannot open: %s)\n", strerror(errno));
		return;
	}
	while (fgets(line, sizeof(line), f))
		fputs(line, stdout);
	fclose(f);
}

/* "ADDR:PORT" of the local (@peer 0) or remote end of TCP socket @fd. */
static const char *endpoint(int fd, int peer, char *out, size_t size)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	char a[INET_ADDRSTRLEN];

	if ((peer ? getpeername : getsockname)(fd, (struct sockaddr *)&sin, &len) ||
	    !inet_ntop(AF_INET, &sin.sin_addr, a, sizeof(a)))
		snprintf(out, size, "?");
	else
		snprintf(out, size, "%s:%u", a, ntohs(sin.sin_port));
	return out;
}

/*
 * The client: REQUESTS requests, alternating connections, two per write;
 * each names the client end of the connection it goes over.
 */
static void run_client(const struct sockaddr_in *sin)
{
	char buf[2 * 64], from[CONNS][32];
	int fds[CONNS], i, c;

	for (c = 0; c < CONNS; c++) {
		fds[c] = kcm_u_tcp_connect(sin);
		if (fds[c] < 0)
			die("connect");
		endpoint(fds[c], 0, from[c], sizeof(from[c]));
	}
	sleep(1);	/* let the server attach both connections */
	for (i = 0; i < REQUESTS; i += 2) {
		size_t len = 0;
		int k;

		for (k = i; k < i + 2; k++) {
			char text[56];
			uint32_t n = snprintf(text, sizeof(text),
					      "request %d from %s", k,
					      from[(i / 2) % CONNS]);
			uint32_t hdr = htonl(n);

			memcpy(buf + len, &hdr, 4);
			memcpy(buf + len + 4, text, n);
			len += 4 + n;
		}
		if (write(fds[(i / 2) % CONNS], buf, len) != (ssize_t)len)
			die("write");
	}
	sleep(2);
	exit(0);
}

/* A worker: recv() whole requests until none comes for 3 seconds. */
static void run_worker(int id, int fd)
{
	char buf[256];
	ssize_t n;

	kcm_u_set_timeo(fd, SO_RCVTIMEO, 3000);
	while ((n = recv(fd, buf, sizeof(buf), 0)) > 0)
		printf("worker %d: recv() = %zd bytes: [len %u] \"%.*s\"\n",
		       id, n, ntohl(*(uint32_t *)buf), (int)n - 4, buf + 4);
	exit(0);
}

int main(void)
{
	struct sockaddr_in sin;
	int fds[WORKERS], tcp[CONNS], lfd, prog, i;
	pid_t client_pid;

	fds[0] = socket(AF_KCM, SOCK_SEQPACKET, KCMPROTO_CONNECTED);
	if (fds[0] < 0)
		die("socket(AF_KCM)");
	printf("socket(AF_KCM, SOCK_SEQPACKET, KCMPROTO_CONNECTED) = %d: a new mux\n",
	       fds[0]);
	for (i = 1; i < WORKERS; i++) {
		fds[i] = kcm_u_clone(fds[0]);
		if (fds[i] < 0)
			die("ioctl(SIOCKCMCLONE)");
		printf("ioctl(%d, SIOCKCMCLONE) = fd %d: worker %d joins the mux\n",
		       fds[0], fds[i], i);
	}

	lfd = kcm_u_tcp_listener(&sin);
	if (lfd < 0)
		die("listen");
	fflush(stdout);	/* or the child prints it again */
	client_pid = fork();
	if (!client_pid)
		run_client(&sin);

	prog = kcm_u_parser_len4();
	if (prog < 0)
		die("bpf(BPF_PROG_LOAD)");
	for (i = 0; i < CONNS; i++) {
		char here[32], there[32];

		tcp[i] = accept(lfd, NULL, NULL);
		if (tcp[i] < 0)
			die("accept");
		if (kcm_u_attach(fds[0], tcp[i], prog))
			die("ioctl(SIOCKCMATTACH)");
		printf("ioctl(SIOCKCMATTACH) connection %d: TCP fd %d, %s <- client %s, ",
		       i, tcp[i], endpoint(tcp[i], 0, here, sizeof(here)),
		       endpoint(tcp[i], 1, there, sizeof(there)));
		printf("parser \"load_word(skb, 0) + 4\": psock-%d\n", i);
	}
	close(prog);
	/* The mux keeps the connections: the application's fds may go. */
	for (i = 0; i < CONNS; i++)
		close(tcp[i]);
	printf("closed TCP fds %d and %d: the mux holds both connections\n",
	       tcp[0], tcp[1]);
	fflush(stdout);

	for (i = 0; i < WORKERS; i++)
		if (!fork())
			run_worker(i, fds[i]);
	for (i = 0; i < WORKERS + 1; i++)
		wait(NULL);
	show_proc("with one mux, 4 KCM sockets and 2 connections");

	for (i = 0; i < WORKERS; i++)
		close(fds[i]);
	printf("closed all %d KCM sockets: the mux and its connections are gone\n",
	       WORKERS);
	show_proc("after close");
	return 0;
}
