// SPDX-License-Identifier: GPL-2.0
/*
 * Stress: many threads create, clone, attach, unattach, send, receive,
 * change options and close on shared multiplexors at once, for a bounded
 * time (KCM_STRESS_SECS, default 15).  Every message that arrives, on a
 * KCM socket or on a TCP peer, must be byte exact.
 *
 * Then a settled run checks the books: every message sent arrives exactly
 * once or is counted as dropped, and /proc/net/kcm_stats agrees with what
 * the test counted itself.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "kcm_data.h"

static atomic_int stop;
static atomic_long rx_ok, tx_ok, peer_ok, bad;
static int mux_kcm, prog;

static unsigned int rnd(unsigned int *s)
{
	*s = *s * 1103515245 + 12345;
	return *s >> 8;
}

static ssize_t max_zero(ssize_t n)
{
	return n > 0 ? n : 0;
}

static void note_bad(const char *what, long seq)
{
	printf("# stress: bad message on %s (seq %ld)\n", what, seq);
	atomic_fetch_add(&bad, 1);
}

/* Reads whatever complete messages a TCP peer has and checks them. */
static void drain_peer(int peer, char *buf, size_t cap, size_t *have)
{
	ssize_t n;
	uint32_t hdr;
	size_t len;

	n = recv(peer, buf + *have, cap - *have, MSG_DONTWAIT);
	if (n <= 0)
		return;
	*have += n;
	while (*have >= KCM_U_HDR) {
		memcpy(&hdr, buf, KCM_U_HDR);
		len = KCM_U_HDR + ntohl(hdr);
		if (len > cap) {
			note_bad("peer (length)", -1);
			*have = 0;
			return;
		}
		if (*have < len)
			return;
		if (kcm_u_msg_check(buf, len) < 0)
			note_bad("peer", -1);
		else
			atomic_fetch_add(&peer_ok, 1);
		memmove(buf, buf + len, *have - len);
		*have -= len;
	}
}

/*
 * A connection's life: attach, write messages (and read what KCM sends
 * it), then end it one of four ways.  A fresh connection each time keeps
 * framing at message boundaries whatever happened to the last one.
 */
static __thread char conn_in[1 << 17];
static __thread char sender_out[70000];

static void *conn_thread(void *arg)
{
	unsigned int seed = (unsigned int)(long)arg;
	char out[4096];

	while (!atomic_load(&stop)) {
		int peer, local, k, n = 1 + rnd(&seed) % 200;
		size_t have = 0;

		if (kcm_u_tcp_pair(&peer, &local))
			continue;
		if (kcm_u_attach(mux_kcm, local, prog)) {
			close(peer);
			close(local);
			continue;
		}
		fcntl(peer, F_SETFL, O_NONBLOCK);
		for (k = 0; k < n && !atomic_load(&stop); k++) {
			size_t len = kcm_u_msg_build(out, 4 + rnd(&seed) % 2000,
						     rnd(&seed) & 0xffffff);

			if (kcm_u_write_all(peer, out, len))
				break;
			drain_peer(peer, conn_in, sizeof(conn_in), &have);
		}
		switch (rnd(&seed) % 4) {
		case 0:
			kcm_u_unattach(mux_kcm, local);
			break;
		case 1: {
			struct linger lg = { 1, 0 };

			setsockopt(peer, SOL_SOCKET, SO_LINGER, &lg,
				   sizeof(lg));
			break;
		}
		default:
			usleep(rnd(&seed) % 5000);
		}
		close(peer);
		kcm_u_unattach(mux_kcm, local);
		close(local);
	}
	return NULL;
}

/* A reader: clones, reads, toggles receiving, changes buffers, closes. */
static void *reader_thread(void *arg)
{
	unsigned int seed = (unsigned int)(long)arg;
	char buf[4096];

	while (!atomic_load(&stop)) {
		int c = kcm_u_clone(mux_kcm), k, val;

		if (c < 0)
			continue;
		for (k = 0; k < 200 && !atomic_load(&stop); k++) {
			ssize_t n = recv(c, buf, sizeof(buf), MSG_DONTWAIT);

			if (n > 0) {
				if (kcm_u_msg_check(buf, n) < 0)
					note_bad("kcm", -1);
				else
					atomic_fetch_add(&rx_ok, 1);
			} else {
				usleep(200);
			}
			switch (rnd(&seed) % 64) {
			case 0:
				val = rnd(&seed) & 1;
				setsockopt(c, SOL_KCM, KCM_RECV_DISABLE, &val,
					   sizeof(val));
				break;
			case 1:
				val = 1024 + rnd(&seed) % 200000;
				setsockopt(c, SOL_SOCKET, SO_RCVBUF, &val,
					   sizeof(val));
				break;
			}
		}
		close(c);
	}
	return NULL;
}

