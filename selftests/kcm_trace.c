// SPDX-License-Identifier: GPL-2.0
/*
 * The kcm: trace events (ours, not upstream): a known exchange on a mux
 * must leave exactly the expected events, with the mux id, psock and KCM
 * socket indexes and lengths of what happened; then each receive error
 * (parser error, oversized message, late length, assembly timeout), the
 * pause and resume of a psock whose messages wait on the mux, a send that
 * fails over to another connection and messages dropped at close.
 *
 * The events are read from a tracefs instance of our own (tracefs is
 * mounted when it is not), so the global trace buffer is left alone.
 * Every test runs in a network namespace of its own, where its mux is the
 * only one.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>

#include "kcm_data.h"

#define TRACEFS		KCM_TRACEFS
#define INSTANCE	TRACEFS "/instances/kcm_selftest"
#define EV_MAX		4096
#define NO_FIELD	LLONG_MIN

/* One event read back from the trace: its name and its "k=v ..." text. */
struct ev {
	char name[32];
	char args[200];
};

static struct ev evs[EV_MAX];
static int nevs;
static char rbuf[1 << 16];

static int is_dir(const char *path)
{
	struct stat st;

	return !stat(path, &st) && S_ISDIR(st.st_mode);
}

/*
 * Mount tracefs if it is not (SKIP when the kernel has none), then start
 * recording every kcm event in a fresh instance.
 */
static void trace_start(void)
{
	if (kcm_tracefs_mount())
		SKIP(return, "tracefs unavailable: mount on %s: %s", TRACEFS,
		     strerror(errno));
	if (!is_dir(TRACEFS "/events"))
		SKIP(return, "tracefs has no events: kernel without event tracing");
	/* Fails (not skips) for a module without our events. */
	if (!is_dir(TRACEFS "/events/kcm"))
		TH_LOG("no %s/events/kcm: the module has no kcm events", TRACEFS);
	ASSERT_TRUE(is_dir(TRACEFS "/events/kcm"));

	/* Left behind by a test that failed. */
	rmdir(INSTANCE);
	ASSERT_OK(mkdir(INSTANCE, 0700));
	ASSERT_OK(kcm_write_str(INSTANCE "/buffer_size_kb", "512"));
	/* One order of events across CPUs. */
	ASSERT_OK(kcm_write_str(INSTANCE "/trace_clock", "global"));
	ASSERT_OK(kcm_write_str(INSTANCE "/events/kcm/enable", "1"));
}

/* One line of the trace: "comm-pid [cpu] flags ts: kcm_name: args". */
static void parse_line(const char *line)
{
	const char *p = strstr(line, ": kcm_"), *colon;
	struct ev *e;
	size_t n;

	if (line[0] == '#' || !p || nevs == EV_MAX)
		return;
	p += 2;
	colon = strchr(p, ':');
	if (!colon)
		return;
	e = &evs[nevs++];
	n = colon - p;
	if (n >= sizeof(e->name))
		n = sizeof(e->name) - 1;
	memcpy(e->name, p, n);
	e->name[n] = 0;
	snprintf(e->args, sizeof(e->args), " %s", colon + 1 + (colon[1] == ' '));
	e->args[strcspn(e->args, "\n")] = 0;
}

/* Stop recording, read the events into evs[] and remove the instance. */
static void trace_stop(void)
{
	char line[512];
	FILE *f;

	ASSERT_OK(kcm_write_str(INSTANCE "/events/kcm/enable", "0"));
	f = fopen(INSTANCE "/trace", "r");
	ASSERT_TRUE(f);
	nevs = 0;
	while (fgets(line, sizeof(line), f))
		parse_line(line);
	fclose(f);
	rmdir(INSTANCE);
}

static void dump(void)
{
	int i;

	for (i = 0; i < nevs; i++)
		TH_LOG("event %d: %s:%s", i, evs[i].name, evs[i].args);
}

/* The value of field @key of @e, or NO_FIELD. */
static long long num(const struct ev *e, const char *key)
{
	char want[40];
	const char *p;
	char *end;
	long long v;

	snprintf(want, sizeof(want), " %s=", key);
	p = strstr(e->args, want);
	if (!p)
		return NO_FIELD;
	v = strtoll(p + strlen(want), &end, 10);
	return end == p + strlen(want) ? NO_FIELD : v;
}

