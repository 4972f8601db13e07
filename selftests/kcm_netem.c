// SPDX-License-Identifier: GPL-2.0
/*
 * KCM over a faulty network.  Two network namespaces are joined by a veth
 * pair with netem on both ends (delay, jitter, loss, reordering): the TCP
 * peers live in one (A), the KCM mux in the other (B).  Messages must stay
 * whole and in order per connection in both directions, and a connection
 * whose peer resets in the middle of a message must fail alone: its TCP
 * socket reports the reset, the other connection carries on.
 *
 * The namespaces, the veth pair and netem are set up with ip(8) and tc(8)
 * of iproute2, as the kernel's net selftests do.  Without them, or without
 * veth or sch_netem in the kernel, the tests SKIP and say why.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <linux/sockios.h>

#include "kcm_data.h"

#define ADDR_A		"10.211.0.1"	/* the TCP peers */
#define ADDR_B		"10.211.0.2"	/* the KCM mux */
#define MSG_MAX		(KCM_U_HDR + 300)
#define TIMEO_MS	15000

/* What netem does to the packets leaving each end of the veth pair. */
#define NETEM		"delay 5ms 2ms loss 2% reorder 10% 50%"

static char rbuf[1 << 16];

static long now_ms(void)
{
	return (long)(kcm_u_now_ns() / 1000000);
}

/* A child that dies with the test. */
static pid_t spawn(void)
{
	pid_t pid = fork();

	ASSERT_GE(pid, 0);
	if (!pid)
		prctl(PR_SET_PDEATHSIG, SIGKILL);
	return pid;
}

/* ---- messages ---------------------------------------------------------- */

/* 100 to 300 payload bytes, known from the sequence number alone. */
static size_t plen_of(uint32_t seq)
{
	return 100 + (seq * 37 + (seq >> 16) * 11) % 201;
}

static size_t build(char *buf, uint32_t seq)
{
	return kcm_u_msg_build(buf, plen_of(seq), seq);
}

/* Returns the seq of a message we sent, whole and unchanged, or -1. */
static long msg_check(const char *buf, size_t len)
{
	long seq = kcm_u_msg_check(buf, len);

	if (seq < 0 || len != KCM_U_HDR + plen_of(seq))
		return -1;
	return seq;
}

static int send_seq(int fd, uint32_t seq)
{
	char buf[MSG_MAX];
	size_t len = build(buf, seq);
	ssize_t n;

	do {
		n = send(fd, buf, len, 0);
	} while (n < 0 && errno == EINTR);
	return n == (ssize_t)len ? 0 : -1;
}

/* Reads one message from a TCP stream: its seq, -1 bad, -2 error/EOF. */
static long tcp_read_msg(int fd, char *buf)
{
	long n = kcm_u_read_msg(fd, buf, MSG_MAX);

	return n < 0 ? n : msg_check(buf, n);
}

/* Receives one message on a KCM socket: its seq, -1 bad, -2 error. */
static long kcm_read_msg(int kcm, int flags)
{
	int mflags;
	ssize_t n = kcm_recv(kcm, rbuf, sizeof(rbuf), flags, &mflags);

	if (n < 0)
		return -2;
	if (!(mflags & MSG_EOR) || (mflags & MSG_TRUNC))
		return -1;
	return msg_check(rbuf, n);
}

/* Waits until TCP has all its data acknowledged by the other end. */
static int wait_acked(int fd)
{
	long end = now_ms() + TIMEO_MS;
	int q;

	while (now_ms() < end) {
		if (ioctl(fd, SIOCOUTQ, &q))
			return -1;
		if (!q)
			return 0;
		usleep(2000);
	}
	return -1;
}

static void reset_close(int fd)
{
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };

	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(fd);
}

/* A probe after a second of silence, then every second. */
static void keepalive(int fd)
{
	int one = 1;

	ASSERT_OK(setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)));
	ASSERT_OK(setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &one, sizeof(one)));
	ASSERT_OK(setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &one,
			     sizeof(one)));
}