/* A sender: clones, sends messages of random size and kind, closes. */
static void *sender_thread(void *arg)
{
	unsigned int seed = (unsigned int)(long)arg;
	char *out = sender_out;

	while (!atomic_load(&stop)) {
		int c = kcm_u_clone(mux_kcm), k, val = 4096 + rnd(&seed) % 100000;

		if (c < 0)
			continue;
		setsockopt(c, SOL_SOCKET, SO_SNDBUF, &val, sizeof(val));
		kcm_u_set_timeo(c, SO_SNDTIMEO, 500);
		for (k = 0; k < 100 && !atomic_load(&stop); k++) {
			size_t len = kcm_u_msg_build(out, 4 + rnd(&seed) % 60000,
						     rnd(&seed) & 0xffffff);

			if (rnd(&seed) & 1) {
				if (send(c, out, len, MSG_DONTWAIT) > 0)
					atomic_fetch_add(&tx_ok, 1);
				else
					usleep(500);
				continue;
			}
			/* In two pieces; a message left open is dropped. */
			if (send(c, out, 10, MSG_MORE | MSG_DONTWAIT) != 10)
				continue;
			if (send(c, out + 10, len - 10, 0) < 0)
				break;
			atomic_fetch_add(&tx_ok, 1);
		}
		close(c);
	}
	return NULL;
}

/* Whole muxes come and go, with data in flight. */
static void *churn_thread(void *arg)
{
	unsigned int seed = (unsigned int)(long)arg;

	while (!atomic_load(&stop)) {
		int kcm = kcm_socket(rnd(&seed) & 1 ? SOCK_DGRAM :
				     SOCK_SEQPACKET);
		int c = kcm_u_clone(kcm), peer, local;
		char msg[300];
		size_t len = kcm_u_msg_build(msg, 200, 1);

		if (!kcm_u_tcp_pair(&peer, &local) &&
		    !kcm_u_attach(kcm, local, prog)) {
			kcm_send_msgs(peer, 0, 5, 100);
			send(c, msg, len, MSG_DONTWAIT | MSG_EOR);
		}
		if (rnd(&seed) & 1) {
			close(kcm);
			close(c);
		} else {
			close(c);
			close(kcm);
		}
		close(peer);
		close(local);
	}
	return NULL;
}

typedef void *(*thread_fn_t)(void *);

TEST_DIFFERS(stress_chaos,
	     "under load, mis-framed messages reach KCM readers")
{
	const char *env = getenv("KCM_STRESS_SECS");
	int secs = env ? atoi(env) : 15, i;
	static const thread_fn_t kinds[] = {
		conn_thread, conn_thread, conn_thread, reader_thread,
		reader_thread, reader_thread, sender_thread, sender_thread,
		churn_thread,
	};
	pthread_t th[ARRAY_SIZE(kinds)];
	struct kcm_proc p;

	kcm_enter_netns();
	signal(SIGPIPE, SIG_IGN);
	mux_kcm = kcm_socket(SOCK_DGRAM);
	prog = kcm_u_parser_len4();
	ASSERT_GE(mux_kcm, 0);
	ASSERT_GE(prog, 0);
	/* Only the reader threads' clones take messages. */
	i = 1;
	ASSERT_OK(setsockopt(mux_kcm, SOL_KCM, KCM_RECV_DISABLE, &i,
			     sizeof(i)));
	for (i = 0; i < (int)ARRAY_SIZE(kinds); i++)
		ASSERT_OK(-pthread_create(&th[i], NULL, kinds[i],
					  (void *)(long)(i + 1)));
	sleep(secs);
	atomic_store(&stop, 1);
	for (i = 0; i < (int)ARRAY_SIZE(kinds); i++)
		pthread_join(th[i], NULL);
	printf("# stress: %ds: %ld messages read whole from KCM, %ld sent, %ld read by TCP peers\n",
	       secs, atomic_load(&rx_ok), atomic_load(&tx_ok),
	       atomic_load(&peer_ok));
	ASSERT_EQ(atomic_load(&bad), 0);
	ASSERT_GE(atomic_load(&rx_ok), 1);
	ASSERT_GE(atomic_load(&tx_ok), 1);
	close(mux_kcm);
	ASSERT_EQ(kcm_proc_read(&p), 0);
	ASSERT_EQ(p.muxes, 0);
}

