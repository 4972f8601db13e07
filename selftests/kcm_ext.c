// SPDX-License-Identifier: GPL-2.0
/*
 * /proc/net/kcm_ext, the extended view (ours, not upstream): every object
 * of live muxes with the TCP endpoints, inode numbers and counters, checked
 * against getsockname()/getpeername()/fstat() of the sockets and against
 * the messages the test moved.  Each test runs in a namespace of its own.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sys/stat.h>

#include "kcm_data.h"

static char buf[1 << 16];

/* A connected TCP pair over ::1: @peer connects, @local is accepted. */
static int tcp_pair6(int *peer, int *local)
{
	struct sockaddr_in6 sin6 = { .sin6_family = AF_INET6,
				     .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	socklen_t len = sizeof(sin6);
	int l;

	kcm_lo_up();
	l = socket(AF_INET6, SOCK_STREAM, 0);
	if (l < 0 || bind(l, (struct sockaddr *)&sin6, len) || listen(l, 4) ||
	    getsockname(l, (struct sockaddr *)&sin6, &len))
		return -1;
	*peer = socket(AF_INET6, SOCK_STREAM, 0);
	if (*peer < 0 || connect(*peer, (struct sockaddr *)&sin6, len))
		return -1;
	*local = accept(l, NULL, NULL);
	close(l);
	return *local < 0 ? -1 : 0;
}

/* "ADDR:PORT" of a socket address, IPv6 in brackets, as kcm_ext prints. */
static void addr_str(const struct sockaddr_storage *ss, char *out, size_t size)
{
	char a[INET6_ADDRSTRLEN];

	if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const void *)ss;

		inet_ntop(AF_INET6, &s6->sin6_addr, a, sizeof(a));
		snprintf(out, size, "[%s]:%u", a, ntohs(s6->sin6_port));
	} else {
		const struct sockaddr_in *s4 = (const void *)ss;

		inet_ntop(AF_INET, &s4->sin_addr, a, sizeof(a));
		snprintf(out, size, "%s:%u", a, ntohs(s4->sin_port));
	}
}

static void ino_str(int fd, char *out, size_t size)
{
	struct stat st;

	ASSERT_OK(fstat(fd, &st));
	snprintf(out, size, "%lu", (unsigned long)st.st_ino);
}

/* The psock line of attached TCP socket @fd; checks its endpoints. */
static void psock_line(int fd, char *line, size_t size)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char ino[32], want[80], got[80];

	ino_str(fd, ino, sizeof(ino));
	ASSERT_OK(kcm_ext_find("psock", "ino", ino, line, size));
	ASSERT_OK(getsockname(fd, (struct sockaddr *)&ss, &len));
	addr_str(&ss, want, sizeof(want));
	ASSERT_OK(kcm_ext_str(line, "local", got, sizeof(got)));
	EXPECT_EQ(strcmp(got, want), 0);
	len = sizeof(ss);
	ASSERT_OK(getpeername(fd, (struct sockaddr *)&ss, &len));
	addr_str(&ss, want, sizeof(want));
	ASSERT_OK(kcm_ext_str(line, "remote", got, sizeof(got)));
	EXPECT_EQ(strcmp(got, want), 0);
	ASSERT_OK(kcm_ext_str(line, "tcp_state", got, sizeof(got)));
	EXPECT_EQ(strcmp(got, "ESTABLISHED"), 0);
}

