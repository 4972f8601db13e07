/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the KCM examples share on top of kcm_util.h (tools/lib/kcm: the
 * message format, the length parser as raw BPF instructions, loopback TCP,
 * kernel TLS and the KCM ioctls): ending with a message, the
 * accept-and-attach step of a server, the pool of worker processes of
 * prefork_server and sharded_server, and the TCP client (kTLS with
 * ex_ktls) that prefork_server, uring_server and tls_server serve.  Each
 * example is otherwise complete on its own.
 */
#ifndef KCM_EXAMPLE_H
#define KCM_EXAMPLE_H

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include "kcm_util.h"

#define EX_MAX_CONNS	64
#define EX_STOP		0xffffffffu	/* the request that stops a server */
#define EX_REQ_SIZE(seq) (8 + ((seq) * 37) % 400)	/* payload bytes */
#define EX_REQ_MAX	(KCM_U_HDR + 512)
#define EX_REPLY_PLEN	8		/* a reply's payload: the seq and 4 */

static inline void ex_die(const char *what)
{
	fprintf(stderr, "%s: %s\n", what, strerror(errno));
	exit(1);
}

/*
 * Set by an example that speaks TLS (tls_server): every connection
 * ex_connect() makes, and ex_tls() is given, gets kernel TLS both ways
 * with a fixed test key, where a real program would set the keys its TLS
 * handshake agreed on.
 */
static int ex_ktls;

static inline void ex_tls(int fd)
{
	if (ex_ktls && kcm_u_ktls(fd, TLS_1_3_VERSION, TLS_CIPHER_AES_GCM_128,
				  0x42))
		ex_die("kTLS (TCP_ULP \"tls\", TLS_TX, TLS_RX)");
}

/* A loopback TCP listener on any port; the address goes to @sin. */
static inline int ex_listen(struct sockaddr_in *sin)
{
	int fd = kcm_u_tcp_listener(sin);

	if (fd < 0)
		ex_die("listen");
	return fd;
}

/* A TCP connection to @sin, small writes sent at once. */
static inline int ex_connect(const struct sockaddr_in *sin)
{
	int fd = kcm_u_tcp_connect(sin);

	if (fd < 0)
		ex_die("connect");
	kcm_u_setsockopt_int(fd, IPPROTO_TCP, TCP_NODELAY, 1);
	ex_tls(fd);
	return fd;
}

/*
 * The server's side: accepts @n connections on @lfd and attaches each to
 * the mux of KCM socket @kcm with the length parser.  The mux holds the
 * connections from then on, so their fds, the parser's and @lfd go.
 */
static inline void ex_accept_attach(int kcm, int lfd, int n)
{
	int prog = kcm_u_parser_len4(), i;

	if (prog < 0)
		ex_die("bpf(BPF_PROG_LOAD)");
	for (i = 0; i < n; i++) {
		int tcp = accept(lfd, NULL, NULL);

		if (tcp < 0 || kcm_u_attach(kcm, tcp, prog))
			ex_die("SIOCKCMATTACH");
		close(tcp);
	}
	close(prog);
	close(lfd);
}

/* A KCM socket and @n - 1 clones of it, on one mux, into @kcm. */
static inline void ex_kcm_socks(int *kcm, int n)
{
	int i;

	kcm[0] = socket(AF_KCM, SOCK_DGRAM, KCMPROTO_CONNECTED);
	if (kcm[0] < 0)
		ex_die("socket(AF_KCM)");
	for (i = 1; i < n; i++) {
		kcm[i] = kcm_u_clone(kcm[0]);
		if (kcm[i] < 0)
			ex_die("SIOCKCMCLONE");
	}
}

/*
 * Forks a worker process per KCM socket of @kcm (@n, pids to @pids):
 * worker i runs @run(i, kcm[i], fd) with only its own socket open, fd
 * the write end of a pipe to report on.  From then on only the workers
 * hold the sockets, so the last one out ends the mux.  Returns the read
 * end of the pipe.
 */
