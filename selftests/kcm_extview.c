// SPDX-License-Identifier: GPL-2.0
/*
 * /proc/net/kcm_ext, the extended view (ours, not upstream): every object
 * of live muxes with the TCP endpoints, inode numbers and counters, checked
 * against getsockname()/getpeername()/fstat() of the sockets and against
 * the messages the test moved; then tools/kcmstat (staged as ../kcmstat,
 * or $KCMSTAT) on the same kind of live mux: its JSON, its table, its
 * rates in both, the namespace totals of /proc/net/kcm_stats in both, and
 * its -n.  Each test runs in a namespace of its own.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <math.h>
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

	kcm_u_lo_up();
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

/* A mux with two KCM sockets and two connections, and what went over it. */
struct mux2 {
	int kcm[2], p[2], l[2];
	int got[2];		/* messages each KCM socket received */
	long out[2];		/* bytes each peer received */
};

#define MUX2_RX_BYTES	(3 * 24 + 5 * 34)

/* Sets up @m over family @af: 3 + 5 messages in, 2 + 2 out. */
static void mux2_run(struct mux2 *m, int af)
{
	int prog, i, who;

	memset(m, 0, sizeof(*m));
	m->kcm[0] = kcm_socket(SOCK_DGRAM);
	ASSERT_GE(m->kcm[0], 0);
	m->kcm[1] = kcm_u_clone(m->kcm[0]);
	ASSERT_GE(m->kcm[1], 0);
	prog = kcm_u_parser_len4();
	ASSERT_GE(prog, 0);
	for (i = 0; i < 2; i++) {
		if (af == AF_INET6)
			ASSERT_OK(tcp_pair6(&m->p[i], &m->l[i]));
		else
			ASSERT_OK(kcm_u_tcp_pair(&m->p[i], &m->l[i]));
		ASSERT_OK(kcm_u_attach(m->kcm[0], m->l[i], prog));
	}
	close(prog);
	ASSERT_OK(kcm_send_msgs(m->p[0], 0, 3, 20));
	ASSERT_OK(kcm_send_msgs(m->p[1], 3, 5, 30));
	/* Whoever gets them: 8 messages over the two sockets. */
	for (i = 0; i < 8; i++) {
		struct pollfd pfd[2] = { { .fd = m->kcm[0], .events = POLLIN },
					 { .fd = m->kcm[1], .events = POLLIN } };

		ASSERT_GE(poll(pfd, 2, 5000), 1);
		who = (pfd[0].revents & POLLIN) ? 0 : 1;
		ASSERT_GE(kcm_recv_check(m->kcm[who], buf, sizeof(buf)), 0);
		m->got[who]++;
	}
	for (i = 0; i < 4; i++) {
		char msg[64];
		size_t len = kcm_u_msg_build(msg, 36, i);

		ASSERT_EQ(send(m->kcm[i & 1], msg, len, 0), len);
	}
	usleep(200000);
	m->out[0] = drain(m->p[0]);
	m->out[1] = drain(m->p[1]);
	ASSERT_EQ(m->out[0] + m->out[1], 4 * 40);
}