/* Logs what the faults did to the sending TCP sockets @fd[0], @fd[1]. */
static void tcp_log(const int fd[2])
{
	struct tcp_info ti[2];
	socklen_t len;
	int c;

	for (c = 0; c < 2; c++) {
		memset(&ti[c], 0, sizeof(ti[c]));
		len = sizeof(ti[c]);
		getsockopt(fd[c], IPPROTO_TCP, TCP_INFO, &ti[c], &len);
	}
	TH_LOG("TCP: retransmitted %u + %u segments, smoothed RTT %u + %u us",
	       ti[0].tcpi_total_retrans, ti[1].tcpi_total_retrans,
	       ti[0].tcpi_rtt, ti[1].tcpi_rtt);
}

/* Logs /proc/net/kcm: who holds what when something is stuck. */
static void proc_log(void)
{
	FILE *f = fopen("/proc/net/kcm", "r");
	char line[512];

	while (f && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		TH_LOG("%s", line);
	}
	if (f)
		fclose(f);
}

/* ---- two namespaces, a veth pair, netem: ip(8), tc(8) ------------------ */

struct env {
	char name[2][32];	/* of A and B while they are set up */
	int named;		/* how many of them exist */
	int ns_a, ns_b;		/* the namespaces of the peers, of KCM */
	int listener;		/* TCP, in B */
	struct sockaddr_in sin;	/* its address */
};

/* What ip and tc say when the kernel lacks the link or qdisc kind. */
static const char *const unsupported[] = {
	"Unknown device type",		/* ip link add ... type veth */
	"qdisc kind is unknown",	/* tc qdisc add ... netem */
};

/* @s on one line, for a log or a SKIP reason. */
static char *oneline(char *s)
{
	size_t n = strlen(s);

	while (n && (s[n - 1] == '\n' || s[n - 1] == ' '))
		s[--n] = 0;
	for (; n; n--)
		if (s[n - 1] == '\n')
			s[n - 1] = ' ';
	return s;
}

/* Deletes the names of A and B: what holds them open keeps them. */
static void env_unname(struct env *e)
{
	char out[512];

	while (e->named > 0) {
		e->named--;
		kcm_cmd(out, sizeof(out), "ip netns del %s", e->name[e->named]);
	}
}

/*
 * Runs one ip or tc command line of the set-up.  If it fails, the names
 * go and so does the test: a SKIP if the kernel lacks veth or netem.
 */
static void __attribute__((format(printf, 2, 3)))
env_run(struct env *e, const char *fmt, ...)
{
	char line[256], out[1024];
	size_t i;
	va_list ap;
	int rc;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	rc = kcm_cmd(out, sizeof(out), "%s", line);
	if (!rc)
		return;
	env_unname(e);
	oneline(out);
	for (i = 0; i < ARRAY_SIZE(unsupported); i++)
		if (strstr(out, unsupported[i]))
			SKIP(return, "%s: %s", line, out);
	TH_LOG("%s: exit %d: %s", line, rc, out);
	ASSERT_EQ(rc, 0);
}

/* lo and @dev of namespace @ns up, @addr/24 on @dev, netem on its egress. */
static void side_setup(struct env *e, const char *ns, const char *dev,
		       const char *addr)
{
	env_run(e, "ip -n %s link set lo up", ns);
	env_run(e, "ip -n %s addr add %s/24 dev %s", ns, addr, dev);
	env_run(e, "tc -n %s qdisc add dev %s root netem %s", ns, dev, NETEM);
	env_run(e, "ip -n %s link set %s up", ns, dev);
}

/* An fd of the namespace ip(8) named @name (under /run/netns). */
static int ns_open(struct env *e, const char *name)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/run/netns/%s", name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		TH_LOG("%s: %s", path, strerror(errno));
		env_unname(e);
	}
	ASSERT_GE(fd, 0);
	return fd;
}

static void ns_enter(int fd)
{
	ASSERT_OK(setns(fd, CLONE_NEWNET));
}