/* Reads what the peers got without blocking; returns the bytes. */
static long drain(int fd)
{
	long tot = 0;
	ssize_t n;

	while ((n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0)
		tot += n;
	return tot;
}

/*
 * Two KCM sockets, two connections of family @af: 3 + 5 messages in, 4
 * out; every line of the mux against what was done.
 */
static void two_psocks(int af)
{
	int kcm[2], p[2], l[2], prog, i, who, got[2] = { 0, 0 };
	long out[2] = { 0, 0 }, rx_bytes = 3 * 24 + 5 * 34;
	char line[1024], ino[32], msg[64];

	kcm_enter_netns();
	kcm[0] = kcm_socket(SOCK_DGRAM);
	ASSERT_GE(kcm[0], 0);
	kcm[1] = kcm_clone_fd(kcm[0]);
	ASSERT_GE(kcm[1], 0);
	prog = kcm_parser_len4();
	ASSERT_GE(prog, 0);
	for (i = 0; i < 2; i++) {
		if (af == AF_INET6)
			ASSERT_OK(tcp_pair6(&p[i], &l[i]));
		else
			ASSERT_OK(kcm_tcp_pair(&p[i], &l[i]));
		ASSERT_OK(kcm_attach(kcm[0], l[i], prog));
		kcm_set_timeo(kcm[i], SO_RCVTIMEO, 5000);
	}
	ASSERT_OK(kcm_send_msgs(p[0], 0, 3, 20));
	ASSERT_OK(kcm_send_msgs(p[1], 3, 5, 30));
	/* Whoever gets them: 8 messages over the two sockets. */
	for (i = 0; i < 8; i++) {
		struct pollfd pfd[2] = { { .fd = kcm[0], .events = POLLIN },
					 { .fd = kcm[1], .events = POLLIN } };

		ASSERT_GE(poll(pfd, 2, 5000), 1);
		who = (pfd[0].revents & POLLIN) ? 0 : 1;
		ASSERT_GE(kcm_recv_check(kcm[who], buf, sizeof(buf)), 0);
		got[who]++;
	}
	for (i = 0; i < 4; i++) {
		size_t len = kcm_msg_build(msg, 36, i);

		ASSERT_EQ(send(kcm[i & 1], msg, len, 0), len);
	}
	usleep(200000);
	out[0] = drain(p[0]);
	out[1] = drain(p[1]);
	EXPECT_EQ(out[0] + out[1], 4 * 40);

	ASSERT_OK(kcm_ext_find("mux", NULL, NULL, line, sizeof(line)));
	EXPECT_EQ(kcm_ext_num(line, "id"), 1);
	EXPECT_EQ(kcm_ext_num(line, "kcms"), 2);
	EXPECT_EQ(kcm_ext_num(line, "psocks"), 2);
	EXPECT_EQ(kcm_ext_num(line, "attach"), 2);
	EXPECT_EQ(kcm_ext_num(line, "unattach"), 0);
	EXPECT_EQ(kcm_ext_num(line, "rx_msgs"), 8);
	EXPECT_EQ(kcm_ext_num(line, "rx_bytes"), rx_bytes);
	EXPECT_EQ(kcm_ext_num(line, "tx_msgs"), 4);
	EXPECT_EQ(kcm_ext_num(line, "tx_bytes"), 4 * 40);
	EXPECT_EQ(kcm_ext_num(line, "tx_dropped"), 0);
	EXPECT_EQ(kcm_ext_num(line, "tx_retries"), 0);

	for (i = 0; i < 2; i++) {
		ino_str(kcm[i], ino, sizeof(ino));
		ASSERT_OK(kcm_ext_find("kcm", "ino", ino, line, sizeof(line)));
		EXPECT_EQ(kcm_ext_num(line, "mux"), 1);
		EXPECT_EQ(kcm_ext_num(line, "index"), i);
		EXPECT_EQ(kcm_ext_num(line, "rx_msgs"), got[i]);
		EXPECT_EQ(kcm_ext_num(line, "tx_msgs"), 2);
		EXPECT_EQ(kcm_ext_num(line, "tx_bytes"), 2 * 40);
		EXPECT_EQ(kcm_ext_num(line, "recv_q"), 0);
		EXPECT_TRUE(strstr(line, " type=dgram "));
	}
	for (i = 0; i < 2; i++) {
		psock_line(l[i], line, sizeof(line));
		EXPECT_EQ(kcm_ext_num(line, "mux"), 1);
		EXPECT_EQ(kcm_ext_num(line, "index"), i);
		EXPECT_EQ(kcm_ext_num(line, "rx_msgs"), i ? 5 : 3);
		EXPECT_EQ(kcm_ext_num(line, "rx_bytes"), i ? 5 * 34 : 3 * 24);
		EXPECT_EQ(kcm_ext_num(line, "tx_bytes"), out[i]);
		EXPECT_EQ(kcm_ext_num(line, "tx_msgs"), out[i] / 40);
		EXPECT_EQ(kcm_ext_num(line, "rx_stopped"), 0);
		EXPECT_EQ(kcm_ext_num(line, "tx_aborts"), 0);
	}
	close(kcm[1]);
	close(kcm[0]);
	ASSERT_TRUE(kcm_ext_find("mux", NULL, NULL, line, sizeof(line)));
}

TEST_DIFFERS(ext_ipv4_two_psocks, "no /proc/net/kcm_ext: the extended view is ours")
{
	two_psocks(AF_INET);
}

TEST_DIFFERS(ext_ipv6_two_psocks, "no /proc/net/kcm_ext: the extended view is ours")
{
	two_psocks(AF_INET6);
}

/* Messages queued with no connection die with their socket: tx_dropped. */
TEST_DIFFERS(ext_tx_dropped, "no /proc/net/kcm_ext: the extended view is ours")
{
	char line[1024], msg[64];
	size_t len = kcm_msg_build(msg, 20, 7);
	int kcm, clone, i;

	kcm_enter_netns();
	kcm = kcm_socket(SOCK_DGRAM);
	ASSERT_GE(kcm, 0);
	clone = kcm_clone_fd(kcm);
	ASSERT_GE(clone, 0);
	for (i = 0; i < 3; i++)
		ASSERT_EQ(send(clone, msg, len, MSG_DONTWAIT), len);
	ASSERT_OK(kcm_ext_find("kcm", "index", "1", line, sizeof(line)));
	EXPECT_EQ(kcm_ext_num(line, "send_q"), 3);
	EXPECT_TRUE(strstr(line, " psock=- "));
	close(clone);
	ASSERT_OK(kcm_ext_find("mux", NULL, NULL, line, sizeof(line)));
	EXPECT_EQ(kcm_ext_num(line, "tx_dropped"), 3);
	EXPECT_EQ(kcm_ext_num(line, "kcms"), 1);
	EXPECT_EQ(kcm_ext_num(line, "tx_msgs"), 0);
	close(kcm);
}

/* Unattach takes the psock line away and is counted on the mux line. */
TEST_DIFFERS(ext_unattach, "no /proc/net/kcm_ext: the extended view is ours")
{
	int kcm, peer, local, p2, l2;
	char line[1024], ino[32];

	kcm_enter_netns();
	kcm = kcm_with_tcp(SOCK_SEQPACKET, &peer, &local);
	ASSERT_OK(kcm_tcp_pair(&p2, &l2));
	ASSERT_OK(kcm_attach(kcm, l2, kcm_parser_len4()));
	ASSERT_OK(kcm_unattach(kcm, local));
	ino_str(local, ino, sizeof(ino));
	EXPECT_TRUE(kcm_ext_find("psock", "ino", ino, line, sizeof(line)));
	psock_line(l2, line, sizeof(line));
	EXPECT_EQ(kcm_ext_num(line, "index"), 1);
	ASSERT_OK(kcm_ext_find("mux", NULL, NULL, line, sizeof(line)));
	EXPECT_EQ(kcm_ext_num(line, "psocks"), 1);
	EXPECT_EQ(kcm_ext_num(line, "attach"), 2);
	EXPECT_EQ(kcm_ext_num(line, "unattach"), 1);
	ASSERT_OK(kcm_ext_find("kcm", NULL, NULL, line, sizeof(line)));
	EXPECT_TRUE(strstr(line, " type=seqpacket "));
	close(kcm);
}

/* Each namespace sees its own muxes, numbered from 1. */
TEST_DIFFERS(ext_per_netns, "no /proc/net/kcm_ext: the extended view is ours")
{
	char line[1024];
	int kcm, kcm2;

	kcm_enter_netns();
	kcm = kcm_socket(SOCK_DGRAM);
	kcm2 = kcm_socket(SOCK_DGRAM);
	ASSERT_GE(kcm2, 0);
	ASSERT_OK(kcm_ext_find("mux", "id", "2", line, sizeof(line)));
	kcm_enter_netns();
	EXPECT_TRUE(kcm_ext_find("mux", NULL, NULL, line, sizeof(line)));
	close(kcm);
	kcm = kcm_socket(SOCK_DGRAM);
	ASSERT_OK(kcm_ext_find("mux", NULL, NULL, line, sizeof(line)));
	EXPECT_EQ(kcm_ext_num(line, "id"), 1);
	EXPECT_EQ(kcm_ext_num(line, "kcms"), 1);
	EXPECT_EQ(kcm_ext_num(line, "psocks"), 0);
	ASSERT_OK(kcm_ext_find("kcm", "mux", "1", line, sizeof(line)));
	EXPECT_EQ(kcm_ext_num(line, "index"), 0);
	close(kcm);
	close(kcm2);
}

KCM_TEST_MAIN
