// SPDX-License-Identifier: GPL-2.0
/*
 * Upstream KCM's CVE history as tests: each scenario races the operations
 * a past bug needed, many times over.  Passing means no crash, no hang,
 * every message that arrives is intact, and (on the debug kernel) no
 * KASAN or lockdep report in the log.
 *
 *   CVE-2024-44946  concurrent sendmsg on one socket (kcm_send.c)
 *   CVE-2026-43244  partial copy fault (kcm_send.c)
 *   CVE-2025-38717  unattach racing close of the owning socket
 *   CVE-2022-3521   tx work racing release
 *   CVE-2022-49814  recv racing requeue
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>

#include "kcm_data.h"

#define ROUNDS	150

static void *unattach_thread(void *arg)
{
	int *fds = arg;	/* { kcm, tcp } */

	kcm_u_unattach(fds[0], fds[1]);
	return NULL;
}

static void *close_thread(void *arg)
{
	close(*(int *)arg);
	return NULL;
}

/* CVE-2025-38717: a clone unattaches while the other sockets close. */
TEST(unattach_vs_close)
{
	int prog = kcm_u_parser_len4(), r;

	ASSERT_GE(prog, 0);
	for (r = 0; r < ROUNDS; r++) {
		int kcm = kcm_socket(SOCK_DGRAM), c = kcm_u_clone(kcm);
		int peer, local, args[2];
		pthread_t a, b;

		ASSERT_GE(c, 0);
		ASSERT_OK(kcm_u_tcp_pair(&peer, &local));
		ASSERT_OK(kcm_u_attach(kcm, local, prog));
		ASSERT_OK(kcm_send_msgs(peer, 0, 4, 50));
		args[0] = c;
		args[1] = local;
		ASSERT_OK(-pthread_create(&a, NULL, unattach_thread, args));
		ASSERT_OK(-pthread_create(&b, NULL, close_thread, &kcm));
		pthread_join(a, NULL);
		pthread_join(b, NULL);
		close(c);
		close(local);
		close(peer);
	}
}

/*
 * CVE-2022-3521: messages wait for TCP room; room appears (write_space
 * queues the socket's tx work) while the socket is being released.
 */
TEST(tx_work_vs_release)
{
	int prog = kcm_u_parser_len4(), r, sndbuf = 4096;
	static char msg[3000];
	size_t len = kcm_u_msg_build(msg, 2900, 1);

	for (r = 0; r < ROUNDS; r++) {
		int kcm = kcm_socket(SOCK_DGRAM), peer, local, i;
		pthread_t t;

		ASSERT_OK(kcm_u_tcp_pair(&peer, &local));
		ASSERT_OK(setsockopt(local, SOL_SOCKET, SO_SNDBUF, &sndbuf,
				     sizeof(sndbuf)));
		ASSERT_OK(setsockopt(peer, SOL_SOCKET, SO_RCVBUF, &sndbuf,
				     sizeof(sndbuf)));
		ASSERT_OK(kcm_u_attach(kcm, local, prog));
		for (i = 0; i < 20; i++)
			if (send(kcm, msg, len, MSG_DONTWAIT) < 0)
				break;
		ASSERT_OK(-pthread_create(&t, NULL, close_thread, &kcm));
		/* Reading makes TCP room: write_space fires during close. */
		while (recv(peer, msg, sizeof(msg), MSG_DONTWAIT) > 0)
			;
		pthread_join(t, NULL);
		close(local);
		close(peer);
	}
}

static atomic_int stop_flag;
static int shared_kcm;

static void *toggle_thread(void *arg)
{
	int one = 1, zero = 0;

	(void)arg;
	while (!atomic_load(&stop_flag)) {
		setsockopt(shared_kcm, SOL_KCM, KCM_RECV_DISABLE, &one,
			   sizeof(one));
		setsockopt(shared_kcm, SOL_KCM, KCM_RECV_DISABLE, &zero,
			   sizeof(zero));
		/* Race, but let the reader in: a spinning toggler starves it. */
		usleep(50);
	}
	return NULL;
}

/*
 * CVE-2022-49814: one task reads while another keeps taking the socket
 * out of the rotation (requeueing its messages) and a third closes and
 * re-clones a second reader.  Each message is seen exactly once.
 */
TEST_DIFFERS(recv_vs_requeue,
	     "messages stop arriving here: they straddle segments")
{
	enum { MSGS = 2000 };
	int kcm = kcm_socket(SOCK_DGRAM), prog = kcm_u_parser_len4();
	static unsigned char seen[MSGS];
	int peer, local, got = 0, idle = 0;
	pthread_t t;
	pid_t pid;
	char buf[128];
	long seq;

	ASSERT_OK(kcm_u_tcp_pair(&peer, &local));
	ASSERT_OK(kcm_u_attach(kcm, local, prog));
	shared_kcm = kcm;
	pid = fork();
	ASSERT_GE(pid, 0);
	if (!pid)
		_exit(kcm_send_msgs(peer, 0, MSGS, 40) ? 1 : 0);
	ASSERT_OK(-pthread_create(&t, NULL, toggle_thread, NULL));
	while (got < MSGS && idle < 500) {
		int c = kcm_u_clone(kcm), k;

		ASSERT_GE(c, 0);
		for (k = 0; k < 20; k++) {
			int fd = k & 1 ? c : kcm;
			ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);

			if (n < 0) {
				ASSERT_EQ(errno, EAGAIN);
				idle++;
				usleep(1000);
				continue;
			}
			idle = 0;
			seq = kcm_u_msg_check(buf, n);
			ASSERT_TRUE(seq >= 0 && seq < MSGS);
			ASSERT_EQ(seen[seq], 0);
			seen[seq] = 1;
			got++;
		}
		close(c);	/* its unread messages go back to the mux */
	}
	atomic_store(&stop_flag, 1);
	pthread_join(t, NULL);
	ASSERT_EQ(kcm_wait_child(pid), 0);
	ASSERT_EQ(got, MSGS);
	close(kcm);
}

KCM_TEST_MAIN