/* Leaves the caller in B with a listener; A holds the other veth end. */
static void env_setup(struct env *e)
{
	socklen_t len = sizeof(e->sin);
	int i;

	kcm_need_iproute2("ip");
	kcm_need_iproute2("tc");
	for (i = 0; i < 2; i++)
		snprintf(e->name[i], sizeof(e->name[i]), "kcm-netem-%c-%d",
			 'a' + i, getpid());
	for (e->named = 0; e->named < 2; e->named++)
		env_run(e, "ip netns add %s", e->name[e->named]);
	env_run(e, "ip link add kcmb netns %s type veth peer name kcma netns %s",
		e->name[1], e->name[0]);
	side_setup(e, e->name[0], "kcma", ADDR_A);
	side_setup(e, e->name[1], "kcmb", ADDR_B);
	e->ns_a = ns_open(e, e->name[0]);
	e->ns_b = ns_open(e, e->name[1]);
	/* From here on the namespaces live as long as the test. */
	env_unname(e);
	ns_enter(e->ns_b);

	memset(&e->sin, 0, sizeof(e->sin));
	e->sin.sin_family = AF_INET;
	e->sin.sin_addr.s_addr = inet_addr(ADDR_B);
	e->listener = socket(AF_INET, SOCK_STREAM, 0);
	ASSERT_GE(e->listener, 0);
	ASSERT_OK(bind(e->listener, (struct sockaddr *)&e->sin, len));
	ASSERT_OK(listen(e->listener, 8));
	ASSERT_OK(getsockname(e->listener, (struct sockaddr *)&e->sin, &len));
}

/* A TCP connection across the veth: @peer in A, @local (accepted) in B. */
static void env_connect(struct env *e, int *peer, int *local)
{
	ns_enter(e->ns_a);
	*peer = socket(AF_INET, SOCK_STREAM, 0);
	ns_enter(e->ns_b);
	ASSERT_GE(*peer, 0);
	ASSERT_OK(connect(*peer, (struct sockaddr *)&e->sin, sizeof(e->sin)));
	*local = accept(e->listener, NULL, NULL);
	ASSERT_GE(*local, 0);
	kcm_u_set_timeo(*peer, SO_RCVTIMEO, TIMEO_MS);
	kcm_u_set_timeo(*peer, SO_SNDTIMEO, TIMEO_MS);
}

/* A KCM socket in B with two connections attached (len4 parser). */
static int env_mux(struct env *e, int peer[2], int local[2])
{
	int kcm = kcm_socket(SOCK_DGRAM), prog = kcm_u_parser_len4(), c;

	ASSERT_GE(kcm, 0);
	ASSERT_GE(prog, 0);
	for (c = 0; c < 2; c++) {
		env_connect(e, &peer[c], &local[c]);
		ASSERT_OK(kcm_u_attach(kcm, local[c], prog));
	}
	close(prog);
	return kcm;
}

/* ---- state shared with the children ------------------------------------ */

#define SH_REC		45000
#define SH_MAX		20000	/* messages per sender before the reset */

struct shared {
	int phase;		/* 1: the peer has reset, 2: B saw it, go on */
	int stopped;		/* reader 0 stopped reading */
	int reset_now;		/* ... and may reset now */
	int n1[2];		/* messages sender s sent before phase 1 */
	int sigpipes[2];	/* SIGPIPEs sender s got */
	int send_err[2];	/* errno of sender s's failed send */
	int send_fail[2];	/* ... and which message it was */
	int nrec[2];		/* messages read whole on connection c */
	long bad[2];		/* what the read that ended reader c said */
	int bad_errno[2];
	unsigned char bad_head[2][12];	/* ... and the bytes it got */
	uint32_t rec[2][SH_REC];
};

static struct shared *sh;
static int self;		/* which sender a child is */