/* Every line of the mux of two_psocks() against what was done. */
static void two_psocks(int af)
{
	char line[1024], ino[32];
	struct mux2 m;
	int i;

	kcm_enter_netns();
	mux2_run(&m, af);
	ASSERT_OK(kcm_ext_find("mux", NULL, NULL, line, sizeof(line)));
	EXPECT_EQ(kcm_ext_num(line, "id"), 1);
	EXPECT_EQ(kcm_ext_num(line, "kcms"), 2);
	EXPECT_EQ(kcm_ext_num(line, "psocks"), 2);
	EXPECT_EQ(kcm_ext_num(line, "attach"), 2);
	EXPECT_EQ(kcm_ext_num(line, "unattach"), 0);
	EXPECT_EQ(kcm_ext_num(line, "rx_msgs"), 8);
	EXPECT_EQ(kcm_ext_num(line, "rx_bytes"), MUX2_RX_BYTES);
	EXPECT_EQ(kcm_ext_num(line, "tx_msgs"), 4);
	EXPECT_EQ(kcm_ext_num(line, "tx_bytes"), 4 * 40);
	EXPECT_EQ(kcm_ext_num(line, "tx_dropped"), 0);
	EXPECT_EQ(kcm_ext_num(line, "tx_retries"), 0);

	for (i = 0; i < 2; i++) {
		ino_str(m.kcm[i], ino, sizeof(ino));
		ASSERT_OK(kcm_ext_find("kcm", "ino", ino, line, sizeof(line)));
		EXPECT_EQ(kcm_ext_num(line, "mux"), 1);
		EXPECT_EQ(kcm_ext_num(line, "index"), i);
		EXPECT_EQ(kcm_ext_num(line, "rx_msgs"), m.got[i]);
		EXPECT_EQ(kcm_ext_num(line, "tx_msgs"), 2);
		EXPECT_EQ(kcm_ext_num(line, "tx_bytes"), 2 * 40);
		EXPECT_EQ(kcm_ext_num(line, "recv_q"), 0);
		EXPECT_TRUE(strstr(line, " type=dgram "));
	}
	for (i = 0; i < 2; i++) {
		psock_line(m.l[i], line, sizeof(line));
		EXPECT_EQ(kcm_ext_num(line, "mux"), 1);
		EXPECT_EQ(kcm_ext_num(line, "index"), i);
		EXPECT_EQ(kcm_ext_num(line, "rx_msgs"), i ? 5 : 3);
		EXPECT_EQ(kcm_ext_num(line, "rx_bytes"), i ? 5 * 34 : 3 * 24);
		EXPECT_EQ(kcm_ext_num(line, "tx_bytes"), m.out[i]);
		EXPECT_EQ(kcm_ext_num(line, "tx_msgs"), m.out[i] / 40);
		EXPECT_EQ(kcm_ext_num(line, "rx_stopped"), 0);
		EXPECT_EQ(kcm_ext_num(line, "tx_aborts"), 0);
	}
	close(m.kcm[1]);
	close(m.kcm[0]);
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
	size_t len = kcm_u_msg_build(msg, 20, 7);
	int kcm, clone, i;

	kcm_enter_netns();
	kcm = kcm_socket(SOCK_DGRAM);
	ASSERT_GE(kcm, 0);
	clone = kcm_u_clone(kcm);
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

/*
 * A full socket leaves the receive rotation and rejoins only once its
 * reader has drained half of its buffer: reads above that leave the
 * messages held on the mux where they are; the read that crosses it
 * pulls a run of them.  Every message still arrives, in order.  The
 * messages are sent one write each, so that each is framed alone (one
 * skb each, not a pack) and the buffer fills message by message.
 */
TEST_DIFFERS(ext_rejoin_half_drained,
	     "no /proc/net/kcm_ext: the extended view is ours")
{
	enum { N = 40 };
	long long rmem, per_msg, q, held, held0;
	int kcm, peer, local, rcvbuf = 4096, i = 0, quiet = 0;
	char line[1024], buf[256];

	kcm_enter_netns();
	kcm = kcm_with_tcp(SOCK_DGRAM, &peer, &local);
	ASSERT_OK(setsockopt(kcm, SOL_SOCKET, SO_RCVBUF, &rcvbuf,
			     sizeof(rcvbuf)));
	rcvbuf = kcm_u_getsockopt_int(kcm, SOL_SOCKET, SO_RCVBUF);
	for (i = 0; i < N; i++) {
		ASSERT_OK(kcm_send_msgs(peer, i, 1, 60));
		usleep(2000);
	}
	i = 0;
	usleep(300000);
	ASSERT_OK(kcm_ext_find("mux", NULL, NULL, line, sizeof(line)));
	held0 = kcm_ext_num(line, "rx_hold");
	ASSERT_GT(held0, 0);

	for (;;) {
		ASSERT_OK(kcm_ext_find("kcm", NULL, NULL, line, sizeof(line)));
		rmem = kcm_ext_num(line, "rmem");
		q = kcm_ext_num(line, "recv_q");
		ASSERT_GT(q, 0);
		per_msg = rmem / q;
		ASSERT_EQ(kcm_recv_check(kcm, buf, sizeof(buf)), i);
		i++;
		ASSERT_OK(kcm_ext_find("mux", NULL, NULL, line, sizeof(line)));
		held = kcm_ext_num(line, "rx_hold");
		if (rmem - per_msg > rcvbuf / 2) {
			/* Still more than half full: nothing moved. */
			ASSERT_EQ(held, held0);
			quiet++;
			continue;
		}
		ASSERT_LT(held, held0);
		break;
	}
	TH_LOG("%d reads left %lld held messages alone, the next took %lld",
	       quiet, held0, held0 - held);
	ASSERT_GT(quiet, 0);
	for (; i < N; i++)
		ASSERT_EQ(kcm_recv_check(kcm, buf, sizeof(buf)), i);
	close(kcm);
}

/*
 * Messages queued on the (only) KCM socket, in *@q, and the receive
 * memory charged per message, in *@each.  Returns 0, or -1 when the
 * socket's line is missing or nothing is queued.
 */
static int queued_cost(long long *q, long long *each)
{
	char line[1024];

	if (kcm_ext_find("kcm", NULL, NULL, line, sizeof(line)))
		return -1;
	*q = kcm_ext_num(line, "recv_q");
	if (*q <= 0)
		return -1;
	*each = kcm_ext_num(line, "rmem") / *q;
	return 0;
}

/*
 * Memory charged per queued 64-byte message, read from rmem and recv_q:
 * at most 1 KB for a message framed alone, far less for messages that
 * arrive together and are queued as packs.  Every message still arrives.
 */
TEST_DIFFERS(ext_memory_per_message,
	     "no /proc/net/kcm_ext: the extended view is ours")
{
	enum { ALONE = 20, BURST = 200 };
	long long q, each;
	int kcm, peer, local, i;
	char buf[256];

	kcm_enter_netns();
	kcm = kcm_with_tcp(SOCK_DGRAM, &peer, &local);
	for (i = 0; i < ALONE; i++) {
		ASSERT_OK(kcm_send_msgs(peer, i, 1, 60));
		usleep(2000);
	}
	usleep(200000);
	ASSERT_OK(queued_cost(&q, &each));
	TH_LOG("alone: %lld messages queued, %lld bytes each", q, each);
	ASSERT_EQ(q, ALONE);
	ASSERT_LE(each, 1024);
	for (i = 0; i < ALONE; i++)
		ASSERT_EQ(kcm_recv_check(kcm, buf, sizeof(buf)), i);

	ASSERT_OK(kcm_send_msgs(peer, ALONE, BURST, 60));
	usleep(300000);
	ASSERT_OK(queued_cost(&q, &each));
	TH_LOG("burst: %lld messages queued, %lld bytes each", q, each);
	ASSERT_EQ(q, BURST);
	ASSERT_LE(each, 256);
	for (i = 0; i < BURST; i++)
		ASSERT_EQ(kcm_recv_check(kcm, buf, sizeof(buf)), ALONE + i);
	close(kcm);
}

/* Unattach takes the psock line away and is counted on the mux line. */
TEST_DIFFERS(ext_unattach, "no /proc/net/kcm_ext: the extended view is ours")
{
	int kcm, peer, local, p2, l2;
	char line[1024], ino[32];

	kcm_enter_netns();
	kcm = kcm_with_tcp(SOCK_SEQPACKET, &peer, &local);
	ASSERT_OK(kcm_u_tcp_pair(&p2, &l2));
	ASSERT_OK(kcm_u_attach(kcm, l2, kcm_u_parser_len4()));
	ASSERT_OK(kcm_u_unattach(kcm, local));
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

/* ---- tools/kcmstat against live muxes ---- */

static char out[1 << 16];

/* Runs kcmstat with @args, its output to out[]; returns its exit status. */
static int kcmstat(const char *args)
{
	return kcm_cmd(out, sizeof(out), "%s %s", kcm_kcmstat_bin(), args);
}

/*
 * Copies to @obj the JSON object of @json that contains @anchor (the
 * innermost one around its first occurrence).  Returns 0 or -1.
 */
static int json_obj(const char *json, const char *anchor, char *obj,
		    size_t size)
{
	const char *a = strstr(json, anchor), *b, *e;
	int depth = 0;

	if (!a)
		return -1;
	for (b = a; b > json; b--) {
		if (*b == '}' && b != a)
			depth++;
		else if (*b == '{' && depth-- == 0)
			break;
	}
	for (e = b, depth = 0; *e; e++) {
		if (*e == '{')
			depth++;
		else if (*e == '}' && --depth == 0)
			break;
	}
	if (*b != '{' || !*e || (size_t)(e - b + 1) >= size)
		return -1;
	memcpy(obj, b, e - b + 1);
	obj[e - b + 1] = 0;
	return 0;
}

/* The first "key":number in @obj, or -1. */
static double json_num(const char *obj, const char *key)
{
	char want[64];
	const char *p;

	snprintf(want, sizeof(want), "\"%s\":", key);
	p = strstr(obj, want);
	return p ? strtod(p + strlen(want), NULL) : -1;
}

/* Whether @obj has "key":"val". */
static int json_has(const char *obj, const char *key, const char *val)
{
	char want[128];

	snprintf(want, sizeof(want), "\"%s\":\"%s\"", key, val);
	return !!strstr(obj, want);
}

static void sock_addr(int fd, int peer, char *s, size_t size)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (peer)
		ASSERT_OK(getpeername(fd, (struct sockaddr *)&ss, &len));
	else
		ASSERT_OK(getsockname(fd, (struct sockaddr *)&ss, &len));
	addr_str(&ss, s, size);
}

/* The JSON object of the socket @fd (by inode number). */
static void json_of_fd(int fd, char *obj, size_t size)
{
	char ino[32], anchor[48];

	ino_str(fd, ino, sizeof(ino));
	snprintf(anchor, sizeof(anchor), "\"ino\":%s,", ino);
	ASSERT_OK(json_obj(out, anchor, obj, size));
}

/* The totals object @kind ("mux", "psock") of kcmstat -j's out[]. */
static void json_totals(const char *kind, char *obj, size_t size)
{
	const char *t = strstr(out, "\"totals\":{");
	char anchor[32];

	ASSERT_TRUE(t);
	t += strlen("\"totals\":");
	snprintf(anchor, sizeof(anchor), "\"%s\":{", kind);
	t = strstr(t, anchor);
	ASSERT_TRUE(t);
	t += strlen(anchor) - 1;
	ASSERT_OK(json_obj(t, "\"", obj, size));
}

/* Checks kcmstat -j's view of the mux of mux2_run(). */
static void check_json_mux2(const struct mux2 *m)
{
	char obj[8192], a[80];
	int i;

	ASSERT_OK(json_obj(out, "{\"id\":1,", obj, sizeof(obj)));
	EXPECT_EQ(json_num(obj, "kcms"), 2);
	EXPECT_EQ(json_num(obj, "psocks"), 2);
	EXPECT_EQ(json_num(obj, "rx_msgs"), 8);
	EXPECT_EQ(json_num(obj, "rx_bytes"), MUX2_RX_BYTES);
	EXPECT_EQ(json_num(obj, "tx_msgs"), 4);
	EXPECT_EQ(json_num(obj, "tx_bytes"), 4 * 40);
	EXPECT_EQ(json_num(obj, "tx_dropped"), 0);
	for (i = 0; i < 2; i++) {
		json_of_fd(m->kcm[i], obj, sizeof(obj));
		EXPECT_EQ(json_num(obj, "index"), i);
		EXPECT_EQ(json_num(obj, "rx_msgs"), m->got[i]);
		EXPECT_EQ(json_num(obj, "tx_bytes"), 2 * 40);
		EXPECT_TRUE(json_has(obj, "type", "dgram"));
		json_of_fd(m->l[i], obj, sizeof(obj));
		EXPECT_EQ(json_num(obj, "index"), i);
		sock_addr(m->l[i], 0, a, sizeof(a));
		EXPECT_TRUE(json_has(obj, "local", a));
		sock_addr(m->l[i], 1, a, sizeof(a));
		EXPECT_TRUE(json_has(obj, "remote", a));
		EXPECT_TRUE(json_has(obj, "tcp_state", "ESTABLISHED"));
		EXPECT_EQ(json_num(obj, "rx_msgs"), i ? 5 : 3);
		EXPECT_EQ(json_num(obj, "tx_bytes"), m->out[i]);
	}
}

TEST_DIFFERS(kcmstat_json, "no /proc/net/kcm_ext: the extended view is ours")
{
	struct mux2 m;

	kcm_enter_netns();
	mux2_run(&m, AF_INET);
	ASSERT_EQ(kcmstat("-j"), 0);
	check_json_mux2(&m);
	close(m.kcm[0]);
	close(m.kcm[1]);
	ASSERT_EQ(kcmstat("-j"), 0);
	EXPECT_TRUE(strstr(out, "\"muxes\":[]"));
}

TEST_DIFFERS(kcmstat_table_ipv6, "no /proc/net/kcm_ext: the extended view is ours")
{
	char a[80], line[512], *p;
	struct mux2 m;
	int i;

	kcm_enter_netns();
	mux2_run(&m, AF_INET6);
	ASSERT_EQ(kcmstat(""), 0);
	EXPECT_TRUE(strstr(out, "mux 1: 2 KCM sockets, 2 connections; rx 8 msgs"));
	for (i = 0; i < 2; i++) {
		sock_addr(m.l[i], 0, a, sizeof(a));
		p = strstr(out, a);
		ASSERT_TRUE(p);
		snprintf(line, sizeof(line), "%.*s", (int)(strchrnul(p, '\n') - p), p);
		sock_addr(m.l[i], 1, a, sizeof(a));
		EXPECT_TRUE(strstr(line, a));
		EXPECT_TRUE(strstr(line, "ESTABLISHED"));
	}
}

/* Receives @n messages on either KCM socket of @m. */
static void recv_any(struct mux2 *m, int n)
{
	int i;

	for (i = 0; i < n; i++) {
		struct pollfd pfd[2] = { { .fd = m->kcm[0], .events = POLLIN },
					 { .fd = m->kcm[1], .events = POLLIN } };

		ASSERT_GE(poll(pfd, 2, 5000), 1);
		ASSERT_GE(kcm_recv_check(m->kcm[(pfd[0].revents & POLLIN) ? 0 : 1],
					 buf, sizeof(buf)), 0);
	}
}

/* Rate * interval, the messages or bytes moved in the interval. */
static long moved(const char *obj, const char *key)
{
	char want[64], rates[512];
	const char *r = strstr(obj, "\"rates\":{");

	snprintf(want, sizeof(want), "%s_per_s", key);
	if (!r || json_obj(r, "\"rx_msgs_per_s\"", rates, sizeof(rates)))
		return -1;
	return lround(json_num(rates, want) * json_num(out, "interval_s"));
}

/*
 * kcmstat -i 2 -c 2: nothing moves in the first interval; right after
 * its report, 50 messages of 104 bytes come in on connection 0 and 10 of
 * 40 go out, all inside the second interval.
 */
TEST_DIFFERS(kcmstat_rates, "no /proc/net/kcm_ext: the extended view is ours")
{
	const char *bin = kcm_kcmstat_bin();
	char cmd[256], obj[8192], msg[64];
	struct mux2 m;
	FILE *f;
	int i;

	kcm_enter_netns();
	mux2_run(&m, AF_INET);
	snprintf(cmd, sizeof(cmd), "%s -j -i 2 -c 2", bin);
	f = popen(cmd, "r");
	ASSERT_TRUE(f);
	ASSERT_TRUE(fgets(out, sizeof(out), f));
	ASSERT_OK(json_obj(out, "{\"id\":1,", obj, sizeof(obj)));
	EXPECT_EQ(moved(obj, "rx_msgs"), 0);
	EXPECT_EQ(moved(obj, "tx_bytes"), 0);

	ASSERT_OK(kcm_send_msgs(m.p[0], 100, 50, 100));
	recv_any(&m, 50);
	for (i = 0; i < 10; i++) {
		size_t len = kcm_u_msg_build(msg, 36, i);

		ASSERT_EQ(send(m.kcm[0], msg, len, 0), len);
	}
	usleep(100000);
	EXPECT_EQ(drain(m.p[0]) + drain(m.p[1]), 10 * 40);

	ASSERT_TRUE(fgets(out, sizeof(out), f));
	EXPECT_EQ(WEXITSTATUS(pclose(f)), 0);
	EXPECT_GE(json_num(out, "interval_s"), 1.9);
	ASSERT_OK(json_obj(out, "{\"id\":1,", obj, sizeof(obj)));
	EXPECT_EQ(moved(obj, "rx_msgs"), 50);
	EXPECT_EQ(moved(obj, "rx_bytes"), 50 * 104);
	EXPECT_EQ(moved(obj, "tx_msgs"), 10);
	EXPECT_EQ(moved(obj, "tx_bytes"), 10 * 40);
	json_of_fd(m.l[0], obj, sizeof(obj));
	EXPECT_EQ(moved(obj, "rx_msgs"), 50);
	EXPECT_EQ(moved(obj, "rx_bytes"), 50 * 104);
	json_of_fd(m.l[1], obj, sizeof(obj));
	EXPECT_EQ(moved(obj, "rx_msgs"), 0);
	json_totals("mux", obj, sizeof(obj));
	EXPECT_EQ(moved(obj, "rx_msgs"), 50);
	EXPECT_EQ(moved(obj, "rx_bytes"), 50 * 104);
	EXPECT_EQ(moved(obj, "tx_msgs"), 10);
	EXPECT_EQ(moved(obj, "tx_bytes"), 10 * 40);
	json_totals("psock", obj, sizeof(obj));
	EXPECT_EQ(moved(obj, "rx_msgs"), 50);
	EXPECT_EQ(moved(obj, "tx_bytes"), 10 * 40);
}

/* The @n-th word (from 0) of the line at @line, in @w; 0 or -1. */
static int word_at(const char *line, int n, char *w, size_t size)
{
	const char *p = line, *e;

	for (;;) {
		while (*p == ' ')
			p++;
		if (!*p || *p == '\n')
			return -1;
		e = p + strcspn(p, "\n ");
		if (!n--) {
			snprintf(w, size, "%.*s", (int)(e - p), p);
			return 0;
		}
		p = e;
	}
}

/*
 * A cell of a kcmstat table in @text: the column @col of the header line
 * whose first word is @head, in the row whose first word is @row below
 * it, or (@row NULL, the totals) in the line right below it, which has no
 * first word of its own.  Returns its number, or -1 if there is none.
 */
static double table_cell(const char *text, const char *head, const char *row,
			 const char *col)
{
	const char *l = text;
	char w[64];
	int i, idx = -1;

	for (; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
		if (!word_at(l, 0, w, sizeof(w)) && !strcmp(w, head))
			break;
	if (!l || !*l)
		return -1;
	for (i = 1; !word_at(l, i, w, sizeof(w)); i++)
		if (!strcmp(w, col))
			idx = i;
	if (idx < 0 || !strchr(l, '\n'))
		return -1;
	l = strchr(l, '\n') + 1;
	if (!row) {
		if (word_at(l, idx - 1, w, sizeof(w)))
			return -1;
		return strtod(w, NULL);
	}
	for (; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
		if (!word_at(l, 0, w, sizeof(w)) && !strcmp(w, row))
			break;
	if (!l || !*l || word_at(l, idx, w, sizeof(w)))
		return -1;
	return strtod(w, NULL);
}

/*
 * The namespace totals (/proc/net/kcm_stats) in kcmstat's JSON and table,
 * against a known burst: mux2_run()'s 8 messages in and 4 out, then a
 * second mux with 2 in that is destroyed; the totals keep it, and keep
 * everything once the first mux is gone too.
 */
TEST_DIFFERS(kcmstat_totals, "no /proc/net/kcm_ext: the extended view is ours")
{
	int kcm, peer, local, pass;
	char obj[4096];
	struct mux2 m;

	kcm_enter_netns();
	ASSERT_EQ(kcmstat("-j"), 0);
	json_totals("mux", obj, sizeof(obj));
	EXPECT_EQ(json_num(obj, "rx_msgs"), 0);
	EXPECT_EQ(json_num(obj, "attach"), 0);

	mux2_run(&m, AF_INET);
	kcm = kcm_with_tcp(SOCK_DGRAM, &peer, &local);
	ASSERT_GE(kcm, 0);
	ASSERT_OK(kcm_send_msgs(peer, 0, 2, 20));
	ASSERT_GE(kcm_recv_check(kcm, buf, sizeof(buf)), 0);
	ASSERT_GE(kcm_recv_check(kcm, buf, sizeof(buf)), 0);
	close(kcm);
	close(local);

	for (pass = 0; pass < 2; pass++) {
		if (pass) {
			close(m.kcm[0]);
			close(m.kcm[1]);
		}
		ASSERT_EQ(kcmstat("-j"), 0);
		EXPECT_EQ(!!strstr(out, "\"muxes\":[]"), pass);
		json_totals("mux", obj, sizeof(obj));
		EXPECT_EQ(json_num(obj, "rx_msgs"), 10);
		EXPECT_EQ(json_num(obj, "rx_bytes"), MUX2_RX_BYTES + 2 * 24);
		EXPECT_EQ(json_num(obj, "tx_msgs"), 4);
		EXPECT_EQ(json_num(obj, "tx_bytes"), 4 * 40);
		EXPECT_EQ(json_num(obj, "tx_retries"), 0);
		EXPECT_EQ(json_num(obj, "attach"), 3);
		EXPECT_EQ(json_num(obj, "unattach"), pass ? 3 : 1);
		EXPECT_EQ(json_num(obj, "rx_ready_drops"), 0);
		json_totals("psock", obj, sizeof(obj));
		EXPECT_EQ(json_num(obj, "rx_msgs"), 10);
		EXPECT_EQ(json_num(obj, "rx_bytes"), MUX2_RX_BYTES + 2 * 24);
		EXPECT_EQ(json_num(obj, "tx_msgs"), 4);
		EXPECT_EQ(json_num(obj, "tx_bytes"), 4 * 40);
		EXPECT_EQ(json_num(obj, "rx_bad_len"), 0);
		EXPECT_EQ(json_num(obj, "rx_timeouts"), 0);
		EXPECT_EQ(json_num(obj, "tx_aborts"), 0);

		ASSERT_EQ(kcmstat(""), 0);
		EXPECT_EQ(!!strstr(out, "no KCM multiplexors\n"), pass);
		EXPECT_TRUE(strstr(out, "\nnamespace totals (/proc/net/kcm_stats"));
		EXPECT_EQ(table_cell(out, "MUX", NULL, "RX-Msgs"), 10);
		EXPECT_EQ(table_cell(out, "MUX", NULL, "RX-Bytes"),
			  MUX2_RX_BYTES + 2 * 24);
		EXPECT_EQ(table_cell(out, "MUX", NULL, "TX-Bytes"), 4 * 40);
		EXPECT_EQ(table_cell(out, "MUX", NULL, "Attach"), 3);
		EXPECT_EQ(table_cell(out, "MUX", NULL, "Unattach"), pass ? 3 : 1);
		EXPECT_EQ(table_cell(out, "MUX", NULL, "RX-RdyDrops"), 0);
		EXPECT_EQ(table_cell(out, "Psock", NULL, "RX-Msgs"), 10);
		EXPECT_EQ(table_cell(out, "Psock", NULL, "TX-Msgs"), 4);
		EXPECT_EQ(table_cell(out, "Psock", NULL, "TX-Aborts"), 0);
	}
}

/*
 * Messages or bytes moved in a table report's interval: the rate column
 * @col of a cell (see table_cell()) times the interval of "-- SECS s --".
 * Rates have one decimal and the interval three, so bytes come out within
 * a few of the truth and messages exact once rounded.
 */
static long table_moved(const char *report, const char *head, const char *row,
			const char *col)
{
	const char *t = strstr(report, "-- ");
	double rate = table_cell(report, head, row, col);

	if (!t || rate < 0)
		return -1;
	return lround(rate * strtod(t + 3, NULL));
}

/*
 * The table form of kcmstat -i 2 -c 2, as kcmstat_rates for the JSON:
 * nothing moves in the first interval; in the second, 50 messages of 104
 * bytes in on connection 0 and 10 of 40 out, per mux, KCM socket,
 * connection and in the namespace totals.
 */
TEST_DIFFERS(kcmstat_rates_table, "no /proc/net/kcm_ext: the extended view is ours")
{
	const char *bin = kcm_kcmstat_bin();
	char cmd[256], msg[64], *second;
	int i, got, lines = -1;
	size_t n = 0, len;
	const char *u;
	double secs, r[4];
	struct mux2 m;
	FILE *f;

	kcm_enter_netns();
	mux2_run(&m, AF_INET);
	snprintf(cmd, sizeof(cmd), "%s -i 2 -c 2", bin);
	f = popen(cmd, "r");
	ASSERT_TRUE(f);
	/* The first report ends with the line after the Psock totals' header. */
	while (lines && fgets(out + n, sizeof(out) - n, f)) {
		if (!strncmp(out + n, "  Psock ", 8))
			lines = 1;
		else if (lines > 0)
			lines--;
		n += strlen(out + n);
	}
	ASSERT_EQ(lines, 0);
	EXPECT_TRUE(strstr(out, "rx-msg/s"));
	EXPECT_EQ(table_moved(out, "PSOCK", "psock-0", "rx-msg/s"), 0);
	EXPECT_EQ(table_moved(out, "KCM", "kcm-0", "tx-B/s"), 0);
	EXPECT_EQ(table_moved(out, "MUX", NULL, "rx-msg/s"), 0);
	EXPECT_EQ(table_moved(out, "Psock", NULL, "tx-B/s"), 0);

	ASSERT_OK(kcm_send_msgs(m.p[0], 100, 50, 100));
	recv_any(&m, 50);
	for (i = 0; i < 10; i++) {
		len = kcm_u_msg_build(msg, 36, i);
		ASSERT_EQ(send(m.kcm[0], msg, len, 0), len);
	}
	usleep(100000);
	EXPECT_EQ(drain(m.p[0]) + drain(m.p[1]), 10 * 40);

	second = out + n;
	n += fread(out + n, 1, sizeof(out) - 1 - n, f);
	out[n] = 0;
	EXPECT_EQ(WEXITSTATUS(pclose(f)), 0);
	ASSERT_TRUE(strstr(second, "-- "));
	secs = strtod(strstr(second, "-- ") + 3, NULL);
	EXPECT_GE(secs, 1.9);
	/* The mux line: its four rates follow "mem N B". */
	u = strstr(second, "; mem ");
	ASSERT_TRUE(u);
	got = sscanf(u, "; mem %*u B %lf %lf %lf %lf", &r[0], &r[1], &r[2],
		     &r[3]);
	ASSERT_EQ(got, 4);
	EXPECT_EQ(lround(r[0] * secs), 50);
	EXPECT_LE(labs(lround(r[1] * secs) - 50 * 104), 2);
	EXPECT_EQ(lround(r[2] * secs), 10);
	EXPECT_LE(labs(lround(r[3] * secs) - 400), 2);
	EXPECT_EQ(table_moved(second, "PSOCK", "psock-0", "rx-msg/s"), 50);
	EXPECT_LE(labs(table_moved(second, "PSOCK", "psock-0", "rx-B/s") -
		       50 * 104), 2);
	EXPECT_EQ(table_moved(second, "PSOCK", "psock-1", "rx-msg/s"), 0);
	EXPECT_EQ(table_moved(second, "KCM", "kcm-0", "tx-msg/s"), 10);
	EXPECT_LE(labs(table_moved(second, "KCM", "kcm-0", "tx-B/s") - 400), 2);
	EXPECT_EQ(table_moved(second, "KCM", "kcm-1", "tx-msg/s"), 0);
	EXPECT_EQ(table_moved(second, "MUX", NULL, "rx-msg/s"), 50);
	EXPECT_LE(labs(table_moved(second, "MUX", NULL, "rx-B/s") - 50 * 104),
		  2);
	EXPECT_EQ(table_moved(second, "MUX", NULL, "tx-msg/s"), 10);
	EXPECT_LE(labs(table_moved(second, "MUX", NULL, "tx-B/s") - 400), 2);
	EXPECT_EQ(table_moved(second, "Psock", NULL, "rx-msg/s"), 50);
	EXPECT_EQ(table_moved(second, "Psock", NULL, "tx-msg/s"), 10);
}

/*
 * A mux in a child's namespace: invisible from ours, shown by -n with the
 * /proc/PID/ns/net path and with the name "ip netns attach" gave it.
 */
TEST_DIFFERS(kcmstat_netns, "no /proc/net/kcm_ext: the extended view is ours")
{
	char args[128], name[64], a[80], obj[8192], ipout[512];
	int ready[2], done[2], kcm, peer, local, rc;
	pid_t pid;

	kcm_need_iproute2("ip");
	ASSERT_OK(pipe(ready));
	ASSERT_OK(pipe(done));
	pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		char c;

		close(done[1]);
		close(ready[0]);
		kcm_enter_netns();
		kcm = kcm_with_tcp(SOCK_DGRAM, &peer, &local);
		ASSERT_OK(kcm_send_msgs(peer, 0, 2, 20));
		ASSERT_GE(kcm_recv_check(kcm, buf, sizeof(buf)), 0);
		ASSERT_GE(kcm_recv_check(kcm, buf, sizeof(buf)), 0);
		sock_addr(local, 0, a, sizeof(a));
		ASSERT_EQ(write(ready[1], a, sizeof(a)), sizeof(a));
		ASSERT_EQ(read(done[0], &c, 1), 0);
		_exit(0);
	}
	close(ready[1]);
	close(done[0]);
	ASSERT_EQ(read(ready[0], a, sizeof(a)), sizeof(a));

	kcm_enter_netns();
	ASSERT_EQ(kcmstat("-j"), 0);
	EXPECT_TRUE(strstr(out, "\"muxes\":[]"));

	snprintf(args, sizeof(args), "-j -n /proc/%d/ns/net", pid);
	ASSERT_EQ(kcmstat(args), 0);
	ASSERT_OK(json_obj(out, "\"tcp_state\"", obj, sizeof(obj)));
	EXPECT_TRUE(json_has(obj, "local", a));
	EXPECT_EQ(json_num(obj, "rx_msgs"), 2);
	EXPECT_EQ(json_num(obj, "rx_bytes"), 2 * 24);

	snprintf(name, sizeof(name), "kcmstat-test-%d", getpid());
	rc = kcm_cmd(ipout, sizeof(ipout), "ip netns attach %s %d", name, pid);
	if (rc)
		TH_LOG("ip netns attach: exit %d: %s", rc, ipout);
	ASSERT_EQ(rc, 0);
	snprintf(args, sizeof(args), "-n %s", name);
	EXPECT_EQ(kcmstat(args), 0);
	EXPECT_TRUE(strstr(out, a));
	EXPECT_TRUE(strstr(out, "mux 1: 1 KCM sockets, 1 connections; rx 2 msgs 48 B"));
	EXPECT_EQ(kcm_cmd(ipout, sizeof(ipout), "ip netns del %s", name), 0);

	EXPECT_EQ(kcmstat("-n /nonexistent/ns"), 1);
	EXPECT_TRUE(strstr(out, "/nonexistent/ns: No such file or directory"));
	close(done[1]);
	EXPECT_EQ(kcm_wait_child(pid), 0);
}

KCM_TEST_MAIN