/* The text of field @key of @e ("" when absent). */
static const char *str(const struct ev *e, const char *key, char *out,
		       size_t size)
{
	if (kcm_ext_str(e->args, key, out, size))
		out[0] = 0;
	return out;
}

static int count(const char *name)
{
	int i, n = 0;

	for (i = 0; i < nevs; i++)
		n += !strcmp(evs[i].name, name);
	return n;
}

/* The @nth (from 0) event called @name; the test fails without one. */
static const struct ev *nth(const char *name, int nth)
{
	int i;

	for (i = 0; i < nevs; i++)
		if (!strcmp(evs[i].name, name) && !nth--)
			return &evs[i];
	TH_LOG("no event %s", name);
	dump();
	ASSERT_TRUE(0);
	return NULL;
}

/* The events, in order, must be exactly @names. */
static void expect_names(const char *const *names, int n)
{
	int i, ok = nevs == n;

	for (i = 0; ok && i < n; i++)
		ok = !strcmp(evs[i].name, names[i]);
	if (!ok) {
		for (i = 0; i < n; i++)
			TH_LOG("expected %d: %s", i, names[i]);
		dump();
	}
	ASSERT_TRUE(ok);
}

/* Sum of field @key over the events called @name. */
static long long sum(const char *name, const char *key)
{
	long long s = 0;
	int i;

	for (i = 0; i < nevs; i++)
		if (!strcmp(evs[i].name, name))
			s += num(&evs[i], key);
	return s;
}

/* The id of the only mux of this namespace (/proc/net/kcm_ext). */
static long long mux_id(void)
{
	char line[1024];

	ASSERT_OK(kcm_ext_find("mux", NULL, NULL, line, sizeof(line)));
	return kcm_ext_num(line, "id");
}

/* "ADDR:PORT" of a socket's own or its peer's IPv4 address. */
static void endpoint(int fd, int peer, char *out, size_t size)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	char a[INET_ADDRSTRLEN];

	ASSERT_OK(peer ? getpeername(fd, (struct sockaddr *)&sin, &len) :
			 getsockname(fd, (struct sockaddr *)&sin, &len));
	inet_ntop(AF_INET, &sin.sin_addr, a, sizeof(a));
	snprintf(out, size, "%s:%u", a, ntohs(sin.sin_port));
}

/* An attach event of psock @index, for the TCP socket @local. */
static void check_attach(const struct ev *e, long long mux, int index,
			 int local)
{
	char want[64], got[64];

	EXPECT_EQ(num(e, "mux"), mux);
	EXPECT_EQ(num(e, "psock"), index);
	endpoint(local, 0, want, sizeof(want));
	str(e, "local", got, sizeof(got));
	if (strcmp(want, got))
		TH_LOG("local: got '%s', want '%s'", got, want);
	EXPECT_TRUE(!strcmp(want, got));
	endpoint(local, 1, want, sizeof(want));
	str(e, "remote", got, sizeof(got));
	if (strcmp(want, got))
		TH_LOG("remote: got '%s', want '%s'", got, want);
	EXPECT_TRUE(!strcmp(want, got));
}

/* @psock of @mux stopped receiving with -@err, and nothing else. */
static void check_rx_error(const struct ev *e, long long mux, int err)
{
	EXPECT_EQ(num(e, "mux"), mux);
	EXPECT_EQ(num(e, "psock"), 0);
	EXPECT_EQ(num(e, "err"), -err);
}

/*
 * Two connections, two KCM sockets: three messages from the peer of psock
 * 1 reach KCM socket 1 (socket 0 does not receive), one message from KCM
 * socket 0 goes out on psock 0, then both are unattached.
 */
