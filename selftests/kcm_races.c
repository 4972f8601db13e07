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
 *   (none)          batched readers sharing one socket's lengths array
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

/* ---- batched readers of one socket -------------------------------------- */

enum { BR_MSGS = 20000, BR_ROOM_MAX = 4200, BR_LEN = KCM_U_HDR + 40 };

static atomic_int br_got;
static atomic_uchar br_seen[BR_MSGS];

/*
 * Reads @arg's socket with KCM_RECV_BATCH until every message is in,
 * with room for 40 messages and their lengths per call (@arg 0), or
 * for more each call (41 up to BR_ROOM_MAX, @arg 1).  Returns the count
 * of bad or repeated messages.
 */
static void *batch_reader(void *arg)
{
	static char ctls[2][CMSG_SPACE(BR_ROOM_MAX * sizeof(__u32))]
		__attribute__((aligned(8)));
	static char bufs[2][BR_ROOM_MAX * BR_LEN];
	long id = (long)arg, bad = 0, idle = 0;
	unsigned int room = id ? 41 : 40, n, i;
	struct msghdr mh;
	struct iovec iov;
	struct cmsghdr *c;
	size_t off;
	ssize_t r;
	long seq;

	while (atomic_load(&br_got) < BR_MSGS && idle < 500) {
		/* Room for as many messages as lengths: none is left out. */
		iov.iov_base = bufs[id];
		iov.iov_len = room * BR_LEN;
		memset(&mh, 0, sizeof(mh));
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		mh.msg_control = ctls[id];
		mh.msg_controllen = CMSG_SPACE(room * sizeof(__u32));
		/* SO_RCVTIMEO: it sleeps in the wait, the lock let go. */
		r = recvmsg(shared_kcm, &mh, 0);
		if (id && ++room > BR_ROOM_MAX)
			room = 41;
		if (r < 0) {
			idle++;
			continue;
		}
		idle = 0;
		c = CMSG_FIRSTHDR(&mh);
		if (!c || c->cmsg_type != KCM_MSG_LENS ||
		    (mh.msg_flags & MSG_CTRUNC))
			return (void *)(bad + 1);
		n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(__u32);
		for (i = 0, off = 0; i < n; i++) {
			__u32 len = ((__u32 *)CMSG_DATA(c))[i];

			seq = kcm_u_msg_check(bufs[id] + off, len);
			if (seq < 0 || seq >= BR_MSGS ||
			    atomic_exchange(&br_seen[seq], 1))
				bad++;
			off += len;
		}
		if (off != (size_t)r)
			bad++;
		atomic_fetch_add(&br_got, n);
	}
	return (void *)bad;
}

/*
 * Two tasks read one socket with KCM_RECV_BATCH, one with room for 40
 * lengths a call, the other for more each call (41 to 4200): the socket's
 * kept array of lengths grows under the first while it sleeps waiting
 * for messages.  Each message is seen exactly once, whole.
 */
TEST_DIFFERS(batched_readers_share_socket,
	     "KCM_RECV_BATCH fails with ENOPROTOOPT")
{
	int kcm = kcm_socket(SOCK_DGRAM), prog = kcm_u_parser_len4();
	int peer, local, batch = BR_ROOM_MAX, big = 8 << 20;
	void *bad0, *bad1;
	pthread_t t0, t1;
	pid_t pid;

	ASSERT_OK(kcm_u_tcp_pair(&peer, &local));
	ASSERT_OK(kcm_u_attach(kcm, local, prog));
	ASSERT_OK(setsockopt(kcm, SOL_KCM, KCM_RECV_BATCH, &batch,
			     sizeof(batch)));
	ASSERT_OK(setsockopt(kcm, SOL_SOCKET, SO_RCVBUFFORCE, &big,
			     sizeof(big)));
	kcm_u_set_timeo(kcm, SO_RCVTIMEO, 10);
	shared_kcm = kcm;
	pid = fork();
	ASSERT_GE(pid, 0);
	if (!pid)
		_exit(kcm_send_msgs(peer, 0, BR_MSGS, 40) ? 1 : 0);
	ASSERT_OK(-pthread_create(&t0, NULL, batch_reader, (void *)0L));
	ASSERT_OK(-pthread_create(&t1, NULL, batch_reader, (void *)1L));
	pthread_join(t0, &bad0);
	pthread_join(t1, &bad1);
	ASSERT_EQ(kcm_wait_child(pid), 0);
	ASSERT_EQ((long)bad0, 0);
	ASSERT_EQ((long)bad1, 0);
	ASSERT_EQ(atomic_load(&br_got), BR_MSGS);
	close(kcm);
}

KCM_TEST_MAIN