/*
 * The books balance: peers send N messages over 3 connections while
 * readers come and go; every message is read exactly once or counted as
 * dropped with the mux.  Then KCM sockets send M messages, and the peers
 * read exactly M, as kcm_stats says.
 */
TEST_DIFFERS(stress_balance,
	     "messages stop arriving (about 1900 of 3000 seen): they straddle segments")
{
	enum { CONNS = 3, N = 3000, M = 600 };
	static unsigned char seen[N];
	int peer[CONNS], local[CONNS], i, got = 0, dup = 0, quiet = 0;
	unsigned int seed = 7;
	struct kcm_stats st;
	char buf[512];

	kcm_enter_netns();
	mux_kcm = kcm_socket(SOCK_DGRAM);
	prog = kcm_u_parser_len4();
	for (i = 0; i < CONNS; i++) {
		ASSERT_OK(kcm_u_tcp_pair(&peer[i], &local[i]));
		ASSERT_OK(kcm_u_attach(mux_kcm, local[i], prog));
		if (!fork())
			_exit(kcm_send_msgs(peer[i], i * (N / CONNS), N / CONNS,
					    40 + i * 10) ? 1 : 0);
	}
	while (quiet < 300) {
		int c = kcm_u_clone(mux_kcm), k, off = rnd(&seed) % 3 == 0;

		ASSERT_GE(c, 0);
		if (off)
			setsockopt(c, SOL_KCM, KCM_RECV_DISABLE, &off,
				   sizeof(off));
		for (k = 0; k < 30; k++) {
			int fd = k & 1 ? c : mux_kcm;
			ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
			long seq;

			if (n < 0) {
				quiet++;
				usleep(2000);
				continue;
			}
			quiet = 0;
			seq = kcm_u_msg_check(buf, n);
			ASSERT_TRUE(seq >= 0 && seq < N);
			dup += seen[seq];
			seen[seq] = 1;
			got++;
		}
		close(c);
	}
	for (i = 0; i < CONNS; i++) {
		int status;

		ASSERT_GE(wait(&status), 0);
		ASSERT_TRUE(WIFEXITED(status) && !WEXITSTATUS(status));
	}
	ASSERT_EQ(dup, 0);
	ASSERT_EQ(kcm_stats_read(&st), 0);
	printf("# balance: %d read, kcm_stats RX-Msgs %llu RX-RdyDrops %llu psock RX-Msgs %llu\n",
	       got, st.mux[KS_RX_MSGS], st.mux[KS_RX_RDY_DROPS],
	       st.psock[KP_RX_MSGS]);
	ASSERT_EQ(st.psock[KP_RX_MSGS], N);
	ASSERT_EQ(st.mux[KS_RX_MSGS], got);
	ASSERT_EQ(got + st.mux[KS_RX_RDY_DROPS], N);
	ASSERT_EQ(got, N);

	/* Transmit: M messages from changing sockets, read by the peers. */
	for (i = 0; i < M; i++) {
		char msg[128];
		size_t len = kcm_u_msg_build(msg, 60, i);
		int c = i % 3 ? kcm_u_clone(mux_kcm) : mux_kcm;

		ASSERT_EQ(send(c, msg, len, 0), len);
		if (c != mux_kcm) {
			/* Close only once its message is out. */
			while (kcm_stats_read(&st) == 0 &&
			       st.mux[KS_TX_MSGS] < (unsigned long long)i + 1)
				usleep(100);
			close(c);
		}
	}
	for (got = 0, quiet = 0; got < M * 64 && quiet < 2500;) {
		ssize_t n = 0;

		for (i = 0; i < CONNS; i++)
			n += max_zero(recv(peer[i], buf, sizeof(buf),
					   MSG_DONTWAIT));
		got += n;
		if (!n) {
			quiet++;
			usleep(2000);
		}
	}
	ASSERT_EQ(kcm_stats_read(&st), 0);
	ASSERT_EQ(st.mux[KS_TX_MSGS], M);
	ASSERT_EQ(st.psock[KP_TX_MSGS], M);
	ASSERT_EQ(got, M * 64);
	close(mux_kcm);
}

KCM_TEST_MAIN