TEST_DIFFERS(trace_exchange, "no kcm trace events")
{
	static const char *const names[] = {
		"kcm_psock_attach", "kcm_psock_attach",
		"kcm_rx_framed", "kcm_rx_framed", "kcm_rx_framed",
		"kcm_rx_deliver",
		"kcm_tx_sent",
		"kcm_psock_unattach", "kcm_psock_unattach",
	};
	static const size_t plens[] = { 10, 100, 500 };
	int kcm, clone, prog, p0, l0, p1, l1, off = 1;
	const struct ev *e;
	size_t len = 0, i;
	char msg[1024];
	long long mux;

	kcm_enter_netns();
	trace_start();
	kcm = kcm_socket(SOCK_DGRAM);
	ASSERT_GE(kcm, 0);
	clone = kcm_u_clone(kcm);
	ASSERT_GE(clone, 0);
	ASSERT_OK(setsockopt(kcm, SOL_KCM, KCM_RECV_DISABLE, &off,
			     sizeof(off)));
	kcm_u_set_timeo(clone, SO_RCVTIMEO, 5000);
	prog = kcm_u_parser_len4();
	ASSERT_GE(prog, 0);
	ASSERT_OK(kcm_u_tcp_pair(&p0, &l0));
	ASSERT_OK(kcm_u_tcp_pair(&p1, &l1));
	ASSERT_OK(kcm_u_attach(kcm, l0, prog));
	ASSERT_OK(kcm_u_attach(kcm, l1, prog));
	mux = mux_id();

	for (i = 0; i < ARRAY_SIZE(plens); i++)
		len += kcm_u_msg_build(msg + len, plens[i], i);
	ASSERT_OK(kcm_u_write_all(p1, msg, len));
	for (i = 0; i < ARRAY_SIZE(plens); i++)
		ASSERT_EQ(kcm_recv_check(clone, rbuf, sizeof(rbuf)), i);
	len = kcm_u_msg_build(msg, 1000, 7);
	ASSERT_EQ(send(kcm, msg, len, 0), len);
	kcm_u_set_timeo(p0, SO_RCVTIMEO, 5000);
	ASSERT_EQ(kcm_u_read_msg(p0, rbuf, sizeof(rbuf)), len);
	ASSERT_OK(kcm_u_unattach(kcm, l0));
	ASSERT_OK(kcm_u_unattach(kcm, l1));
	trace_stop();

	/* One read frames the three: one pack, one delivery. */
	expect_names(names, ARRAY_SIZE(names));
	check_attach(&evs[0], mux, 0, l0);
	check_attach(&evs[1], mux, 1, l1);
	for (i = 0; i < ARRAY_SIZE(plens); i++) {
		e = &evs[2 + i];
		EXPECT_EQ(num(e, "mux"), mux);
		EXPECT_EQ(num(e, "psock"), 1);
		EXPECT_EQ(num(e, "len"), KCM_U_HDR + plens[i]);
	}
	e = nth("kcm_rx_deliver", 0);
	EXPECT_EQ(num(e, "mux"), mux);
	EXPECT_EQ(num(e, "kcm"), 1);
	EXPECT_EQ(num(e, "psock"), 1);
	EXPECT_EQ(num(e, "msgs"), 3);
	EXPECT_EQ(num(e, "bytes"), 3 * KCM_U_HDR + 610);
	e = nth("kcm_tx_sent", 0);
	EXPECT_EQ(num(e, "mux"), mux);
	EXPECT_EQ(num(e, "kcm"), 0);
	EXPECT_EQ(num(e, "psock"), 0);
	EXPECT_EQ(num(e, "len"), len);
	EXPECT_EQ(num(e, "msgs"), 1);
	EXPECT_EQ(num(e, "retried"), 0);
	e = nth("kcm_psock_unattach", 0);
	EXPECT_EQ(num(e, "mux"), mux);
	EXPECT_EQ(num(e, "psock"), 0);
	EXPECT_EQ(num(e, "rx_msgs"), 0);
	EXPECT_EQ(num(e, "tx_msgs"), 1);
	e = nth("kcm_psock_unattach", 1);
	EXPECT_EQ(num(e, "mux"), mux);
	EXPECT_EQ(num(e, "psock"), 1);
	EXPECT_EQ(num(e, "rx_msgs"), 3);
	EXPECT_EQ(num(e, "tx_msgs"), 0);
	close(clone);
	close(kcm);
}

