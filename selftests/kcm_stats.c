// SPDX-License-Identifier: GPL-2.0
/*
 * /proc/net/kcm_stats: every counter against what the test did, in a
 * network namespace of its own, and the totals after the mux is gone.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>

#include "kcm_data.h"

static char buf[1 << 20];

static void stats(struct kcm_stats *st)
{
	ASSERT_EQ(kcm_stats_read(st), 0);
}

/*
 * An upstream header: each name is printed left-aligned in a field of the
 * given width, fields separated by one space, a newline after the last.
 */
static void check_header(const char *line, const char *const *names,
			 const int *widths, int n)
{
	int i, col = 0, len;

	for (i = 0; i < n; i++) {
		len = strlen(names[i]);
		ASSERT_EQ(strncmp(line + col, names[i], len), 0);
		col += (len > widths[i] ? len : widths[i]);
		if (i < n - 1)
			ASSERT_EQ(line[col++], ' ');
	}
	ASSERT_EQ(strcmp(line + col, "\n"), 0);
}

TEST(stats_format)
{
	static const char *const mux[] = {
		"MUX", "RX-Msgs", "RX-Bytes", "TX-Msgs", "TX-Bytes",
		"TX-Retries", "Attach", "Unattach", "UnattchRsvd",
		"RX-RdyDrops",
	};
	static const int mux_w[] = { 8, 10, 16, 10, 16, 10, 10, 10, 10, 10 };
	static const char *const psock[] = {
		"Psock", "RX-Msgs", "RX-Bytes", "TX-Msgs", "TX-Bytes",
		"Reserved", "Unreserved", "RX-Aborts", "RX-Intr",
		"RX-Unrecov", "RX-MemFail", "RX-NeedMor", "RX-BadLen",
		"RX-TooBig", "RX-Timeout", "TX-Aborts",
	};
	static const int psock_w[] = { 8, 10, 16, 10, 16, 10, 10, 10, 10,
				       10, 10, 10, 10, 10, 10, 10 };
	char line[512];
	FILE *f;

	kcm_enter_netns();
	f = fopen("/proc/net/kcm_stats", "r");
	ASSERT_TRUE(f);
	ASSERT_TRUE(fgets(line, sizeof(line), f));
	check_header(line, mux, mux_w, ARRAY_SIZE(mux));
	ASSERT_TRUE(fgets(line, sizeof(line), f));
	ASSERT_EQ(strncmp(line, "         0          0                0", 38), 0);
	ASSERT_TRUE(fgets(line, sizeof(line), f));
	check_header(line, psock, psock_w, ARRAY_SIZE(psock));
	ASSERT_TRUE(fgets(line, sizeof(line), f));
	ASSERT_TRUE(!fgets(line, sizeof(line), f));
	fclose(f);
}

/* Messages both ways, then the mux dies: the totals stay. */
TEST_DIFFERS(stats_messages_survive_the_mux,
	     "MUX RX counters are wrong (RX-Bytes stays 0); teardown unattach is not counted")
{
	int kcm, prog, peer, local, i;
	struct kcm_stats st;
	char msg[64];
	size_t len;

	kcm_enter_netns();
	kcm = kcm_socket(SOCK_DGRAM);
	prog = kcm_u_parser_len4();
	ASSERT_OK(kcm_u_tcp_pair(&peer, &local));
	ASSERT_OK(kcm_u_attach(kcm, local, prog));
	kcm_u_set_timeo(kcm, SO_RCVTIMEO, 5000);
	ASSERT_OK(kcm_send_msgs(peer, 0, 3, 20));
	for (i = 0; i < 3; i++)
		ASSERT_EQ(kcm_recv_check(kcm, buf, 64), i);
	for (i = 0; i < 2; i++) {
		len = kcm_u_msg_build(msg, 36, i);
		ASSERT_EQ(send(kcm, msg, len, 0), len);
		ASSERT_OK(kcm_u_read_full(peer, buf, len));
	}
	stats(&st);
	EXPECT_EQ(st.mux[KS_RX_MSGS], 3);
	EXPECT_EQ(st.mux[KS_RX_BYTES], 3 * 24);
	EXPECT_EQ(st.mux[KS_TX_MSGS], 2);
	EXPECT_EQ(st.mux[KS_TX_BYTES], 2 * 40);
	EXPECT_EQ(st.mux[KS_ATTACH], 1);
	EXPECT_EQ(st.mux[KS_UNATTACH], 0);
	EXPECT_EQ(st.psock[KP_RX_MSGS], 3);
	EXPECT_EQ(st.psock[KP_RX_BYTES], 3 * 24);
	EXPECT_EQ(st.psock[KP_TX_MSGS], 2);
	EXPECT_EQ(st.psock[KP_TX_BYTES], 2 * 40);
	/* The idle socket keeps its psock while nobody else wants one. */
	EXPECT_GE(st.psock[KP_RESERVED], 1);
	EXPECT_EQ(st.psock[KP_RESERVED] - st.psock[KP_UNRESERVED], 1);

	close(kcm);
	stats(&st);
	EXPECT_EQ(st.psock[KP_RESERVED], st.psock[KP_UNRESERVED]);
	EXPECT_EQ(st.mux[KS_RX_MSGS], 3);
	EXPECT_EQ(st.mux[KS_TX_MSGS], 2);
	EXPECT_EQ(st.mux[KS_UNATTACH], 1);
	EXPECT_EQ(st.psock[KP_RX_MSGS], 3);
	EXPECT_EQ(st.psock[KP_TX_BYTES], 2 * 40);
}