static int ld(int *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static void st(int *p, int v)
{
	__atomic_store_n(p, v, __ATOMIC_RELEASE);
}

static void shared_init(void)
{
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_TRUE(sh != MAP_FAILED);
	memset(sh, 0, sizeof(*sh));
	sh->n1[0] = -1;
	sh->n1[1] = -1;
	sh->send_fail[0] = -1;
	sh->send_fail[1] = -1;
}

/* In a child: waits for @phase, or gives up with exit status 3. */
static void wait_phase(int phase)
{
	long end = now_ms() + 2 * TIMEO_MS;

	while (ld(&sh->phase) < phase) {
		if (now_ms() > end)
			_exit(3);
		usleep(1000);
	}
}

static void on_sigpipe(int sig)
{
	(void)sig;
	__atomic_fetch_add(&sh->sigpipes[self], 1, __ATOMIC_RELAXED);
}

/* ---- 1. intact and in order ---------------------------------------------- */

#define RX_MSGS		5000

/* Writes messages @first.. in chunks of odd sizes: cut anywhere. */
static int peer_stream(int fd, uint32_t first, int n)
{
	char *buf = malloc((size_t)n * MSG_MAX);
	size_t len = 0, off, chunk;
	int i, k, ret = 0;

	if (!buf)
		return -1;
	for (i = 0; i < n; i++)
		len += build(buf + len, first + i);
	for (off = 0, k = 0; off < len && !ret; off += chunk, k++) {
		chunk = 1 + (k * 7919 + first) % 4096;
		if (chunk > len - off)
			chunk = len - off;
		ret = kcm_u_write_all(fd, buf + off, chunk);
	}
	free(buf);
	return ret;
}

/* Two peers stream into one KCM socket: each message whole, in order. */
TEST_DIFFERS(netem_rx_ordered,
	     "messages straddle segments: upstream mis-frames them")
{
	int peer[2], local[2], next[2] = { 0 }, kcm, c, i;
	long t0, seq;
	struct env e;
	pid_t pid[2];

	env_setup(&e);
	kcm = env_mux(&e, peer, local);
	kcm_u_set_timeo(kcm, SO_RCVTIMEO, TIMEO_MS);
	t0 = now_ms();
	for (c = 0; c < 2; c++) {
		pid[c] = spawn();
		if (!pid[c])
			_exit(peer_stream(peer[c], c << 16, RX_MSGS) ? 1 : 0);
	}
	for (i = 0; i < 2 * RX_MSGS; i++) {
		seq = kcm_read_msg(kcm, 0);
		if (seq < 0)
			TH_LOG("message %d: got %ld errno %d (next %d, %d)", i,
			       seq, errno, next[0], next[1]);
		ASSERT_GE(seq, 0);
		c = seq >> 16;
		ASSERT_LT(c, 2);
		ASSERT_EQ(seq & 0xffff, next[c]);
		next[c]++;
	}
	for (c = 0; c < 2; c++)
		ASSERT_EQ(kcm_wait_child(pid[c]), 0);
	/* Nothing more, nothing made up of leftovers. */
	ASSERT_EQ(kcm_poll1(kcm, POLLIN, 300) & POLLIN, 0);
	TH_LOG("2 x %d messages in %ld ms", RX_MSGS, now_ms() - t0);
	tcp_log(peer);
	close(kcm);
}

#define TX_MSGS		5000

/* Two KCM sockets send over two connections: whole, once, in order. */
TEST(netem_tx_ordered)
{
	static unsigned char seen[2][TX_MSGS];
	int peer[2], local[2], fds[2], go[2], count[2] = { 0 };
	int last[2][2] = { { -1, -1 }, { -1, -1 } };
	int kcm, c, s, i, total;
	struct env e;
	pid_t pid[2];
	long t0, seq;

	env_setup(&e);
	kcm = env_mux(&e, peer, local);
	fds[0] = kcm;
	fds[1] = kcm_u_clone(kcm);
	ASSERT_GE(fds[1], 0);
	ASSERT_OK(pipe(go));
	for (s = 0; s < 2; s++) {
		pid[s] = spawn();
		if (!pid[s]) {
			char b;

			if (read(go[0], &b, 1) != 1)
				_exit(2);
			for (i = 0; i < TX_MSGS; i++)
				if (send_seq(fds[s], (s << 16) | i))
					_exit(1);
			_exit(0);
		}
	}
	t0 = now_ms();
	ASSERT_EQ(write(go[1], "gg", 2), 2);
	for (total = 0; total < 2 * TX_MSGS;) {
		struct pollfd p[2] = { { peer[0], POLLIN, 0 },
				       { peer[1], POLLIN, 0 } };

		ASSERT_GE(poll(p, 2, TIMEO_MS), 1);
		for (c = 0; c < 2; c++) {
			if (!(p[c].revents & POLLIN))
				continue;
			seq = tcp_read_msg(peer[c], rbuf);
			if (seq < 0)
				TH_LOG("connection %d, after %d messages: %ld",
				       c, total, seq);
			ASSERT_GE(seq, 0);
			s = seq >> 16;
			i = seq & 0xffff;
			ASSERT_LT(s, 2);
			ASSERT_LT(i, TX_MSGS);
			ASSERT_EQ(seen[s][i], 0);
			seen[s][i] = 1;
			/* One sender's messages keep their order. */
			ASSERT_GE(i, last[c][s] + 1);
			last[c][s] = i;
			count[c]++;
			total++;
		}
	}
	for (s = 0; s < 2; s++)
		ASSERT_EQ(kcm_wait_child(pid[s]), 0);
	ASSERT_EQ(kcm_poll1(peer[0], POLLIN, 300) & POLLIN, 0);
	ASSERT_EQ(kcm_poll1(peer[1], POLLIN, 0) & POLLIN, 0);
	TH_LOG("2 x %d messages in %ld ms, %d + %d per connection", TX_MSGS,
	       now_ms() - t0, count[0], count[1]);
	tcp_log(local);
	/* Two busy senders: each has a connection of its own. */
	ASSERT_GE(count[0], 1);
	ASSERT_GE(count[1], 1);
	close(fds[1]);
	close(kcm);
}

/* ---- 2. a peer resets in the middle of a message ------------------------- */

static void record(int c, long seq, const char *buf)
{
	int n = sh->nrec[c];

	if (seq < 0 || n == SH_REC) {
		sh->bad[c] = seq;
		sh->bad_errno[c] = errno;
		memcpy(sh->bad_head[c], buf, sizeof(sh->bad_head[c]));
		_exit(1);
	}
	sh->rec[c][n] = seq;
	st(&sh->nrec[c], n + 1);
}

/* Reader @c exited with @status: tell what it saw if it failed. */
static void reader_check(int c, int status)
{
	int n = sh->nrec[c];
	uint32_t w[3];

	if (status) {
		memcpy(w, sh->bad_head[c], sizeof(w));
		TH_LOG("reader %d: status %d after %d messages (last %#x)",
		       c, status, n, n ? sh->rec[c][n - 1] : 0);
		TH_LOG("its last read: %ld errno %d, bytes %08x %08x %08x",
		       sh->bad[c], sh->bad_errno[c], ntohl(w[0]), ntohl(w[1]),
		       ntohl(w[2]));
	}
	ASSERT_EQ(status, 0);
}

/*
 * Reads @r0 messages and the header and a bit of the next one, stops
 * reading until told to, then resets.
 */
static void tx_reader0(int fd, int r0)
{
	char buf[MSG_MAX] = { 0 };
	long end;
	int i;

	for (i = 0; i < r0; i++)
		record(0, tcp_read_msg(fd, buf), buf);
	if (kcm_u_read_full(fd, buf, KCM_U_HDR + 8))
		_exit(2);
	st(&sh->stopped, 1);
	end = now_ms() + TIMEO_MS;
	while (!ld(&sh->reset_now)) {
		if (now_ms() > end)
			_exit(3);
		usleep(1000);
	}
	reset_close(fd);
	_exit(0);
}

/* Waits until B's TCP socket @fd holds data it cannot send: a full window. */
static int wait_stuck(int fd)
{
	long end = now_ms() + TIMEO_MS;
	int q, prev = -1, stable = 0;

	while (now_ms() < end && stable < 500) {
		if (ioctl(fd, SIOCOUTQ, &q))
			return -1;
		stable = q > 0 && q == prev ? stable + 20 : 0;
		prev = q;
		usleep(20000);
	}
	return stable < 500 ? -1 : q;
}

/* Reads until the last message of both senders is in. */
static void tx_reader1(int fd, int after)
{
	int done[2] = { 0 }, s, n1;
	char buf[MSG_MAX] = { 0 };
	long seq;

	while (!done[0] || !done[1]) {
		seq = tcp_read_msg(fd, buf);
		record(1, seq, buf);
		s = seq >> 16;
		if (s > 1) {
			sh->bad[1] = seq;
			_exit(4);
		}
		n1 = ld(&sh->n1[s]);
		if (n1 >= 0 && (seq & 0xffff) == n1 + after - 1)
			done[s] = 1;
	}
	/* Every message is accounted for: nothing may follow. */
	if (kcm_poll1(fd, POLLIN, 300) & POLLIN) {
		sh->bad[1] = -4;
		_exit(5);
	}
	_exit(0);
}

static void tx_send(int fd, int s, int i)
{
	if (!send_seq(fd, (s << 16) | i))
		return;
	sh->send_err[s] = errno;
	st(&sh->send_fail[s], i);
	_exit(1);
}

/* Sends until the peer has reset, then, once B knows, @after more. */
static void tx_sender(int fd, int s, int after)
{
	struct sigaction sa = { .sa_handler = on_sigpipe,
				.sa_flags = SA_RESTART };
	int i;

	self = s;
	sigaction(SIGPIPE, &sa, NULL);
	for (i = 0; i < SH_MAX && ld(&sh->phase) < 1; i++)
		tx_send(fd, s, i);
	st(&sh->n1[s], i);
	wait_phase(2);
	for (after += i; i < after; i++)
		tx_send(fd, s, i);
	_exit(0);
}

/*
 * Two KCM sockets stream messages over two connections; the peer of the
 * first reads @r0 of them and part of the next one, stops reading until
 * the connection is full (its sender then waits for room in the middle of
 * a message), and resets.  Once B has seen the reset, each sender sends
 * @after more.
 *
 * What can be asserted: no message is torn or altered on either
 * connection, none arrives twice, one sender's messages keep their order
 * on each connection, and every message sent after the failure arrives on
 * the surviving connection.  A message sent before may be lost, but only
 * if it can have been written whole to the broken connection after the
 * last one its peer read (a message cut by the reset is sent again whole).
 */
static void tx_reset_run(int strict, int r0, int after)
{
	static unsigned char where[2][SH_MAX + 1000];
	int peer[2], local[2], fds[2], maxr0[2] = { -1, -1 }, lost[2] = { 0 };
	int last[2][2] = { { -1, -1 }, { -1, -1 } };
	int kcm, c, s, i, k, rev, err, n1;
	pid_t rd[2], snd[2];
	struct kcm_stats ks;
	struct env e;
	long t0;

	ASSERT_LT(after, 1000);
	shared_init();
	env_setup(&e);
	kcm = env_mux(&e, peer, local);
	/* Small buffers: the broken connection holds less. */
	k = 32768;
	ASSERT_OK(setsockopt(peer[0], SOL_SOCKET, SO_RCVBUF, &k, sizeof(k)));
	ASSERT_OK(setsockopt(local[0], SOL_SOCKET, SO_SNDBUF, &k, sizeof(k)));
	fds[0] = kcm;
	fds[1] = kcm_u_clone(kcm);
	ASSERT_GE(fds[1], 0);
	/* Each reader owns its peer: the first one's close resets. */
	rd[0] = spawn();
	if (!rd[0]) {
		close(peer[1]);
		tx_reader0(peer[0], r0);
	}
	close(peer[0]);
	rd[1] = spawn();
	if (!rd[1])
		tx_reader1(peer[1], after);
	close(peer[1]);
	for (s = 0; s < 2; s++) {
		snd[s] = spawn();
		if (!snd[s])
			tx_sender(fds[s], s, after);
	}

	for (t0 = now_ms(); !ld(&sh->stopped) && now_ms() < t0 + TIMEO_MS;)
		usleep(1000);
	ASSERT_TRUE(ld(&sh->stopped));
	k = wait_stuck(local[0]);
	TH_LOG("connection 0 full: %d bytes wait in B", k);
	ASSERT_GE(k, 1);
	st(&sh->reset_now, 1);
	reader_check(0, kcm_wait_child(rd[0]));
	st(&sh->phase, 1);
	t0 = now_ms();
	rev = kcm_poll1(local[0], 0, TIMEO_MS);
	TH_LOG("reset seen in B after %ld ms: revents %#x", now_ms() - t0,
	       rev);
	ASSERT_TRUE(rev & (POLLERR | POLLHUP));
	if (strict) {
		/* What an application that sees POLLERR reads right away. */
		err = kcm_wait_so_error(local[0], 2000);
		TH_LOG("SO_ERROR when B saw the reset: %d (%s)", err,
		       strerror(err));
		ASSERT_EQ(err, ECONNRESET);
	}
	for (s = 0; s < 2; s++) {
		while (ld(&sh->n1[s]) < 0 && ld(&sh->send_fail[s]) < 0 &&
		       now_ms() < t0 + TIMEO_MS)
			usleep(1000);
		if (ld(&sh->send_fail[s]) >= 0)
			TH_LOG("sender %d: send of message %d: %s", s,
			       sh->send_fail[s], strerror(sh->send_err[s]));
		ASSERT_LT(ld(&sh->send_fail[s]), 0);
		if (ld(&sh->n1[s]) < 0) {
			TH_LOG("sender %d still blocked in send() %ld ms after the reset",
			       s, now_ms() - t0);
			proc_log();
		}
		ASSERT_GE(ld(&sh->n1[s]), 0);
	}
	st(&sh->phase, 2);
	for (s = 0; s < 2; s++) {
		k = kcm_wait_child(snd[s]);
		if (ld(&sh->send_fail[s]) >= 0)
			TH_LOG("sender %d: send of message %d: %s", s,
			       sh->send_fail[s], strerror(sh->send_err[s]));
		ASSERT_EQ(k, 0);
	}
	reader_check(1, kcm_wait_child(rd[1]));
	if (!strict)
		err = kcm_u_getsockopt_int(local[0], SOL_SOCKET, SO_ERROR);

	for (c = 0; c < 2; c++) {
		for (k = 0; k < sh->nrec[c]; k++) {
			s = sh->rec[c][k] >> 16;
			i = sh->rec[c][k] & 0xffff;
			ASSERT_LT(s, 2);
			ASSERT_LT(i, sh->n1[s] + after);
			if (where[s][i])
				TH_LOG("sender %d message %d: on connection %d and %d",
				       s, i, where[s][i] - 1, c);
			ASSERT_EQ(where[s][i], 0);
			where[s][i] = 1 + c;
			ASSERT_GE(i, last[c][s] + 1);
			last[c][s] = i;
			if (!c)
				maxr0[s] = i;
		}
	}
	for (s = 0; s < 2; s++) {
		n1 = sh->n1[s];
		for (i = 0; i < n1 + after; i++) {
			if (i >= n1 && where[s][i] != 2)
				TH_LOG("sender %d message %d, sent after the reset: %s",
				       s, i, where[s][i] ? "on the broken connection" :
				       "lost");
			if (i >= n1)
				ASSERT_EQ(where[s][i], 2);
			if (where[s][i])
				continue;
			if (i <= maxr0[s])
				TH_LOG("sender %d message %d lost, but its peer read %d",
				       s, i, maxr0[s]);
			ASSERT_GE(i, maxr0[s] + 1);
			lost[s]++;
		}
	}
	TH_LOG("sent %d + %d before the reset, %d each after; read %d + %d",
	       sh->n1[0], sh->n1[1], after, sh->nrec[0], sh->nrec[1]);
	TH_LOG("lost with the broken connection: %d + %d", lost[0], lost[1]);
	if (!kcm_stats_read(&ks))
		TH_LOG("TX-Retries %llu, TX-Aborts %llu", ks.mux[KS_TX_RETRIES],
		       ks.psock[KP_TX_ABORTS]);
	TH_LOG("SIGPIPEs in the senders: %d + %d", sh->sigpipes[0],
	       sh->sigpipes[1]);
	if (strict) {
		ASSERT_EQ(sh->sigpipes[0] + sh->sigpipes[1], 0);
	} else {
		TH_LOG("SO_ERROR of the reset connection: %d (%s)", err,
		       strerror(err));
		ASSERT_TRUE(err == ECONNRESET || err == EPIPE);
	}
	close(fds[1]);
	close(kcm);
}

/* Failover: nothing torn, nothing twice, nothing sent after it lost. */
TEST_DIFFERS_MOSTLY(netem_tx_peer_reset_failover,
		    "a reset while the sender waits for TCP room strands its messages")
{
	tx_reset_run(0, 100, 300);
}

/* The same, smaller: SO_ERROR is the cause as soon as B sees POLLERR. */
TEST_DIFFERS(netem_tx_peer_reset_error,
	     "upstream posts EPIPE on a reset connection, not ECONNRESET")
{
	tx_reset_run(1, 20, 50);
}

/* Sends @k messages, half of the next one, waits until B has it all, resets. */
static void rx_peer0(int fd, int k, int paced)
{
	char buf[MSG_MAX];
	size_t len;
	int i;

	for (i = 0; i < k; i++) {
		len = build(buf, i);
		if (kcm_u_write_all(fd, buf, len) || (paced && wait_acked(fd)))
			_exit(1);
	}
	len = build(buf, k);
	if (kcm_u_write_all(fd, buf, len / 2) || wait_acked(fd))
		_exit(2);
	reset_close(fd);
	_exit(0);
}

/* Sends @n messages, the second half once B has seen the reset. */
static void rx_peer1(int fd, int n, int paced)
{
	char buf[MSG_MAX];
	int i;

	for (i = 0; i < n; i++) {
		if (i == n / 2)
			wait_phase(2);
		if (kcm_u_write_all(fd, buf, build(buf, 1 << 16 | i)) ||
		    (paced && wait_acked(fd)))
			_exit(1);
	}
	_exit(0);
}

/*
 * The peer of the first connection sends @k messages and half of one
 * more, then resets; the peer of the second sends @n messages, the second
 * half of them after B has seen the reset.  All @k whole messages were
 * acknowledged by B, so they arrive; the half message never does; the
 * second connection's messages all arrive, in order.
 */
static void rx_reset_run(int strict, int k, int n)
{
	int peer[2], local[2], got[2] = { 0 }, kcm, c, i, err, status;
	int reaped = 0, rev = 0;
	long end, seq, t_reset = 0;
	pid_t pid[2];
	struct env e;

	shared_init();
	env_setup(&e);
	kcm = env_mux(&e, peer, local);
	/*
	 * B sends nothing on the first connection: should netem drop the
	 * reset, a keepalive probe draws another.
	 */
	keepalive(local[0]);
	/* Each peer is owned by its child: the first one's close resets. */
	pid[0] = spawn();
	if (!pid[0]) {
		close(peer[1]);
		rx_peer0(peer[0], k, strict);
	}
	close(peer[0]);
	pid[1] = spawn();
	if (!pid[1])
		rx_peer1(peer[1], n, strict);
	close(peer[1]);

	end = now_ms() + 3 * TIMEO_MS;
	while (got[0] < k || got[1] < n) {
		if (now_ms() > end)
			TH_LOG("stuck: %d of %d, %d of %d messages, phase %d",
			       got[0], k, got[1], n, ld(&sh->phase));
		ASSERT_LT(now_ms(), end);
		if (kcm_poll1(kcm, POLLIN, 20) & POLLIN) {
			seq = kcm_read_msg(kcm, MSG_DONTWAIT);
			if (seq == -2 && errno == EAGAIN)
				continue;
			if (seq < 0)
				TH_LOG("after %d + %d messages: %ld errno %d",
				       got[0], got[1], seq, errno);
			ASSERT_GE(seq, 0);
			c = seq >> 16;
			i = seq & 0xffff;
			ASSERT_LT(c, 2);
			ASSERT_EQ(i, got[c]);
			/* The message cut by the reset is never delivered. */
			if (!c)
				ASSERT_LT(i, k);
			got[c]++;
		}
		if (!reaped && waitpid(pid[0], &status, WNOHANG) == pid[0]) {
			if (status)
				TH_LOG("peer 0: wait status %#x (exit 1: write failed, 2: no ack)",
				       status);
			ASSERT_EQ(status, 0);
			reaped = 1;
			t_reset = now_ms();
		}
		if (reaped && ld(&sh->phase) < 2) {
			rev = kcm_poll1(local[0], 0, 0);
			if (rev & (POLLERR | POLLHUP)) {
				TH_LOG("reset seen in B after %ld ms: revents %#x",
				       now_ms() - t_reset, rev);
				st(&sh->phase, 2);
			}
		}
	}
	ASSERT_EQ(kcm_wait_child(pid[1]), 0);
	ASSERT_EQ(ld(&sh->phase), 2);
	ASSERT_EQ(kcm_poll1(kcm, POLLIN, 300) & POLLIN, 0);
	err = kcm_u_getsockopt_int(local[0], SOL_SOCKET, SO_ERROR);
	TH_LOG("SO_ERROR of the reset connection: %d (%s)", err, strerror(err));
	if (strict)
		ASSERT_EQ(err, ECONNRESET);
	else
		ASSERT_TRUE(err == ECONNRESET || err == EPIPE);
	close(kcm);
}

/* A reset in the middle of an incoming message, with traffic on both. */
TEST_DIFFERS(netem_rx_peer_reset_midmessage,
	     "messages straddle segments: upstream mis-frames them")
{
	rx_reset_run(0, 500, 2000);
}

/* The same, one message per segment: SO_ERROR must be the cause. */
TEST_DIFFERS(netem_rx_peer_reset_error,
	     "upstream posts EPIPE on a reset connection, not ECONNRESET")
{
	rx_reset_run(1, 3, 40);
}

KCM_TEST_MAIN