/* A psock with a parser that fails; returns the TCP socket's SO_ERROR. */
static int rx_fail(int prog, const char *bytes, size_t n, int rcvbuf,
		   int rcvtimeo_ms, int *local_out)
{
	int kcm = kcm_socket(SOCK_DGRAM), peer, local;

	ASSERT_GE(kcm, 0);
	ASSERT_GE(prog, 0);
	ASSERT_OK(kcm_u_tcp_pair(&peer, &local));
	if (rcvbuf)
		ASSERT_OK(setsockopt(local, SOL_SOCKET, SO_RCVBUF, &rcvbuf,
				     sizeof(rcvbuf)));
	if (rcvtimeo_ms)
		kcm_u_set_timeo(local, SO_RCVTIMEO, rcvtimeo_ms);
	ASSERT_OK(kcm_u_attach(kcm, local, prog));
	ASSERT_OK(kcm_u_write_all(peer, bytes, n));
	*local_out = local;
	return kcm_wait_so_error(local, 5000);
}

/* The parser's own error is the error event's. */
TEST_DIFFERS(trace_parser_error, "no kcm trace events")
{
	static const char *const names[] = {
		"kcm_psock_attach", "kcm_rx_error",
	};
	int local;

	kcm_enter_netns();
	trace_start();
	ASSERT_EQ(rx_fail(kcm_parser_const(-EBADMSG), "abcdefgh", 8, 0, 0,
			  &local), EBADMSG);
	trace_stop();
	expect_names(names, ARRAY_SIZE(names));
	check_rx_error(&evs[1], mux_id(), EBADMSG);
}

/* A length over the TCP socket's receive buffer. */
TEST_DIFFERS(trace_too_big, "no kcm trace events")
{
	static const char *const names[] = {
		"kcm_psock_attach", "kcm_rx_too_big", "kcm_rx_error",
	};
	const char hdr[8] = { 0x10, 0, 0, 0 };	/* 256 MB */
	int local;
	long long mux;

	kcm_enter_netns();
	trace_start();
	ASSERT_EQ(rx_fail(kcm_u_parser_len4(), hdr, sizeof(hdr), 65536, 0,
			  &local), EMSGSIZE);
	trace_stop();
	mux = mux_id();
	expect_names(names, ARRAY_SIZE(names));
	EXPECT_EQ(num(&evs[1], "mux"), mux);
	EXPECT_EQ(num(&evs[1], "psock"), 0);
	EXPECT_EQ(num(&evs[1], "len"), (256 << 20) + KCM_U_HDR);
	EXPECT_EQ(num(&evs[1], "rcvbuf"),
		  kcm_u_getsockopt_int(local, SOL_SOCKET, SO_RCVBUF));
	check_rx_error(&evs[2], mux, EMSGSIZE);
}

/* A length the bytes seen at an earlier call already covered. */
TEST_DIFFERS(trace_bad_len, "no kcm trace events")
{
	static const char *const names[] = {
		"kcm_psock_attach", "kcm_rx_bad_len", "kcm_rx_error",
	};
	int kcm, prog = kcm_parser_min_len(8, 2), peer, local;
	long long mux;

	kcm_enter_netns();
	kcm = kcm_socket(SOCK_DGRAM);
	ASSERT_GE(kcm, 0);
	trace_start();
	ASSERT_OK(kcm_u_tcp_pair(&peer, &local));
	ASSERT_OK(kcm_u_attach(kcm, local, prog));
	ASSERT_EQ(write(peer, "abcd", 4), 4);
	usleep(100000);
	ASSERT_EQ(write(peer, "efgh", 4), 4);
	ASSERT_EQ(kcm_wait_so_error(local, 5000), EPROTO);
	trace_stop();
	mux = mux_id();
	expect_names(names, ARRAY_SIZE(names));
	EXPECT_EQ(num(&evs[1], "mux"), mux);
	EXPECT_EQ(num(&evs[1], "psock"), 0);
	EXPECT_EQ(num(&evs[1], "len"), 2);
	EXPECT_EQ(num(&evs[1], "seen"), 4);
	check_rx_error(&evs[2], mux, EPROTO);
	close(kcm);
}