/* Each framing error is counted once, under its own name. */
TEST_DIFFERS(stats_framing_errors,
	     "RX-Unrecov stays 0 when framing errors stop a psock")
{
	int kcm, p[4], l[4], rcvbuf = 65536;
	char big[8] = { 0x10, 0, 0, 0 }, hdr[10] = { 0, 0, 0, 100 };
	struct kcm_stats st;

	kcm_enter_netns();
	kcm = kcm_socket(SOCK_DGRAM);
	ASSERT_OK(kcm_u_tcp_pair(&p[0], &l[0]));
	ASSERT_OK(kcm_u_tcp_pair(&p[1], &l[1]));
	ASSERT_OK(kcm_u_tcp_pair(&p[2], &l[2]));
	ASSERT_OK(kcm_u_tcp_pair(&p[3], &l[3]));
	ASSERT_OK(setsockopt(l[0], SOL_SOCKET, SO_RCVBUF, &rcvbuf,
			     sizeof(rcvbuf)));
	kcm_u_set_timeo(l[3], SO_RCVTIMEO, 200);
	ASSERT_OK(kcm_u_attach(kcm, l[0], kcm_u_parser_len4()));
	ASSERT_OK(kcm_u_attach(kcm, l[1], kcm_parser_min_len(8, 2)));
	ASSERT_OK(kcm_u_attach(kcm, l[2], kcm_parser_const(-EBADMSG)));
	ASSERT_OK(kcm_u_attach(kcm, l[3], kcm_u_parser_len4()));

	ASSERT_EQ(write(p[0], big, sizeof(big)), sizeof(big));
	ASSERT_EQ(write(p[1], "abcd", 4), 4);
	usleep(100000);
	ASSERT_EQ(write(p[1], "efgh", 4), 4);
	ASSERT_EQ(write(p[2], "x", 1), 1);
	ASSERT_EQ(write(p[3], hdr, sizeof(hdr)), sizeof(hdr));
	ASSERT_EQ(kcm_wait_so_error(l[0], 5000), EMSGSIZE);
	ASSERT_EQ(kcm_wait_so_error(l[1], 5000), EPROTO);
	ASSERT_EQ(kcm_wait_so_error(l[2], 5000), EBADMSG);
	ASSERT_EQ(kcm_wait_so_error(l[3], 5000), ETIMEDOUT);

	stats(&st);
	EXPECT_EQ(st.psock[KP_RX_TOO_BIG], 1);
	EXPECT_EQ(st.psock[KP_RX_BAD_LEN], 1);
	EXPECT_EQ(st.psock[KP_RX_TIMEOUT], 1);
	EXPECT_EQ(st.psock[KP_RX_UNRECOV], 4);
	EXPECT_EQ(st.psock[KP_RX_NEED_MORE], 1);
	EXPECT_EQ(st.psock[KP_RX_MSGS], 0);
	EXPECT_EQ(st.mux[KS_ATTACH], 4);
	close(kcm);
}

/* A half-assembled message lost to unattach is an abort. */
TEST_DIFFERS(stats_rx_abort,
	     "RX-Aborts always prints 0")
{
	int kcm, peer, local;
	char hdr[10] = { 0, 0, 0, 100 };
	struct kcm_stats st;

	kcm_enter_netns();
	kcm = kcm_socket(SOCK_DGRAM);
	ASSERT_OK(kcm_u_tcp_pair(&peer, &local));
	ASSERT_OK(kcm_u_attach(kcm, local, kcm_u_parser_len4()));
	ASSERT_EQ(write(peer, hdr, sizeof(hdr)), sizeof(hdr));
	usleep(100000);
	ASSERT_OK(kcm_u_unattach(kcm, local));
	stats(&st);
	EXPECT_EQ(st.psock[KP_RX_ABORTS], 1);
	EXPECT_EQ(st.mux[KS_UNATTACH], 1);
	EXPECT_EQ(st.mux[KS_UNATTACH_RSVD], 0);
	close(kcm);
}