static inline int ex_fork_workers(const int *kcm, int n, pid_t *pids,
				  void (*run)(int id, int fd, int report_fd))
{
	int pipefd[2], i, j;

	if (pipe(pipefd))
		ex_die("pipe");
	for (i = 0; i < n; i++) {
		pids[i] = fork();
		if (pids[i] < 0)
			ex_die("fork");
		if (pids[i] == 0) {
			for (j = 0; j < n; j++)
				if (j != i)
					close(kcm[j]);
			close(pipefd[0]);
			run(i, kcm[i], pipefd[1]);
			exit(0);
		}
	}
	for (i = 0; i < n; i++)
		close(kcm[i]);
	close(pipefd[1]);
	return pipefd[0];
}

/*
 * The client ends when every worker has stopped and the mux has closed
 * the connections; the workers' reports are in the pipe by then.  If it
 * failed, the @n workers (@pids) may still wait for requests: they are
 * stopped.  Returns 0 when the client succeeded.
 */
static inline int ex_wait_client(pid_t client, const pid_t *pids, int n)
{
	int status, i;

	if (waitpid(client, &status, 0) == client && WIFEXITED(status) &&
	    !WEXITSTATUS(status))
		return 0;
	printf("server: the client failed\n");
	for (i = 0; i < n; i++)
		kill(pids[i], SIGTERM);
	return -1;
}

/* Reaps the @n workers @pids. */
static inline void ex_reap(const pid_t *pids, int n)
{
	int i;

	for (i = 0; i < n; i++)
		waitpid(pids[i], NULL, 0);
}

/* The bytes of requests 0..@n-1, headers included. */
static inline long ex_request_bytes(int n)
{
	long bytes = 0;
	int i;

	for (i = 0; i < n; i++)
		bytes += KCM_U_HDR + EX_REQ_SIZE(i);
	return bytes;
}

/* Client: reads replies from all @conns until @n came; 0 if all good. */
static inline int ex_client_replies(const int *fds, int conns, int n)
{
	static unsigned char seen[1 << 16];
	struct pollfd pfd[EX_MAX_CONNS];
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
			long len, seq;

			if (!(pfd[i].revents & POLLIN))
				continue;
			len = kcm_u_read_msg(fds[i], buf, sizeof(buf));
			seq = len < 0 ? -1 : kcm_u_msg_check(buf, len);
			if (seq < 0 || seq >= n || seen[seq]++)
				bad++;
			got++;
		}
	}
	printf("client: %d replies over %d connections, %d bad\n", got, conns, bad);
	return bad ? -1 : 0;
}

/*
 * The client (plain TCP, a process of its own): @requests requests of
 * EX_REQ_SIZE() round robin over @conns connections to @sin, 5 per
 * write; then it checks that each got exactly one reply, runs @kcmstat
 * (if not NULL), sends @stops EX_STOP requests and waits for the server
 * to close the connections.  Exits 0 when every reply came.
 */
static inline void __attribute__((noreturn))
ex_client(const struct sockaddr_in *sin, int conns, int requests, int stops,
	  const char *kcmstat)
{
	static char buf[5 * EX_REQ_MAX];
	int fds[EX_MAX_CONNS], i, k;

	alarm(60);
	for (i = 0; i < conns; i++)
		fds[i] = ex_connect(sin);
	for (i = 0; i < requests; i += 5) {
		size_t len = 0;

		for (k = i; k < i + 5 && k < requests; k++)
			len += kcm_u_msg_build(buf + len, EX_REQ_SIZE(k), k);
		if (kcm_u_write_all(fds[(i / 5) % conns], buf, len))
			ex_die("client: write");
	}
	if (ex_client_replies(fds, conns, requests))
		exit(1);
	if (kcmstat) {
		fflush(stdout);
		if (system(kcmstat) != 0)
			fprintf(stderr, "client: %s failed\n", kcmstat);
	}
	for (i = 0; i < stops; i++)
		if (kcm_u_write_all(fds[0], buf,
				    kcm_u_msg_build(buf, 4, EX_STOP)))
			ex_die("client: write stop");
	for (i = 0; i < conns; i++)
		while (read(fds[i], buf, sizeof(buf)) > 0)
			;
	exit(0);
}

#endif /* KCM_EXAMPLE_H */