/* Part of a message, then nothing within the TCP socket's SO_RCVTIMEO. */
TEST_DIFFERS(trace_timeout, "no kcm trace events")
{
	static const char *const names[] = {
		"kcm_psock_attach", "kcm_rx_timeout", "kcm_rx_error",
	};
	const char part[10] = { 0, 0, 0, 100 };
	int local;
	long long mux;

	kcm_enter_netns();
	trace_start();
	ASSERT_EQ(rx_fail(kcm_u_parser_len4(), part, sizeof(part), 0, 200,
			  &local), ETIMEDOUT);
	trace_stop();
	mux = mux_id();
	expect_names(names, ARRAY_SIZE(names));
	EXPECT_EQ(num(&evs[1], "mux"), mux);
	EXPECT_EQ(num(&evs[1], "psock"), 0);
	EXPECT_EQ(num(&evs[1], "len"), 100 + KCM_U_HDR);
	EXPECT_GE(num(&evs[1], "msecs"), 200);
	check_rx_error(&evs[2], mux, ETIMEDOUT);
}

#define FLOW_MSGS	100
#define FLOW_PLEN	1000

/*
 * The only KCM socket has a tiny receive buffer and reads late: messages
 * wait on the mux until the psock holds more than its TCP socket's receive
 * buffer and pauses; reading lets it resume.  Every message framed is
 * delivered once, held or not.
 */
TEST_DIFFERS(trace_pause_resume, "no kcm trace events")
{
	int kcm, prog = kcm_u_parser_len4(), peer, local, one = 1, i, rcvbuf;
	const struct ev *e;
	long long mux;
	int pauses;
	pid_t pid;

	kcm_enter_netns();
	kcm = kcm_socket(SOCK_DGRAM);
	ASSERT_GE(kcm, 0);
	trace_start();
	ASSERT_OK(kcm_u_tcp_pair(&peer, &local));
	ASSERT_OK(setsockopt(kcm, SOL_SOCKET, SO_RCVBUF, &one, sizeof(one)));
	ASSERT_OK(setsockopt(local, SOL_SOCKET, SO_RCVBUF, &one, sizeof(one)));
	rcvbuf = kcm_u_getsockopt_int(local, SOL_SOCKET, SO_RCVBUF);
	ASSERT_OK(kcm_u_attach(kcm, local, prog));
	kcm_u_set_timeo(kcm, SO_RCVTIMEO, 5000);
	pid = fork();
	ASSERT_GE(pid, 0);
	if (!pid) {
		for (i = 0; i < FLOW_MSGS; i++)
			if (kcm_send_msgs(peer, i, 1, FLOW_PLEN))
				_exit(1);
		_exit(0);
	}
	usleep(300000);
	for (i = 0; i < FLOW_MSGS; i++)
		ASSERT_EQ(kcm_recv_check(kcm, rbuf, sizeof(rbuf)), i);
	ASSERT_EQ(kcm_wait_child(pid), 0);
	trace_stop();
	mux = mux_id();

	EXPECT_EQ(count("kcm_rx_framed"), FLOW_MSGS);
	EXPECT_EQ(sum("kcm_rx_deliver", "msgs"), FLOW_MSGS);
	EXPECT_EQ(sum("kcm_rx_deliver", "bytes"),
		  FLOW_MSGS * (KCM_U_HDR + FLOW_PLEN));
	EXPECT_GE(count("kcm_rx_hold"), 1);
	EXPECT_LE(sum("kcm_rx_hold", "msgs"), FLOW_MSGS);
	pauses = count("kcm_psock_pause");
	EXPECT_GE(pauses, 1);
	/* Everything was read: each pause had its resume, in turn. */
	EXPECT_EQ(count("kcm_psock_resume"), pauses);
	for (i = 0; i < pauses; i++) {
		e = nth("kcm_psock_pause", i);
		EXPECT_EQ(num(e, "mux"), mux);
		EXPECT_EQ(num(e, "psock"), 0);
		EXPECT_EQ(num(e, "rcvbuf"), rcvbuf);
		EXPECT_GE(num(e, "held"), rcvbuf + 1);
		EXPECT_TRUE(e < nth("kcm_psock_resume", i));
		if (i + 1 < pauses)
			EXPECT_TRUE(nth("kcm_psock_resume", i) <
				    nth("kcm_psock_pause", i + 1));
		e = nth("kcm_psock_resume", i);
		EXPECT_EQ(num(e, "psock"), 0);
		EXPECT_LE(num(e, "held"), rcvbuf / 2);
	}
	if (kcm_test_failed)
		dump();
	close(kcm);
}