/* A reset connection: one retry, one abort. */
TEST_DIFFERS(stats_failover,
	     "TX-Retries always prints 0")
{
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };
	int kcm, pa, la, pb, lb;
	struct kcm_stats st;
	char msg[64];
	size_t len = kcm_u_msg_build(msg, 40, 1);

	signal(SIGPIPE, SIG_IGN);
	kcm_enter_netns();
	kcm = kcm_socket(SOCK_DGRAM);
	ASSERT_OK(kcm_u_tcp_pair(&pa, &la));
	ASSERT_OK(kcm_u_tcp_pair(&pb, &lb));
	ASSERT_OK(kcm_u_attach(kcm, la, kcm_u_parser_len4()));
	ASSERT_OK(kcm_u_attach(kcm, lb, kcm_u_parser_len4()));
	ASSERT_OK(setsockopt(pa, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)));
	close(pa);
	usleep(100000);
	ASSERT_EQ(send(kcm, msg, len, 0), len);
	kcm_u_set_timeo(pb, SO_RCVTIMEO, 5000);
	ASSERT_OK(kcm_u_read_full(pb, buf, len));
	stats(&st);
	EXPECT_EQ(st.mux[KS_TX_RETRIES], 1);
	EXPECT_EQ(st.psock[KP_TX_ABORTS], 1);
	EXPECT_EQ(st.psock[KP_TX_MSGS], 1);
	EXPECT_EQ(st.mux[KS_TX_MSGS], 1);
	close(kcm);
}

/* Unattach of the psock a message is half written to. */
TEST_DIFFERS(stats_unattach_reserved,
	     "Unattach and UnattchRsvd are swapped; TX-Retries prints 0")
{
	int kcm, pa, la, pb, lb, sndbuf = 16384, rcvbuf = 16384;
	size_t len = kcm_u_msg_build(buf, 400000, 2);
	struct kcm_stats st;

	kcm_enter_netns();
	kcm = kcm_socket(SOCK_DGRAM);
	ASSERT_OK(kcm_u_tcp_pair(&pa, &la));
	ASSERT_OK(kcm_u_tcp_pair(&pb, &lb));
	ASSERT_OK(setsockopt(la, SOL_SOCKET, SO_SNDBUF, &sndbuf,
			     sizeof(sndbuf)));
	ASSERT_OK(setsockopt(pa, SOL_SOCKET, SO_RCVBUF, &rcvbuf,
			     sizeof(rcvbuf)));
	ASSERT_OK(kcm_u_attach(kcm, la, kcm_u_parser_len4()));
	ASSERT_OK(kcm_sndbuf_for(kcm, len));
	ASSERT_EQ(send(kcm, buf, len, MSG_DONTWAIT), len);
	usleep(100000);
	ASSERT_OK(kcm_u_attach(kcm, lb, kcm_u_parser_len4()));
	ASSERT_OK(kcm_u_unattach(kcm, la));
	kcm_u_set_timeo(pb, SO_RCVTIMEO, 5000);
	ASSERT_OK(kcm_u_read_full(pb, buf, len));
	stats(&st);
	EXPECT_EQ(st.mux[KS_UNATTACH], 1);
	EXPECT_EQ(st.mux[KS_UNATTACH_RSVD], 1);
	EXPECT_EQ(st.mux[KS_TX_RETRIES], 1);
	EXPECT_EQ(st.psock[KP_TX_ABORTS], 1);
	EXPECT_EQ(st.mux[KS_TX_MSGS], 1);
	close(kcm);
}

/* Messages nobody took when the mux died are ready drops. */
TEST_DIFFERS(stats_ready_drops,
	     "messages held when the mux dies are counted as received, not dropped")
{
	int kcm, peer, local, one = 1;
	struct kcm_stats st;

	kcm_enter_netns();
	kcm = kcm_socket(SOCK_DGRAM);
	ASSERT_OK(kcm_u_tcp_pair(&peer, &local));
	ASSERT_OK(kcm_u_attach(kcm, local, kcm_u_parser_len4()));
	ASSERT_OK(setsockopt(kcm, SOL_KCM, KCM_RECV_DISABLE, &one,
			     sizeof(one)));
	ASSERT_OK(kcm_send_msgs(peer, 0, 2, 10));
	usleep(200000);
	close(kcm);
	stats(&st);
	EXPECT_EQ(st.psock[KP_RX_MSGS], 2);
	EXPECT_EQ(st.mux[KS_RX_MSGS], 0);
	EXPECT_EQ(st.mux[KS_RX_RDY_DROPS], 2);
}

KCM_TEST_MAIN