/*
 * The connection a message is written to was reset: the write is aborted
 * there and the message goes out whole, as a retry, on the other one.
 */
TEST_DIFFERS(trace_tx_failover, "no kcm trace events")
{
	static const char *const names[] = {
		"kcm_psock_attach", "kcm_psock_attach",
		"kcm_tx_abort", "kcm_tx_sent",
	};
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };
	int kcm, prog = kcm_u_parser_len4(), pa, la, pb, lb;
	const struct ev *e;
	char msg[600];
	size_t len;
	long long mux;

	kcm_enter_netns();
	kcm = kcm_socket(SOCK_DGRAM);
	ASSERT_GE(kcm, 0);
	trace_start();
	ASSERT_OK(kcm_u_tcp_pair(&pa, &la));
	ASSERT_OK(kcm_u_tcp_pair(&pb, &lb));
	ASSERT_OK(kcm_u_attach(kcm, la, prog));
	ASSERT_OK(kcm_u_attach(kcm, lb, prog));
	kcm_u_set_timeo(pb, SO_RCVTIMEO, 5000);
	ASSERT_OK(setsockopt(pa, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)));
	close(pa);
	usleep(100000);
	len = kcm_u_msg_build(msg, 500, 1);
	ASSERT_EQ(send(kcm, msg, len, 0), len);
	ASSERT_EQ(kcm_u_read_msg(pb, rbuf, sizeof(rbuf)), len);
	trace_stop();
	mux = mux_id();
	expect_names(names, ARRAY_SIZE(names));
	e = &evs[2];
	EXPECT_EQ(num(e, "mux"), mux);
	EXPECT_EQ(num(e, "kcm"), 0);
	EXPECT_EQ(num(e, "psock"), 0);
	EXPECT_EQ(num(e, "len"), len);
	EXPECT_EQ(num(e, "sent"), 0);
	EXPECT_LE(num(e, "err"), -1);
	EXPECT_EQ(num(e, "retry"), 1);
	e = &evs[3];
	EXPECT_EQ(num(e, "mux"), mux);
	EXPECT_EQ(num(e, "kcm"), 0);
	EXPECT_EQ(num(e, "psock"), 1);
	EXPECT_EQ(num(e, "len"), len);
	EXPECT_EQ(num(e, "retried"), 1);
	close(kcm);
}

/* Messages queued on a mux without connections are dropped at close. */
TEST_DIFFERS(trace_tx_drop, "no kcm trace events")
{
	static const char *const names[] = { "kcm_tx_drop" };
	int kcm, clone, i;
	long long mux;
	char msg[64];
	size_t len;

	kcm_enter_netns();
	kcm = kcm_socket(SOCK_DGRAM);
	ASSERT_GE(kcm, 0);
	mux = mux_id();
	clone = kcm_u_clone(kcm);
	ASSERT_GE(clone, 0);
	trace_start();
	len = kcm_u_msg_build(msg, 20, 0);
	for (i = 0; i < 3; i++)
		ASSERT_EQ(send(clone, msg, len, MSG_DONTWAIT), len);
	close(clone);
	/* Nothing was queued on @kcm: no event when the mux dies with it. */
	close(kcm);
	trace_stop();
	expect_names(names, ARRAY_SIZE(names));
	EXPECT_EQ(num(&evs[0], "mux"), mux);
	EXPECT_EQ(num(&evs[0], "kcm"), 1);
	EXPECT_EQ(num(&evs[0], "conn"), -1);
	EXPECT_EQ(num(&evs[0], "err"), 0);
	EXPECT_EQ(num(&evs[0], "msgs"), 3);
}

/* A message that outgrew its socket's send buffer: dropped, EMSGSIZE. */
TEST_DIFFERS(trace_tx_too_big, "no kcm trace events")
{
	static const char *const names[] = { "kcm_tx_drop" };
	static char big[65536];
	int kcm, sndbuf = 16384;
	long long mux;

	kcm_enter_netns();
	kcm = kcm_socket(SOCK_SEQPACKET);
	ASSERT_GE(kcm, 0);
	mux = mux_id();
	ASSERT_OK(setsockopt(kcm, SOL_SOCKET, SO_SNDBUF, &sndbuf,
			     sizeof(sndbuf)));
	trace_start();
	ASSERT_EQ(send(kcm, big, 20000, 0), 20000);
	ASSERT_ERRNO(send(kcm, big, 20000, MSG_EOR), EMSGSIZE);
	trace_stop();
	expect_names(names, ARRAY_SIZE(names));
	EXPECT_EQ(num(&evs[0], "mux"), mux);
	EXPECT_EQ(num(&evs[0], "kcm"), 0);
	EXPECT_EQ(num(&evs[0], "conn"), -1);
	EXPECT_EQ(num(&evs[0], "err"), -EMSGSIZE);
	EXPECT_EQ(num(&evs[0], "msgs"), 1);
	close(kcm);
}

/*
 * Before 6.6 the application installs kTLS's ULP on an attached socket:
 * at the next bytes from the peer the psock stops, with one event naming
 * the ULP.
 */
TEST_DIFFERS(trace_ulp_stop, "no kcm trace events")
{
	static const char *const names[] = {
		"kcm_psock_attach", "kcm_psock_ulp",
	};
	int kcm, peer, local, prog = kcm_u_parser_len4();
	char ulp[16];

	if (kcm_tls_carried())
		SKIP(return, "from 6.6 KCM goes through kTLS: no stop to trace");
	kcm_enter_netns();
	kcm = kcm_socket(SOCK_DGRAM);
	ASSERT_GE(kcm, 0);
	ASSERT_OK(kcm_u_tcp_pair(&peer, &local));
	trace_start();
	ASSERT_OK(kcm_u_attach(kcm, local, prog));
	if (kcm_u_ktls_ulp(local))
		SKIP(return, "no kTLS: TCP_ULP \"tls\": %s", strerror(errno));
	ASSERT_OK(kcm_u_write_all(peer, "abcdefgh", 8));
	ASSERT_EQ(kcm_wait_so_error(local, 5000), EOPNOTSUPP);
	trace_stop();
	expect_names(names, ARRAY_SIZE(names));
	EXPECT_EQ(num(&evs[1], "mux"), mux_id());
	EXPECT_EQ(num(&evs[1], "psock"), 0);
	EXPECT_TRUE(!strcmp(str(&evs[1], "ulp", ulp, sizeof(ulp)), "tls"));
	close(kcm);
}

/*
 * A sendmmsg() batch of small messages goes to TCP in packs: fewer
 * kcm_tx_sent events than messages, whose msgs and len add up to the
 * batch, every message arriving whole and in order.
 */
TEST_DIFFERS(trace_tx_pack, "no kcm trace events")
{
	enum { N = 32, PLEN = 40 };
	static char msgs[N][KCM_U_HDR + PLEN];
	int kcm, peer, local, i, n;
	struct mmsghdr mm[N];
	struct iovec iov[N];
	long long mux;
	size_t len = 0;

	kcm_enter_netns();
	kcm = kcm_with_tcp(SOCK_DGRAM, &peer, &local);
	mux = mux_id();
	memset(mm, 0, sizeof(mm));
	for (i = 0; i < N; i++) {
		iov[i].iov_base = msgs[i];
		iov[i].iov_len = kcm_u_msg_build(msgs[i], PLEN, i);
		len += iov[i].iov_len;
		mm[i].msg_hdr.msg_iov = &iov[i];
		mm[i].msg_hdr.msg_iovlen = 1;
	}
	trace_start();
	ASSERT_EQ(sendmmsg(kcm, mm, N, 0), N);
	for (i = 0; i < N; i++) {
		ASSERT_EQ(kcm_u_read_msg(peer, rbuf, sizeof(rbuf)),
			  iov[i].iov_len);
		ASSERT_EQ(kcm_u_msg_check(rbuf, iov[i].iov_len), i);
	}
	trace_stop();
	n = count("kcm_tx_sent");
	TH_LOG("%d messages in %d kcm_tx_sent events", N, n);
	ASSERT_GE(n, 1);
	EXPECT_LT(n, N);
	EXPECT_EQ(sum("kcm_tx_sent", "msgs"), N);
	EXPECT_EQ(sum("kcm_tx_sent", "len"), len);
	for (i = 0; i < n; i++) {
		EXPECT_EQ(num(nth("kcm_tx_sent", i), "mux"), mux);
		EXPECT_EQ(num(nth("kcm_tx_sent", i), "retried"), 0);
	}
	close(kcm);
}

/*
 * Steering by key: setting the key function (the connection), three
 * messages of the connection, all to the socket that owns its key (the
 * steer event names it, then the delivery); a socket that joins and
 * leaves moves the slots it takes; removing the function.
 */
TEST_DIFFERS(trace_steer, "no kcm trace events")
{
	static const char *const names[] = {
		"kcm_steer_set",
		"kcm_rx_framed", "kcm_rx_framed", "kcm_rx_framed",
		"kcm_rx_steer", "kcm_rx_deliver",
		"kcm_steer_member", "kcm_steer_member",
		"kcm_steer_set",
	};
	struct kcm_recv_key key = { .key_type = KCM_KEY_CONN };
	int kcm[2], peer, local, a, i, owner;
	struct pollfd p[2];
	const struct ev *e;
	size_t len = 0;
	char msg[512], kind[16];
	long long mux;

	kcm_enter_netns();
	kcm[0] = kcm_with_tcp(SOCK_DGRAM, &peer, &local);
	kcm[1] = kcm_u_clone(kcm[0]);
	ASSERT_GE(kcm[1], 0);
	for (i = 0; i < 2; i++)
		p[i] = (struct pollfd){ .fd = kcm[i], .events = POLLIN };
	mux = mux_id();
	trace_start();
	ASSERT_OK(setsockopt(kcm[1], SOL_KCM, KCM_RECV_KEY, &key,
			     sizeof(key)));
	for (i = 0; i < 3; i++)
		len += kcm_u_msg_build(msg + len, 20 + i, i);
	ASSERT_OK(kcm_u_write_all(peer, msg, len));
	ASSERT_EQ(poll(p, 2, 5000), 1);
	owner = p[0].revents & POLLIN ? 0 : 1;
	for (i = 0; i < 3; i++)
		ASSERT_EQ(kcm_recv_check(kcm[owner], rbuf, sizeof(rbuf)), i);
	a = accept(kcm[0], NULL, NULL);
	ASSERT_GE(a, 0);
	close(a);
	key.key_type = KCM_KEY_OFF;
	ASSERT_OK(setsockopt(kcm[0], SOL_KCM, KCM_RECV_KEY, &key,
			     sizeof(key)));
	trace_stop();

	expect_names(names, ARRAY_SIZE(names));
	EXPECT_EQ(num(&evs[0], "mux"), mux);
	EXPECT_TRUE(!strcmp(str(&evs[0], "key", kind, sizeof(kind)), "conn"));
	e = nth("kcm_rx_steer", 0);
	EXPECT_EQ(num(e, "mux"), mux);
	EXPECT_EQ(num(e, "kcm"), owner);
	EXPECT_EQ(num(e, "psock"), 0);
	EXPECT_EQ(num(e, "msgs"), 3);
	EXPECT_EQ(num(e, "bytes"), len);
	EXPECT_EQ(num(e, "key"), 0);
	EXPECT_EQ(num(e, "held"), 0);
	EXPECT_EQ(num(nth("kcm_rx_deliver", 0), "kcm"), owner);
	/* The third socket took slots from the two, and gave them back. */
	e = nth("kcm_steer_member", 0);
	EXPECT_EQ(num(e, "kcm"), 2);
	EXPECT_EQ(num(e, "join"), 1);
	EXPECT_GT(num(e, "moved"), 0);
	EXPECT_EQ(num(e, "moved"), num(e, "slots"));
	EXPECT_EQ(num(nth("kcm_steer_member", 1), "join"), 0);
	EXPECT_EQ(num(nth("kcm_steer_member", 1), "moved"), num(e, "slots"));
	EXPECT_EQ(num(nth("kcm_steer_member", 1), "slots"), 0);
	EXPECT_TRUE(!strcmp(str(&evs[8], "key", kind, sizeof(kind)), "off"));
	close(kcm[1]);
	close(kcm[0]);
}

KCM_TEST_MAIN
