// SPDX-License-Identifier: GPL-2.0
/*
 * kcmperf: how fast AF_KCM hands out whole messages, next to the framing
 * an application would otherwise write itself, and next to raw TCP.
 *
 * Modes (-m):
 *   rx  N loopback TCP connections feed one mux with M KCM sockets, each
 *       read by a thread of its own; a sender thread per connection
 *       writes length-prefixed messages, many per write(), so that the
 *       sender is not what is measured.
 *   tx  M KCM sockets send with send() or sendmmsg() (-S) over the N
 *       connections; a reader thread per TCP peer splits and checks.
 *   rr  one request at a time: a client writes a request on its TCP
 *       connection, the server receives it on a KCM socket and answers on
 *       the same socket, the client times the round trip.
 *
 * Implementations (-i), with the same threads, sockets and bytes:
 *   kcm   whatever kcm.ko is loaded (ours or the distribution's), with
 *         the parser of -P: the eBPF program of the documentation
 *         (upstream's only kind), the same in classic BPF, or the
 *         built-in length field parser (the last two are extensions of
 *         our module, attached with SIOCKCMATTACHEXT), or -P distro: a
 *         parser that frames correctly on the distribution's module,
 *         which hands the parser a TCP segment with the message at the
 *         offset it keeps in skb->cb (strp_msg, 68 bytes into struct
 *         sk_buff on 6.1 and 6.12, x86-64); the program reads that offset
 *         with bpf_probe_read_kernel() (needs CAP_PERFMON) and loads the
 *         length there.  It must not be used with our module, which puts
 *         the message at offset 0 (there it would read garbage and fail).
 *         -G N reads with KCM_RECV_BATCH (our extension): up to N whole
 *         messages per recvmsg(), split by the KCM_MSG_LENS lengths.
 *   user  what an application does without KCM.  rx and rr: one I/O
 *         thread polls the connections (epoll), reads at least 64 KB at
 *         a time into reference-counted 1 MB chunks, splits them at the
 *         length prefixes and hands each complete message, in place, to
 *         the next of M worker threads through a single-producer ring
 *         (batched publication, futex wake-ups only for a sleeping
 *         worker, a per-worker byte limit like SO_RCVBUF); a worker
 *         checks (rr: answers) and releases the chunk.  tx: the M threads
 *         share the connections, one writer at a time per connection.
 *   raw   the same bytes over plain TCP, one thread per connection that
 *         splits and checks in place: no hand-off at all, the ceiling.
 *
 * A message is a 4-byte big-endian length (of what follows), a 4-byte
 * source (connection or sending socket), an 8-byte sequence number per
 * source, then bytes of a fixed random pattern starting at an offset
 * that depends on the sequence number.  Every message is checked where it
 * is received: size, header, pattern, and sequence numbers increasing per
 * source, so a message that arrives cut, merged, shifted, duplicated or
 * reordered counts as bad.  After the timed window the senders stop at a
 * message boundary and the receivers must get every message sent; if
 * nothing moves for -W seconds the run has stalled.  A run with a bad or
 * lost message, or a stall, prints result=FAIL and exits 1.
 *
 * Output: one line of key=value pairs per run, e.g.
 *   impl=kcm mode=rx size=64 conns=2 kcms=2 ... msgs_per_s=... bad=0 result=ok
 *
 * CPU use comes from /proc/stat over the window: the share of all CPUs
 * busy in user (usr) and kernel, interrupts included (sys).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <linux/bpf.h>
#include <linux/futex.h>
#include <linux/kcm.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef AF_KCM
#define AF_KCM		41
#endif

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))
#define HDR		16		/* length, source, sequence number */
#define MAX_SIZE	(64 << 20)
#define MAX_CONNS	64
#define MAX_KCMS	64
#define MAX_THREADS	(2 * MAX_CONNS * MAX_KCMS + 8)
#define PAT_SPAN	256		/* pattern offsets */
#define WRITE_BYTES	(256 << 10)	/* a stream sender's write() */
#define READ_MIN	(64 << 10)	/* smallest read() of a stream reader */
#define CHUNK_BYTES	(1 << 20)	/* user framer's receive chunks */
#define RING_SLOTS	65536		/* user framer's hand-off ring */
#define WORKER_BATCH	256		/* messages a worker takes at once */
#define USER_QLIMIT	(4 << 20)	/* default bytes queued per worker */
#define RESP_FLAG	0x80000000u	/* source of an answer (rr) */
#define TICK_MS		100		/* how often blocked threads look up */
#define RCV_SLACK	64		/* a longer message than sent is bad */

enum impl { IMPL_KCM, IMPL_USER, IMPL_RAW };
enum mode { MODE_RX, MODE_TX, MODE_RR };

static const char * const impl_names[] = { "kcm", "user", "raw" };
static const char * const mode_names[] = { "rx", "tx", "rr" };

enum parser { PARSER_EBPF, PARSER_CBPF, PARSER_LENFIELD, PARSER_DISTRO };
static const char * const parser_names[] = {
	"ebpf", "cbpf", "lenfield", "distro"
};

static struct {
	enum impl impl;
	enum mode mode;
	size_t size;
	int conns;
	int kcms;
	double secs;
	double warm;
	unsigned long count;
	int rbatch;
	int kbatch;
	int sbatch;
	long rcvbuf;
	long tcp_rcvbuf;	/* -1: as the message size needs */
	double stall;
	bool verbose;
	enum parser parser;
} opt = {
	.impl = IMPL_KCM,
	.mode = MODE_RX,
	.size = 64,
	.conns = -1,
	.kcms = -1,
	.secs = 3,
	.warm = -1,
	.rbatch = 1,
	.kbatch = 1,
	.sbatch = 1,
	.tcp_rcvbuf = -1,
	.stall = 3,
};

/* One per thread, on a cache line of its own. */
struct counter {
	atomic_ulong ok;	/* messages received (sent, for senders) */
	atomic_ulong bad;
	atomic_int done;
} __attribute__((aligned(64)));

static struct counter rxc[MAX_THREADS];	/* receivers, rr servers */
static struct counter txc[MAX_THREADS];	/* senders, rr clients */
static int n_rx, n_tx;

static atomic_int tx_stop;	/* senders: stop at a message boundary */
static atomic_int tx_abort;	/* senders: stop now (stalled) */
static atomic_int rx_stop;	/* receivers: stop */
static atomic_int measuring;	/* rr clients: record latencies */
static atomic_int rr_stalled;
static atomic_int first_err;
static atomic_int bad_shown;

static char *pattern;
static unsigned int per_buf;	/* messages in a sender's buffer */
static int ncpus;

static pthread_t threads[MAX_THREADS];
static int n_threads;

static int peer[MAX_CONNS];	/* the connecting ends */
static int local[MAX_CONNS];	/* the accepted ends */
static int kfd[MAX_CONNS * MAX_KCMS];
static int n_kfd;
static int eff_rcvbuf;
static int eff_tcp_rcvbuf;

static void die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "kcmperf: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

static void die_errno(const char *what)
{
	die("%s: %s", what, strerror(errno));
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static void sleep_s(double s)
{
	struct timespec ts;

	if (s <= 0)
		return;
	ts.tv_sec = (time_t)s;
	ts.tv_nsec = (long)((s - ts.tv_sec) * 1e9);
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static void note_err(int err)
{
	int zero = 0;

	atomic_compare_exchange_strong(&first_err, &zero, err);
}

static void futex_wait(atomic_int *addr, int val, int ms)
{
	struct timespec ts = { .tv_sec = ms / 1000,
			       .tv_nsec = (ms % 1000) * 1000000L };

	syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, &ts, NULL, 0);
}

static void futex_wake(atomic_int *addr)
{
	syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void spawn(void *(*fn)(void *), void *arg)
{
	int err;

	if (n_threads == MAX_THREADS)
		die("too many threads");
	err = pthread_create(&threads[n_threads], NULL, fn, arg);
	if (err)
		die("pthread_create: %s", strerror(err));
	n_threads++;
}

static void join_all(void)
{
	while (n_threads)
		pthread_join(threads[--n_threads], NULL);
}

static unsigned long sum_ok(struct counter *c, int n)
{
	unsigned long s = 0;
	int i;

	for (i = 0; i < n; i++)
		s += atomic_load_explicit(&c[i].ok, memory_order_relaxed);
	return s;
}

static unsigned long sum_bad(struct counter *c, int n)
{
	unsigned long s = 0;
	int i;

	for (i = 0; i < n; i++)
		s += atomic_load_explicit(&c[i].bad, memory_order_relaxed);
	return s;
}

static int sum_done(struct counter *c, int n)
{
	int s = 0, i;

	for (i = 0; i < n; i++)
		s += atomic_load(&c[i].done);
	return s;
}

/* ------------------------------------------------------------ messages */

static void pattern_init(void)
{
	uint64_t x = 0x9e3779b97f4a7c15ull;
	size_t i, len = opt.size + PAT_SPAN;

	pattern = malloc(len);
	if (!pattern)
		die("out of memory");
	for (i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		pattern[i] = (char)(x >> 24);
	}
}

static size_t pat_off(uint64_t seq)
{
	return (seq % per_buf) & (PAT_SPAN - 1);
}

static void msg_set_seq(char *p, uint64_t seq)
{
	memcpy(p + 8, &seq, 8);
}

static void msg_fill(char *p, uint32_t src, uint64_t seq)
{
	uint32_t len = htonl(opt.size - 4);

	memcpy(p, &len, 4);
	memcpy(p + 4, &src, 4);
	msg_set_seq(p, seq);
	memcpy(p + HDR, pattern + pat_off(seq), opt.size - HDR);
}

/* @n messages of source @src with sequence numbers 0..n-1 */
static char *msgs_build(uint32_t src, unsigned int n)
{
	char *buf = malloc(n * opt.size);
	unsigned int i;

	if (!buf)
		die("out of memory");
	for (i = 0; i < n; i++)
		msg_fill(buf + i * opt.size, src, i);
	return buf;
}

/* What a receiver knows: the next sequence number of each source. */
struct checker {
	uint64_t next[MAX_CONNS * MAX_KCMS];
	unsigned int nsrc;
	const char *who;
};

static void show_bad(struct checker *ck, const char *p, size_t n,
		     const char *why)
{
	uint32_t len = 0, src = 0;
	uint64_t seq = 0;

	if (atomic_exchange(&bad_shown, 1) && !opt.verbose)
		return;
	if (n >= 4)
		memcpy(&len, p, 4);
	if (n >= 8)
		memcpy(&src, p + 4, 4);
	if (n >= HDR)
		memcpy(&seq, p + 8, 8);
	fprintf(stderr,
		"# kcmperf: bad message on %s: %s: %zu bytes, header length %u, source %u, seq %llu\n",
		ck->who, why, n, ntohl(len), src, (unsigned long long)seq);
}

/*
 * Checks message @p of @n bytes; @flag is the source bit it must carry
 * (RESP_FLAG on answers).  Returns its source, or -1 when it is bad.
 */
static long msg_check(struct checker *ck, const char *p, size_t n,
		      uint32_t flag)
{
	uint32_t len, src;
	uint64_t seq;

	if (n != opt.size) {
		show_bad(ck, p, n, "wrong size");
		return -1;
	}
	memcpy(&len, p, 4);
	memcpy(&src, p + 4, 4);
	memcpy(&seq, p + 8, 8);
	if (ntohl(len) != n - 4 || (src & RESP_FLAG) != flag ||
	    (src & ~RESP_FLAG) >= ck->nsrc) {
		show_bad(ck, p, n, "bad header");
		return -1;
	}
	src &= ~RESP_FLAG;
	if (seq < ck->next[src]) {
		show_bad(ck, p, n, "sequence number went back");
		return -1;
	}
	if (memcmp(p + HDR, pattern + pat_off(seq), n - HDR)) {
		show_bad(ck, p, n, "payload differs");
		return -1;
	}
	ck->next[src] = seq + 1;
	return src;
}

static struct checker *checker_new(unsigned int nsrc, const char *fmt, int i)
{
	struct checker *ck = calloc(1, sizeof(*ck));
	char *who;

	if (!ck || asprintf(&who, fmt, i) < 0)
		die("out of memory");
	ck->nsrc = nsrc;
	ck->who = who;
	return ck;
}

/* ------------------------------------------------------------ sockets */

static void set_int(int fd, int level, int name, int val)
{
	if (setsockopt(fd, level, name, &val, sizeof(val)))
		die_errno("setsockopt");
}

static int get_int(int fd, int level, int name)
{
	socklen_t len = sizeof(int);
	int val = 0;

	getsockopt(fd, level, name, &val, &len);
	return val;
}

static void set_timeo(int fd, int name, double s)
{
	struct timeval tv = { .tv_sec = (time_t)s,
			      .tv_usec = (long)((s - (time_t)s) * 1e6) };

	if (setsockopt(fd, SOL_SOCKET, name, &tv, sizeof(tv)))
		die_errno("setsockopt(SO_*TIMEO)");
}

static void set_nonblock(int fd)
{
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK))
		die_errno("fcntl(O_NONBLOCK)");
}

static void lo_up(void)
{
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (fd >= 0 && !ioctl(fd, SIOCGIFFLAGS, &ifr) &&
	    !(ifr.ifr_flags & IFF_UP)) {
		ifr.ifr_flags |= IFF_UP;
		ioctl(fd, SIOCSIFFLAGS, &ifr);
	}
	if (fd >= 0)
		close(fd);
}

static uint16_t port_of(int fd, bool remote)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);

	if (remote ? getpeername(fd, (struct sockaddr *)&sin, &len) :
		     getsockname(fd, (struct sockaddr *)&sin, &len))
		die_errno("getsockname");
	return ntohs(sin.sin_port);
}

/* @n loopback connections: peer[i] connected, local[i] accepted. */
static void tcp_pairs(int n)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	socklen_t len = sizeof(sin);
	int l, i, j, fd;

	lo_up();
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	l = socket(AF_INET, SOCK_STREAM, 0);
	if (l < 0 || bind(l, (struct sockaddr *)&sin, len) ||
	    listen(l, MAX_CONNS) || getsockname(l, (struct sockaddr *)&sin, &len))
		die_errno("loopback listener");
	for (i = 0; i < n; i++) {
		peer[i] = socket(AF_INET, SOCK_STREAM, 0);
		if (peer[i] < 0 ||
		    connect(peer[i], (struct sockaddr *)&sin, sizeof(sin)))
			die_errno("connect");
	}
	for (i = 0; i < n; i++) {
		fd = accept(l, NULL, NULL);
		if (fd < 0)
			die_errno("accept");
		for (j = 0; j < n; j++)
			if (port_of(peer[j], false) == port_of(fd, true))
				local[j] = fd;
	}
	close(l);
}

/* A receiving TCP socket: messages over 32 KB need a set SO_RCVBUF. */
static void tcp_rcvbuf(int fd)
{
	long want = opt.tcp_rcvbuf;

	if (want < 0)
		want = opt.size > (32 << 10) ? 4 * (long)opt.size : 0;
	if (want > INT_MAX / 2)
		want = INT_MAX / 2;
	if (want) {
		set_int(fd, SOL_SOCKET, SO_RCVBUF, (int)want);
		if (get_int(fd, SOL_SOCKET, SO_RCVBUF) < 2 * want)
			fprintf(stderr,
				"# kcmperf: TCP SO_RCVBUF %ld capped to %d: raise net.core.rmem_max\n",
				want, get_int(fd, SOL_SOCKET, SO_RCVBUF));
	}
	eff_tcp_rcvbuf = get_int(fd, SOL_SOCKET, SO_RCVBUF);
}

/* Where the distribution module keeps the message offset: struct sk_buff's
 * cb[] (at 40) holds struct sk_skb_cb, whose strp_msg.offset is at 28.
 */
#define DISTRO_STRP_OFFSET	68
#define BPF_FUNC_PROBE_READ_KERNEL	113

/*
 * The parser "return load_word(skb, 0) + 4;" as raw BPF instructions, or
 * for -P distro "return load_word(skb, strp_offset) + 4;".
 */
static int load_parser(void)
{
	struct bpf_insn doc[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_X, .dst_reg = 6,
		  .src_reg = 1 },
		{ .code = BPF_LD | BPF_W | BPF_ABS, .imm = 0 },
		{ .code = BPF_ALU64 | BPF_ADD | BPF_K, .imm = 4 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	struct bpf_insn distro[] = {
		/* r6 = skb; bpf_probe_read_kernel(fp - 8, 4, skb + 68) */
		{ .code = BPF_ALU64 | BPF_MOV | BPF_X, .dst_reg = 6,
		  .src_reg = 1 },
		{ .code = BPF_ALU64 | BPF_MOV | BPF_X, .dst_reg = 1,
		  .src_reg = 10 },
		{ .code = BPF_ALU64 | BPF_ADD | BPF_K, .dst_reg = 1, .imm = -8 },
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = 2, .imm = 4 },
		{ .code = BPF_ALU64 | BPF_MOV | BPF_X, .dst_reg = 3,
		  .src_reg = 6 },
		{ .code = BPF_ALU64 | BPF_ADD | BPF_K, .dst_reg = 3,
		  .imm = DISTRO_STRP_OFFSET },
		{ .code = BPF_JMP | BPF_CALL, .imm = BPF_FUNC_PROBE_READ_KERNEL },
		/* a failed read: r0 = 0, ask for more */
		{ .code = BPF_JMP | BPF_JEQ | BPF_K, .dst_reg = 0, .off = 2 },
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = 0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
		/* r0 = load_word(skb, offset) + 4 */
		{ .code = BPF_LDX | BPF_MEM | BPF_W, .dst_reg = 7,
		  .src_reg = 10, .off = -8 },
		{ .code = BPF_LD | BPF_W | BPF_IND, .src_reg = 7 },
		{ .code = BPF_ALU64 | BPF_ADD | BPF_K, .imm = 4 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	static char log[4096];
	union bpf_attr attr;
	int fd;

	memset(&attr, 0, sizeof(attr));
	attr.prog_type = BPF_PROG_TYPE_SOCKET_FILTER;
	if (opt.parser == PARSER_DISTRO) {
		attr.insns = (unsigned long)distro;
		attr.insn_cnt = ARRAY_SIZE(distro);
		attr.log_buf = (unsigned long)log;
		attr.log_size = sizeof(log);
		attr.log_level = 1;
	} else {
		attr.insns = (unsigned long)doc;
		attr.insn_cnt = ARRAY_SIZE(doc);
	}
	attr.license = (unsigned long)"GPL";
	fd = syscall(__NR_bpf, BPF_PROG_LOAD, &attr, sizeof(attr));
	if (fd < 0 && log[0])
		fprintf(stderr, "# kcmperf: verifier: %s\n", log);
	if (fd < 0)
		die_errno("bpf(BPF_PROG_LOAD)");
	return fd;
}

/* Attaches @tcp to the mux of @kcm with the parser of -P. */
static void attach_tcp(int kcm, int tcp, int prog)
{
	static struct sock_filter cbpf[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 0),
		BPF_STMT(BPF_ALU | BPF_ADD | BPF_K, 4),
		BPF_STMT(BPF_RET | BPF_A, 0),
	};
	struct kcm_attach_ext ext = { .fd = tcp };
	struct kcm_attach att = { .fd = tcp, .bpf_fd = prog };

	switch (opt.parser) {
	case PARSER_EBPF:
	case PARSER_DISTRO:
		if (ioctl(kcm, SIOCKCMATTACH, &att))
			die_errno("ioctl(SIOCKCMATTACH)");
		return;
	case PARSER_CBPF:
		ext.bpf_type = KCM_BPF_TYPE_PROG;
		ext.fprog.len = ARRAY_SIZE(cbpf);
		ext.fprog.filter = cbpf;
		break;
	case PARSER_LENFIELD:
		ext.bpf_type = KCM_PARSER_LENFIELD;
		ext.lenfield.width = 4;
		ext.lenfield.adjust = 4;
		break;
	}
	if (ioctl(kcm, SIOCKCMATTACHEXT, &ext))
		die_errno("ioctl(SIOCKCMATTACHEXT)");
}

/* A mux of opt.kcms KCM sockets (appended to kfd[]) with @tcp attached. */
static int kcm_mux(const int *tcp, int n)
{
	int first = n_kfd, i;
	int prog = opt.parser == PARSER_EBPF || opt.parser == PARSER_DISTRO ?
		   load_parser() : -1;

	for (i = 0; i < opt.kcms; i++) {
		struct kcm_clone clone;
		int fd;

		if (!i) {
			fd = socket(AF_KCM, SOCK_DGRAM, KCMPROTO_CONNECTED);
			if (fd < 0)
				die_errno("socket(AF_KCM) (is kcm.ko loaded?)");
		} else {
			if (ioctl(kfd[first], SIOCKCMCLONE, &clone))
				die_errno("ioctl(SIOCKCMCLONE)");
			fd = clone.fd;
		}
		if (opt.rcvbuf) {
			set_int(fd, SOL_SOCKET, SO_RCVBUF, (int)opt.rcvbuf);
			if (get_int(fd, SOL_SOCKET, SO_RCVBUF) < 2 * opt.rcvbuf)
				fprintf(stderr,
					"# kcmperf: KCM SO_RCVBUF %ld capped to %d: raise net.core.rmem_max\n",
					opt.rcvbuf,
					get_int(fd, SOL_SOCKET, SO_RCVBUF));
		}
		eff_rcvbuf = get_int(fd, SOL_SOCKET, SO_RCVBUF);
		kfd[n_kfd++] = fd;
	}
	for (i = 0; i < n; i++)
		attach_tcp(kfd[first], tcp[i], prog);
	if (prog >= 0)
		close(prog);
	return first;
}

/* Writes all of @len bytes, waiting for room; false on error or abort. */
static bool write_all(int fd, const char *p, size_t len)
{
	struct pollfd pfd = { .fd = fd, .events = POLLOUT };
	ssize_t n;

	while (len) {
		n = write(fd, p, len);
		if (n > 0) {
			p += n;
			len -= n;
		} else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			if (atomic_load(&tx_abort))
				return false;
			poll(&pfd, 1, TICK_MS);
		} else {
			note_err(n ? errno : EPIPE);
			return false;
		}
	}
	return true;
}

/* ------------------------------------------------------------ senders */

/*
 * Source @idx's messages over a stream, per_buf of them per write(); after
 * tx_stop it finishes the message it is in.  Counts whole messages.
 */
static void *stream_sender(void *arg)
{
	long idx = (long)arg;
	struct counter *c = &txc[idx];
	int fd = opt.mode == MODE_TX ? local[idx] : peer[idx];
	char *buf = msgs_build(idx, per_buf);
	size_t total, off, len, sent = 0;
	uint64_t base = 0, i;
	unsigned int n;
	ssize_t w;

	set_timeo(fd, SO_SNDTIMEO, TICK_MS / 1000.0);
	while (!atomic_load_explicit(&tx_stop, memory_order_relaxed)) {
		n = per_buf;
		if (opt.count && opt.count - base < n)
			n = opt.count - base;
		if (!n)
			break;
		if (base)
			for (i = 0; i < n; i++)
				msg_set_seq(buf + i * opt.size, base + i);
		total = n * opt.size;
		for (off = 0; off < total; off += w) {
			len = total - off;
			if (atomic_load_explicit(&tx_stop, memory_order_relaxed)) {
				len = (opt.size - off % opt.size) % opt.size;
				if (!len)
					goto out;
			}
			w = write(fd, buf + off, len);
			if (w > 0) {
				sent += w;
				atomic_store_explicit(&c->ok, sent / opt.size,
						      memory_order_relaxed);
				continue;
			}
			w = 0;
			if (errno == EAGAIN || errno == EINTR) {
				if (atomic_load(&tx_abort))
					goto out;
				continue;
			}
			note_err(errno);
			goto out;
		}
		base += n;
	}
out:
	atomic_store(&c->done, 1);
	free(buf);
	return NULL;
}

/* KCM socket @idx sends its messages, one send() or a sendmmsg() batch. */
static void *kcm_sender(void *arg)
{
	long idx = (long)arg;
	struct counter *c = &txc[idx];
	int fd = kfd[idx], batch = opt.sbatch, i, n;
	char *buf = msgs_build(idx, per_buf);
	struct mmsghdr *mm = calloc(batch, sizeof(*mm));
	struct iovec *iov = calloc(batch, sizeof(*iov));
	uint64_t seq = 0;
	char *p;

	if (!mm || !iov)
		die("out of memory");
	set_timeo(fd, SO_SNDTIMEO, TICK_MS / 1000.0);
	while (!atomic_load_explicit(&tx_stop, memory_order_relaxed)) {
		n = batch;
		if (opt.count && opt.count - seq < (uint64_t)n)
			n = opt.count - seq;
		if (!n)
			break;
		for (i = 0; i < n; i++) {
			p = buf + ((seq + i) % per_buf) * opt.size;
			msg_set_seq(p, seq + i);
			iov[i].iov_base = p;
			iov[i].iov_len = opt.size;
			mm[i].msg_hdr.msg_iov = &iov[i];
			mm[i].msg_hdr.msg_iovlen = 1;
		}
		if (n == 1)
			n = send(fd, iov[0].iov_base, opt.size, 0) ==
				(ssize_t)opt.size ? 1 : -1;
		else
			n = sendmmsg(fd, mm, n, 0);
		if (n > 0) {
			seq += n;
			atomic_store_explicit(&c->ok, seq, memory_order_relaxed);
		} else if (errno != EAGAIN && errno != EINTR) {
			note_err(errno);
			break;
		} else if (atomic_load(&tx_abort)) {
			break;
		}
	}
	atomic_store(&c->done, 1);
	free(iov);
	free(mm);
	free(buf);
	return NULL;
}

/* User-space tx: threads share the connections, one writer each. */
static pthread_mutex_t conn_lock[MAX_CONNS];

static void *user_sender(void *arg)
{
	long idx = (long)arg;
	struct counter *c = &txc[idx];
	char *buf = msgs_build(idx, per_buf);
	unsigned int turn = idx, slot, n, i;
	uint64_t seq = 0;
	int k, fd = -1;

	while (!atomic_load_explicit(&tx_stop, memory_order_relaxed)) {
		slot = seq % per_buf;
		n = opt.sbatch;
		if (n > per_buf - slot)
			n = per_buf - slot;
		if (opt.count && opt.count - seq < n)
			n = opt.count - seq;
		if (!n)
			break;
		for (i = 0; i < n; i++)
			msg_set_seq(buf + (slot + i) * opt.size, seq + i);
		/* the first free connection, else wait for the next one */
		for (k = 0; k < opt.conns; k++) {
			fd = (turn + k) % opt.conns;
			if (!pthread_mutex_trylock(&conn_lock[fd]))
				break;
		}
		if (k == opt.conns) {
			fd = turn % opt.conns;
			pthread_mutex_lock(&conn_lock[fd]);
		}
		turn++;
		if (!write_all(local[fd], buf + slot * opt.size,
			       n * opt.size)) {
			pthread_mutex_unlock(&conn_lock[fd]);
			break;
		}
		pthread_mutex_unlock(&conn_lock[fd]);
		seq += n;
		atomic_store_explicit(&c->ok, seq, memory_order_relaxed);
	}
	atomic_store(&c->done, 1);
	free(buf);
	return NULL;
}

/* ------------------------------------------------------------ receivers */

static void count(struct counter *c, unsigned long *ok, unsigned long *bad,
		  long src)
{
	if (src < 0)
		atomic_store_explicit(&c->bad, ++*bad, memory_order_relaxed);
	else
		atomic_store_explicit(&c->ok, ++*ok, memory_order_relaxed);
}

/* rr: send back the request at @p as its answer. */
static void kcm_answer(int fd, char *p)
{
	uint32_t src;

	memcpy(&src, p + 4, 4);
	src |= RESP_FLAG;
	memcpy(p + 4, &src, 4);
	while (send(fd, p, opt.size, 0) < 0) {
		if (errno != EAGAIN && errno != EINTR) {
			note_err(errno);
			break;
		}
		if (atomic_load(&rx_stop))
			break;
	}
}

/* The KCM_MSG_LENS control message of @mh: its lengths, or NULL. */
static const uint32_t *batch_lens(struct msghdr *mh, unsigned int *n)
{
	struct cmsghdr *cm;

	for (cm = CMSG_FIRSTHDR(mh); cm; cm = CMSG_NXTHDR(mh, cm)) {
		if (cm->cmsg_level != SOL_KCM || cm->cmsg_type != KCM_MSG_LENS)
			continue;
		*n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(uint32_t);
		return (const uint32_t *)CMSG_DATA(cm);
	}
	return NULL;
}

/*
 * KCM socket kfd[@idx] with KCM_RECV_BATCH (-G): each recvmsg() returns
 * up to opt.kbatch whole messages back to back; KCM_MSG_LENS splits them.
 * The lengths must account for every byte returned.
 */
static void *kcm_batch_reader(void *arg)
{
	long idx = (long)arg;
	struct counter *c = &rxc[idx];
	int fd = kfd[idx], nb = opt.kbatch;
	size_t cap = (size_t)nb * (opt.size + RCV_SLACK), ctl_len;
	struct checker *ck = checker_new(opt.conns, "kcm-%d", idx);
	unsigned long ok = 0, bad = 0;
	const uint32_t *lens;
	unsigned int n, i;
	struct msghdr mh;
	struct iovec iov;
	size_t off;
	char *buf, *ctl;
	long s;

	ctl_len = CMSG_SPACE(nb * sizeof(uint32_t));
	buf = malloc(cap);
	ctl = malloc(ctl_len);
	if (!buf || !ctl)
		die("out of memory");
	set_int(fd, SOL_KCM, KCM_RECV_BATCH, nb);
	set_timeo(fd, SO_RCVTIMEO, TICK_MS / 1000.0);
	set_timeo(fd, SO_SNDTIMEO, TICK_MS / 1000.0);
	while (!atomic_load_explicit(&rx_stop, memory_order_relaxed)) {
		iov.iov_base = buf;
		iov.iov_len = cap;
		memset(&mh, 0, sizeof(mh));
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		mh.msg_control = ctl;
		mh.msg_controllen = ctl_len;
		s = recvmsg(fd, &mh, 0);
		if (s < 0) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			note_err(errno);
			break;
		}
		if (!s) {
			note_err(EPIPE);
			break;
		}
		lens = batch_lens(&mh, &n);
		if (!lens || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
			show_bad(ck, buf, s, lens ? "truncated batch" : "no KCM_MSG_LENS");
			count(c, &ok, &bad, -1);
			continue;
		}
		for (i = 0, off = 0; i < n && off + lens[i] <= (size_t)s; i++) {
			long r = msg_check(ck, buf + off, lens[i], 0);

			count(c, &ok, &bad, r);
			if (r >= 0 && opt.mode == MODE_RR)
				kcm_answer(fd, buf + off);
			off += lens[i];
		}
		if (i != n || off != (size_t)s) {
			show_bad(ck, buf, s, "lengths do not add up");
			count(c, &ok, &bad, -1);
		}
	}
	atomic_store(&c->done, 1);
	free(ctl);
	free(buf);
	return NULL;
}

/* KCM socket kfd[@idx]: recv() or recvmmsg() whole messages; rr: answer. */
static void *kcm_reader(void *arg)
{
	long idx = (long)arg;
	struct counter *c = &rxc[idx];
	int fd = kfd[idx], nb = opt.rbatch, i, n;
	size_t cap = opt.size + RCV_SLACK;
	struct checker *ck = checker_new(opt.conns, "kcm-%d", idx);
	char *buf = malloc(nb * cap);
	struct mmsghdr *mm = calloc(nb, sizeof(*mm));
	struct iovec *iov = calloc(nb, sizeof(*iov));
	unsigned long ok = 0, bad = 0;
	long s;

	if (opt.kbatch > 1)
		return kcm_batch_reader(arg);
	if (!buf || !mm || !iov)
		die("out of memory");
	set_timeo(fd, SO_RCVTIMEO, TICK_MS / 1000.0);
	set_timeo(fd, SO_SNDTIMEO, TICK_MS / 1000.0);
	for (i = 0; i < nb; i++) {
		iov[i].iov_base = buf + i * cap;
		iov[i].iov_len = cap;
		mm[i].msg_hdr.msg_iov = &iov[i];
		mm[i].msg_hdr.msg_iovlen = 1;
	}
	while (!atomic_load_explicit(&rx_stop, memory_order_relaxed)) {
		if (nb == 1) {
			mm[0].msg_hdr.msg_flags = 0;
			s = recvmsg(fd, &mm[0].msg_hdr, 0);
			if (s >= 0)
				mm[0].msg_len = s;
			n = s < 0 ? -1 : 1;
		} else {
			n = recvmmsg(fd, mm, nb, MSG_WAITFORONE, NULL);
		}
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			note_err(errno);
			break;
		}
		for (i = 0; i < n; i++) {
			char *p = iov[i].iov_base;

			s = -1;
			if (mm[i].msg_hdr.msg_flags & MSG_TRUNC)
				show_bad(ck, p, mm[i].msg_len, "truncated");
			else
				s = msg_check(ck, p, mm[i].msg_len, 0);
			count(c, &ok, &bad, s);
			if (s >= 0 && opt.mode == MODE_RR)
				kcm_answer(fd, p);
		}
		if (!n) {
			note_err(EPIPE);
			break;
		}
	}
	atomic_store(&c->done, 1);
	free(iov);
	free(mm);
	free(buf);
	return NULL;
}

struct stream_rd {
	int fd;
	int idx;
	unsigned int nsrc;
	bool reply;
};

/*
 * Reads a TCP stream in large pieces, splits it at the length prefixes and
 * checks each message where it lies; with @reply, answers each one.
 */
static void *stream_reader(void *arg)
{
	struct stream_rd *rd = arg;
	struct counter *c = &rxc[rd->idx];
	struct checker *ck = checker_new(rd->nsrc, "tcp-%d", rd->idx);
	size_t cap = 2 * opt.size + READ_MIN, start = 0, end = 0, mlen;
	unsigned long ok = 0, bad = 0;
	uint32_t hdr, src;
	char *buf;
	ssize_t n;
	long s;

	if (cap < CHUNK_BYTES)
		cap = CHUNK_BYTES;
	buf = malloc(cap);
	if (!buf)
		die("out of memory");
	set_timeo(rd->fd, SO_RCVTIMEO, TICK_MS / 1000.0);
	while (!atomic_load_explicit(&rx_stop, memory_order_relaxed)) {
		mlen = 0;
		if (end - start >= 4) {
			memcpy(&hdr, buf + start, 4);
			mlen = 4 + (size_t)ntohl(hdr) - (end - start);
		}
		/* room for a large read, or for the rest of this message */
		if (cap - end < READ_MIN || cap - end < mlen) {
			memmove(buf, buf + start, end - start);
			end -= start;
			start = 0;
		}
		n = read(rd->fd, buf + end, cap - end);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n <= 0) {
			note_err(n ? errno : EPIPE);
			break;
		}
		end += n;
		while (end - start >= 4) {
			memcpy(&hdr, buf + start, 4);
			mlen = 4 + (size_t)ntohl(hdr);
			if (mlen > cap - READ_MIN) {
				show_bad(ck, buf + start, end - start,
					 "length out of range");
				count(c, &ok, &bad, -1);
				goto out;
			}
			if (end - start < mlen)
				break;
			s = msg_check(ck, buf + start, mlen, 0);
			count(c, &ok, &bad, s);
			if (rd->reply && s >= 0) {
				memcpy(&src, buf + start + 4, 4);
				src |= RESP_FLAG;
				memcpy(buf + start + 4, &src, 4);
				if (!write_all(rd->fd, buf + start, mlen))
					goto out;
			}
			start += mlen;
		}
		if (start == end) {
			start = 0;
			end = 0;
		}
	}
out:
	atomic_store(&c->done, 1);
	free(buf);
	return NULL;
}

/* ------------------------------------------------------------ user framer */

/*
 * Receive chunks: the I/O thread reads into one per connection and hands
 * out messages that lie in it; every message handed out holds a reference.
 */
struct chunk {
	atomic_int refs;
	size_t cap;
	struct chunk *next;
	char data[];
};

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct chunk *pool;

static struct chunk *chunk_get(size_t need)
{
	struct chunk *c = NULL;

	if (need <= CHUNK_BYTES) {
		need = CHUNK_BYTES;
		pthread_mutex_lock(&pool_lock);
		c = pool;
		if (c)
			pool = c->next;
		pthread_mutex_unlock(&pool_lock);
	}
	if (!c) {
		c = malloc(sizeof(*c) + need);
		if (!c)
			die("out of memory");
		c->cap = need;
	}
	atomic_init(&c->refs, 1);
	return c;
}

static void chunk_put(struct chunk *c, int refs)
{
	if (atomic_fetch_sub_explicit(&c->refs, refs, memory_order_acq_rel) !=
	    refs)
		return;
	if (c->cap != CHUNK_BYTES) {
		free(c);
		return;
	}
	pthread_mutex_lock(&pool_lock);
	c->next = pool;
	pool = c;
	pthread_mutex_unlock(&pool_lock);
}

struct desc {
	struct chunk *c;
	uint32_t off;
	uint32_t len;
	uint32_t src;
};

/* A worker's queue: single producer (the I/O thread), single consumer. */
struct wq {
	struct {			/* written by the I/O thread */
		atomic_uint tail;
		atomic_int wake;	/* futex the worker sleeps on */
		unsigned int next;	/* tail not published yet */
		unsigned int head_seen;
		unsigned long in;	/* bytes queued, ever */
		unsigned long out_seen;
	} __attribute__((aligned(64))) p;
	struct {			/* written by the worker */
		atomic_uint head;
		atomic_ulong out;	/* bytes taken, ever */
		atomic_int sleeping;
	} __attribute__((aligned(64))) c;
	struct desc *ring;
	int idx;
};

struct uconn {
	int fd;
	uint32_t src;
	struct chunk *c;
	size_t start;		/* first byte not handed out */
	size_t end;		/* bytes in c */
	int refs;		/* handed out, not yet added to c->refs */
	bool dead;
	pthread_mutex_t wlock;	/* rr: one answer at a time */
};

static struct wq wqs[MAX_KCMS];
static struct uconn uconns[MAX_CONNS];
static unsigned long qlimit;
static unsigned int next_wq;
static atomic_int space_seq;	/* futex the I/O thread waits on */
static atomic_int io_waiting;
static unsigned long io_bad;

static bool wq_room(struct wq *q)
{
	if (q->p.next - q->p.head_seen < RING_SLOTS &&
	    (q->p.in - q->p.out_seen < qlimit || q->p.in == q->p.out_seen))
		return true;
	q->p.head_seen = atomic_load_explicit(&q->c.head, memory_order_acquire);
	q->p.out_seen = atomic_load_explicit(&q->c.out, memory_order_acquire);
	return q->p.next - q->p.head_seen < RING_SLOTS &&
	       (q->p.in - q->p.out_seen < qlimit || q->p.in == q->p.out_seen);
}

/* The next worker in turn with room, skipping full ones (as KCM does). */
static struct wq *wq_pick(void)
{
	unsigned int i;
	struct wq *q;

	for (i = 0; i < (unsigned int)opt.kcms; i++) {
		q = &wqs[(next_wq + i) % opt.kcms];
		if (wq_room(q)) {
			next_wq = q->idx + 1;
			return q;
		}
	}
	return NULL;
}

static void wq_publish(struct wq *q)
{
	if (atomic_load_explicit(&q->p.tail, memory_order_relaxed) == q->p.next)
		return;
	atomic_store(&q->p.tail, q->p.next);
	if (atomic_load(&q->c.sleeping)) {
		atomic_fetch_add(&q->p.wake, 1);
		futex_wake(&q->p.wake);
	}
}

/* References first: a worker may drop its own as soon as it is published. */
static void io_publish(struct uconn *u)
{
	int i;

	if (u->refs) {
		atomic_fetch_add_explicit(&u->c->refs, u->refs,
					  memory_order_relaxed);
		u->refs = 0;
	}
	for (i = 0; i < opt.kcms; i++)
		wq_publish(&wqs[i]);
}

/* Every worker is full: stop reading until one makes room. */
static struct wq *io_wait_room(struct uconn *u)
{
	struct wq *q;
	int seq;

	io_publish(u);
	for (;;) {
		if (atomic_load(&rx_stop))
			return NULL;
		seq = atomic_load(&space_seq);
		atomic_store(&io_waiting, 1);
		q = wq_pick();
		if (!q)
			futex_wait(&space_seq, seq, TICK_MS);
		atomic_store(&io_waiting, 0);
		if (q)
			return q;
	}
}

static void io_kill(struct uconn *u, const char *why)
{
	struct checker ck = { .who = "user-io" };

	show_bad(&ck, u->c->data + u->start, u->end - u->start, why);
	io_bad++;
	atomic_store_explicit(&rxc[opt.kcms].bad, io_bad, memory_order_relaxed);
	u->dead = true;
}

/* Hands out the complete messages in u->c; false when the stream is bad. */
static bool io_split(struct uconn *u)
{
	struct desc *d;
	struct wq *q;
	uint32_t hdr;
	size_t mlen;

	while (u->end - u->start >= 4) {
		memcpy(&hdr, u->c->data + u->start, 4);
		mlen = 4 + (size_t)ntohl(hdr);
		if (mlen > MAX_SIZE) {
			io_publish(u);	/* what was handed out stands */
			io_kill(u, "length out of range");
			return false;
		}
		if (u->end - u->start < mlen)
			break;
		q = wq_pick();
		if (!q)
			q = io_wait_room(u);
		if (!q)
			return false;
		d = &q->ring[q->p.next++ & (RING_SLOTS - 1)];
		d->c = u->c;
		d->off = u->start;
		d->len = mlen;
		d->src = u->src;
		q->p.in += mlen;
		u->refs++;
		u->start += mlen;
	}
	io_publish(u);
	return true;
}

/* One read() on a readable connection; false when there is no more. */
static bool io_read(struct uconn *u)
{
	size_t avail = u->end - u->start, mlen = 0, room;
	struct chunk *nc;
	uint32_t hdr;
	ssize_t n;

	if (avail >= 4) {
		memcpy(&hdr, u->c->data + u->start, 4);
		mlen = 4 + (size_t)ntohl(hdr);
	}
	room = u->c->cap - u->end;
	if (!avail && atomic_load_explicit(&u->c->refs,
					   memory_order_acquire) == 1) {
		/* nothing handed out is still in use: start over */
		u->start = 0;
		u->end = 0;
		room = u->c->cap;
	}
	if (mlen ? room < mlen - avail : room < READ_MIN) {
		/* move the partial message to a fresh chunk that holds it */
		nc = chunk_get(mlen + READ_MIN);
		memcpy(nc->data, u->c->data + u->start, avail);
		chunk_put(u->c, 1);
		u->c = nc;
		u->start = 0;
		u->end = avail;
	}
	n = read(u->fd, u->c->data + u->end, u->c->cap - u->end);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return false;
	if (n <= 0) {
		note_err(n ? errno : EPIPE);
		u->dead = true;
		return false;
	}
	u->end += n;
	return io_split(u);
}

static void *user_io(void *arg)
{
	struct epoll_event ev[MAX_CONNS];
	int ep = epoll_create1(0), i, n, budget;
	struct uconn *u;

	(void)arg;
	if (ep < 0)
		die_errno("epoll_create1");
	for (i = 0; i < opt.conns; i++) {
		struct epoll_event e = { .events = EPOLLIN,
					 .data.ptr = &uconns[i] };

		if (epoll_ctl(ep, EPOLL_CTL_ADD, uconns[i].fd, &e))
			die_errno("epoll_ctl");
	}
	while (!atomic_load_explicit(&rx_stop, memory_order_relaxed)) {
		n = epoll_wait(ep, ev, MAX_CONNS, TICK_MS);
		for (i = 0; i < n; i++) {
			u = ev[i].data.ptr;
			for (budget = 4; budget && io_read(u); budget--)
				;
			if (u->dead)
				epoll_ctl(ep, EPOLL_CTL_DEL, u->fd, NULL);
		}
	}
	close(ep);
	atomic_store(&rxc[opt.kcms].done, 1);
	return NULL;
}

static void wq_sleep(struct wq *q, unsigned int head)
{
	int seq = atomic_load(&q->p.wake);

	atomic_store(&q->c.sleeping, 1);
	if (atomic_load(&q->p.tail) == head && !atomic_load(&rx_stop))
		futex_wait(&q->p.wake, seq, TICK_MS);
	atomic_store(&q->c.sleeping, 0);
}

/* rr: the answer goes back on the request's connection. */
static void user_answer(struct desc *d)
{
	struct uconn *u = &uconns[d->src];
	char *p = d->c->data + d->off;
	uint32_t src;

	memcpy(&src, p + 4, 4);
	src |= RESP_FLAG;
	memcpy(p + 4, &src, 4);
	pthread_mutex_lock(&u->wlock);
	write_all(u->fd, p, d->len);
	pthread_mutex_unlock(&u->wlock);
}

static void *user_worker(void *arg)
{
	struct wq *q = arg;
	struct counter *c = &rxc[q->idx];
	struct checker *ck = checker_new(opt.conns, "worker-%d", q->idx);
	unsigned int head = 0, tail;
	unsigned long ok = 0, bad = 0, out = 0;
	struct chunk *held = NULL;
	int refs = 0;
	struct desc *d;
	long s;

	for (;;) {
		tail = atomic_load_explicit(&q->p.tail, memory_order_acquire);
		if (tail == head) {
			if (atomic_load(&rx_stop))
				break;
			wq_sleep(q, head);
			continue;
		}
		if (tail - head > WORKER_BATCH)
			tail = head + WORKER_BATCH;
		for (; head != tail; head++) {
			d = &q->ring[head & (RING_SLOTS - 1)];
			s = msg_check(ck, d->c->data + d->off, d->len, 0);
			count(c, &ok, &bad, s);
			if (s >= 0 && opt.mode == MODE_RR)
				user_answer(d);
			out += d->len;
			if (d->c != held) {
				if (held)
					chunk_put(held, refs);
				held = d->c;
				refs = 0;
			}
			refs++;
		}
		chunk_put(held, refs);
		held = NULL;
		atomic_store_explicit(&q->c.out, out, memory_order_release);
		atomic_store(&q->c.head, head);
		if (atomic_load(&io_waiting)) {
			atomic_fetch_add(&space_seq, 1);
			futex_wake(&space_seq);
		}
	}
	atomic_store(&c->done, 1);
	return NULL;
}

/* I/O thread over local[], opt.kcms workers; counters rxc[0..kcms]. */
static void user_framer(void)
{
	int i;

	qlimit = opt.rcvbuf ? opt.rcvbuf : USER_QLIMIT;
	eff_rcvbuf = qlimit;
	for (i = 0; i < opt.kcms; i++) {
		wqs[i].idx = i;
		wqs[i].ring = calloc(RING_SLOTS, sizeof(struct desc));
		if (!wqs[i].ring)
			die("out of memory");
		spawn(user_worker, &wqs[i]);
	}
	for (i = 0; i < opt.conns; i++) {
		uconns[i].fd = local[i];
		uconns[i].src = i;
		uconns[i].c = chunk_get(CHUNK_BYTES);
		pthread_mutex_init(&uconns[i].wlock, NULL);
		set_nonblock(local[i]);
	}
	n_rx = opt.kcms + 1;
	spawn(user_io, NULL);
}

/* ------------------------------------------------------------ rr clients */

struct rr_client {
	int idx;
	uint32_t *lat;		/* round trips in ns */
	size_t n;
	size_t cap;
};

static struct rr_client clients[MAX_CONNS];

static bool read_exact(int fd, char *p, size_t len)
{
	ssize_t n;

	while (len) {
		n = read(fd, p, len);
		if (n > 0) {
			p += n;
			len -= n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			atomic_store(&rr_stalled, 1);
		else
			note_err(n ? errno : EPIPE);
		return false;
	}
	return true;
}

static void *rr_client(void *arg)
{
	struct rr_client *cl = arg;
	struct counter *c = &txc[cl->idx];
	struct checker *ck = checker_new(opt.conns, "client-%d", cl->idx);
	int fd = peer[cl->idx];
	char *req = malloc(opt.size), *resp = malloc(opt.size);
	unsigned long ok = 0, bad = 0;
	uint64_t seq, t0, t;
	long s;

	if (!req || !resp)
		die("out of memory");
	set_timeo(fd, SO_RCVTIMEO, opt.stall);
	for (seq = 0; !atomic_load_explicit(&tx_stop, memory_order_relaxed) &&
	     (!opt.count || seq < opt.count); seq++) {
		msg_fill(req, cl->idx, seq);
		t0 = now_ns();
		if (!write_all(fd, req, opt.size) ||
		    !read_exact(fd, resp, opt.size))
			break;
		t = now_ns() - t0;
		ck->next[cl->idx] = seq;
		s = msg_check(ck, resp, opt.size, RESP_FLAG);
		if (s >= 0 && (s != cl->idx || memcmp(resp + 8, &seq, 8))) {
			show_bad(ck, resp, opt.size, "not the answer");
			s = -1;
		}
		count(c, &ok, &bad, s);
		if (!atomic_load_explicit(&measuring, memory_order_relaxed))
			continue;
		if (cl->n == cl->cap) {
			cl->cap = cl->cap ? 2 * cl->cap : 65536;
			cl->lat = realloc(cl->lat, cl->cap * sizeof(*cl->lat));
			if (!cl->lat)
				die("out of memory");
		}
		cl->lat[cl->n++] = t > UINT32_MAX ? UINT32_MAX : t;
	}
	atomic_store(&c->done, 1);
	free(req);
	free(resp);
	return NULL;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* ------------------------------------------------------------ results */

struct cpu {
	unsigned long long usr;
	unsigned long long sys;
	unsigned long long total;
};

static void cpu_read(struct cpu *c)
{
	unsigned long long v[8] = { 0 };
	FILE *f = fopen("/proc/stat", "r");

	memset(c, 0, sizeof(*c));
	if (!f)
		return;
	if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu",
		   &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) >= 4) {
		c->usr = v[0] + v[1];
		c->sys = v[2] + v[5] + v[6];
		c->total = v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
	}
	fclose(f);
}

static struct {
	double t0, t1;
	struct cpu c0, c1;
	unsigned long got0, got1;
	unsigned long sent, got, bad;
	bool stalled;
} res;

static atomic_int reported;

static const char *err_name(void)
{
	int err = atomic_load(&first_err);
	static char text[32];
	const char *name;
	int i;

	/* an error the kernel posted on a connection says more */
	for (i = 0; opt.impl == IMPL_KCM && i < opt.conns; i++) {
		int e = get_int(local[i], SOL_SOCKET, SO_ERROR);

		if (e) {
			err = e;
			break;
		}
	}
	if (!err)
		return "-";
	/* upstream can post a negative errno */
	name = strerrorname_np(err < 0 ? -err : err);
	if (name)
		snprintf(text, sizeof(text), "%s%s", err < 0 ? "-" : "", name);
	else
		snprintf(text, sizeof(text), "%d", err);
	return text;
}

static void print_cpu(void)
{
	double total = res.c1.total - res.c0.total;

	if (total <= 0)
		total = 1;
	printf(" cpu=%.1f usr=%.1f sys=%.1f cpus=%d",
	       100.0 * (res.c1.usr - res.c0.usr + res.c1.sys - res.c0.sys) / total,
	       100.0 * (res.c1.usr - res.c0.usr) / total,
	       100.0 * (res.c1.sys - res.c0.sys) / total, ncpus);
}

static void print_common(double secs)
{
	printf("impl=%s mode=%s size=%zu conns=%d kcms=%d rbatch=%d kbatch=%d sbatch=%d",
	       impl_names[opt.impl], mode_names[opt.mode], opt.size,
	       opt.conns, opt.kcms, opt.rbatch, opt.kbatch, opt.sbatch);
	printf(" rcvbuf=%d tcp_rcvbuf=%d secs=%.2f", eff_rcvbuf, eff_tcp_rcvbuf,
	       secs);
	if (opt.impl == IMPL_KCM)
		printf(" parser=%s", parser_names[opt.parser]);
}

static int report_rr(bool watchdog)
{
	double secs = res.t1 - res.t0;
	size_t n = 0, k, i;
	uint32_t *all;
	bool fail;
	int c;

	for (c = 0; c < opt.conns; c++)
		n += clients[c].n;
	all = malloc((n + 1) * sizeof(*all));
	if (!all)
		die("out of memory");
	for (c = 0, k = 0; c < opt.conns; c++)
		for (i = 0; i < clients[c].n; i++)
			all[k++] = clients[c].lat[i];
	qsort(all, n, sizeof(*all), cmp_u32);
	fail = res.bad || res.stalled || watchdog || !n;
	print_common(secs);
	printf(" reqs=%zu rps=%.0f", n, secs > 0 ? n / secs : 0);
	if (n)
		printf(" p50_us=%.1f p99_us=%.1f p999_us=%.1f max_us=%.1f",
		       all[(size_t)(n * 0.5)] / 1e3, all[(size_t)(n * 0.99)] / 1e3,
		       all[(size_t)(n * 0.999)] / 1e3, all[n - 1] / 1e3);
	print_cpu();
	printf(" bad=%lu stalled=%d err=%s result=%s%s\n", res.bad,
	       res.stalled || watchdog, err_name(), fail ? "FAIL" : "ok",
	       watchdog ? " note=watchdog" : "");
	free(all);
	return fail;
}

static int report(bool watchdog)
{
	double secs = res.t1 - res.t0;
	unsigned long msgs = res.got1 - res.got0, lost;
	bool fail;

	if (atomic_exchange(&reported, 1))
		return 1;
	if (watchdog) {
		/* rr clients stop growing their samples */
		atomic_store(&measuring, 0);
		usleep(10000);
		res.t1 = res.t1 ? res.t1 : now();
		secs = res.t1 - res.t0;
		if (!res.c1.total)
			cpu_read(&res.c1);
	}
	if (opt.mode == MODE_RR)
		return report_rr(watchdog);
	if (watchdog) {
		res.sent = sum_ok(txc, n_tx);
		res.got = sum_ok(rxc, n_rx);
		res.bad = sum_bad(rxc, n_rx);
		msgs = (res.got1 ? res.got1 : res.got) - res.got0;
	}
	lost = res.sent > res.got ? res.sent - res.got : 0;
	fail = res.bad || lost || res.stalled || watchdog;
	print_common(secs);
	printf(" msgs=%lu msgs_per_s=%.0f mb_per_s=%.2f", msgs,
	       secs > 0 ? msgs / secs : 0,
	       secs > 0 ? msgs * (double)opt.size / 1e6 / secs : 0);
	print_cpu();
	printf(" sent=%lu got=%lu bad=%lu lost=%lu stalled=%d err=%s result=%s%s\n",
	       res.sent, res.got, res.bad, lost, res.stalled || watchdog,
	       err_name(), fail ? "FAIL" : "ok",
	       watchdog ? " note=watchdog" : "");
	return fail;
}

/* Last resort: whatever hangs, a line is printed and the process ends. */
static void *watchdog_thread(void *arg)
{
	double limit = *(double *)arg;

	sleep_s(limit);
	fprintf(stderr, "# kcmperf: watchdog: no end after %.0f s\n", limit);
	report(true);
	fflush(stdout);
	_exit(1);
	return NULL;
}

/*
 * After tx_stop: wait until the receivers have every message the senders
 * finished, or until nothing has moved for opt.stall seconds.
 */
static bool drain(void)
{
	unsigned long sent, got, last = ~0ul;
	double since = now();

	for (;;) {
		sent = sum_ok(txc, n_tx);
		got = sum_ok(rxc, n_rx) + sum_bad(rxc, n_rx);
		if (sum_done(txc, n_tx) == n_tx && got >= sent)
			return true;
		if (sent + got != last) {
			last = sent + got;
			since = now();
		} else if (now() - since > opt.stall) {
			return false;
		}
		usleep(10000);
	}
}

/* ------------------------------------------------------------ setup */

static void setup_rx(void)
{
	static struct stream_rd rd[MAX_CONNS];
	long i;

	for (i = 0; i < opt.conns; i++)
		tcp_rcvbuf(local[i]);
	switch (opt.impl) {
	case IMPL_KCM:
		kcm_mux(local, opt.conns);
		for (i = 0; i < n_kfd; i++)
			spawn(kcm_reader, (void *)i);
		n_rx = n_kfd;
		break;
	case IMPL_USER:
		user_framer();
		break;
	case IMPL_RAW:
		for (i = 0; i < opt.conns; i++) {
			rd[i] = (struct stream_rd){ .fd = local[i], .idx = i,
						    .nsrc = opt.conns };
			spawn(stream_reader, &rd[i]);
		}
		n_rx = opt.conns;
		break;
	}
	for (i = 0; i < opt.conns; i++)
		spawn(stream_sender, (void *)i);
	n_tx = opt.conns;
}

static void setup_tx(void)
{
	static struct stream_rd rd[MAX_CONNS];
	unsigned int nsrc = opt.impl == IMPL_RAW ? opt.conns : opt.kcms;
	long i;

	for (i = 0; i < opt.conns; i++) {
		tcp_rcvbuf(peer[i]);
		rd[i] = (struct stream_rd){ .fd = peer[i], .idx = i,
					    .nsrc = nsrc };
		spawn(stream_reader, &rd[i]);
	}
	n_rx = opt.conns;
	switch (opt.impl) {
	case IMPL_KCM:
		kcm_mux(local, opt.conns);
		for (i = 0; i < n_kfd; i++)
			spawn(kcm_sender, (void *)i);
		n_tx = n_kfd;
		break;
	case IMPL_USER:
		for (i = 0; i < opt.conns; i++) {
			pthread_mutex_init(&conn_lock[i], NULL);
			set_timeo(local[i], SO_SNDTIMEO, TICK_MS / 1000.0);
		}
		for (i = 0; i < opt.kcms; i++)
			spawn(user_sender, (void *)i);
		n_tx = opt.kcms;
		break;
	case IMPL_RAW:
		for (i = 0; i < opt.conns; i++)
			spawn(stream_sender, (void *)i);
		n_tx = opt.conns;
		break;
	}
}

static void setup_rr(void)
{
	static struct stream_rd rd[MAX_CONNS];
	long i;

	for (i = 0; i < opt.conns; i++) {
		set_int(peer[i], IPPROTO_TCP, TCP_NODELAY, 1);
		set_int(local[i], IPPROTO_TCP, TCP_NODELAY, 1);
		tcp_rcvbuf(local[i]);
	}
	switch (opt.impl) {
	case IMPL_KCM:
		/* a mux per connection: the answer goes back on it */
		for (i = 0; i < opt.conns; i++)
			kcm_mux(&local[i], 1);
		for (i = 0; i < n_kfd; i++)
			spawn(kcm_reader, (void *)i);
		n_rx = n_kfd;
		break;
	case IMPL_USER:
		user_framer();
		break;
	case IMPL_RAW:
		for (i = 0; i < opt.conns; i++) {
			rd[i] = (struct stream_rd){ .fd = local[i], .idx = i,
						    .nsrc = opt.conns,
						    .reply = true };
			spawn(stream_reader, &rd[i]);
		}
		n_rx = opt.conns;
		break;
	}
	for (i = 0; i < opt.conns; i++) {
		clients[i].idx = i;
		spawn(rr_client, &clients[i]);
	}
	n_tx = opt.conns;
}

/* ------------------------------------------------------------ main */

static void help(int status)
{
	fprintf(status ? stderr : stdout,
		"usage: kcmperf [options]\n"
		"  -i, --impl kcm|user|raw  what frames the messages (kcm)\n"
		"  -m, --mode rx|tx|rr      direction, or request/response (rx)\n"
		"  -P ebpf|cbpf|lenfield|distro\n"
		"            kcm: the parser (ebpf; cbpf and lenfield need our\n"
		"            module's SIOCKCMATTACHEXT; distro frames correctly\n"
		"            on the distribution's module only)\n"
		"  -s SIZE   message size on the wire, header included, >= %d;\n"
		"            K and M suffixes (64)\n"
		"  -c N      TCP connections (rx, tx: 2; rr: 1)\n"
		"  -k M      KCM sockets per mux, user-space workers (rx, tx: 2; rr: 1)\n"
		"  -t SECS   measured time (3), after a warm-up (-w, SECS/6)\n"
		"  -n COUNT  messages per sender instead of a time\n"
		"  -R B      receive with recvmmsg(), B messages at a time (recv)\n"
		"  -G N      kcm: KCM_RECV_BATCH, up to N messages per recvmsg()\n"
		"  -S B      tx: sendmmsg() B messages (kcm), B per write (user)\n"
		"  -B BYTES  SO_RCVBUF of each KCM socket, user: bytes queued per\n"
		"            worker (default: untouched; user %d)\n"
		"  -T BYTES  SO_RCVBUF of the receiving TCP sockets (-1: 4x the\n"
		"            message size above 32 KB, else untouched)\n"
		"  -W SECS   stalled after SECS without progress (3)\n"
		"  -v        show every bad message\n"
		"Prints one line of key=value; exit 0 ok, 1 bad/lost/stalled, 2 error.\n",
		HDR, USER_QLIMIT);
	exit(status);
}

static unsigned long parse_size(const char *s)
{
	char *end;
	unsigned long v = strtoul(s, &end, 0);

	if (*end == 'k' || *end == 'K')
		v <<= 10, end++;
	else if (*end == 'm' || *end == 'M')
		v <<= 20, end++;
	if (end == s || *end)
		help(2);
	return v;
}

static int parse_name(const char *s, const char * const *names, int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (!strcmp(s, names[i]))
			return i;
	help(2);
	return 0;
}

static void parse_args(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "impl", required_argument, NULL, 'i' },
		{ "mode", required_argument, NULL, 'm' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int ch;

	while ((ch = getopt_long(argc, argv, "i:m:P:s:c:k:t:w:n:R:G:S:B:T:W:vh",
				 longopts, NULL)) != -1) {
		switch (ch) {
		case 'i':
			opt.impl = parse_name(optarg, impl_names, 3);
			break;
		case 'm':
			opt.mode = parse_name(optarg, mode_names, 3);
			break;
		case 'P':
			opt.parser = parse_name(optarg, parser_names,
						ARRAY_SIZE(parser_names));
			break;
		case 's':
			opt.size = parse_size(optarg);
			break;
		case 'c':
			opt.conns = atoi(optarg);
			break;
		case 'k':
			opt.kcms = atoi(optarg);
			break;
		case 't':
			opt.secs = atof(optarg);
			break;
		case 'w':
			opt.warm = atof(optarg);
			break;
		case 'n':
			opt.count = strtoul(optarg, NULL, 0);
			break;
		case 'R':
			opt.rbatch = atoi(optarg);
			break;
		case 'G':
			opt.kbatch = atoi(optarg);
			break;
		case 'S':
			opt.sbatch = atoi(optarg);
			break;
		case 'B':
			opt.rcvbuf = parse_size(optarg);
			break;
		case 'T':
			opt.tcp_rcvbuf = optarg[0] == '-' ? -1 :
					 (long)parse_size(optarg);
			break;
		case 'W':
			opt.stall = atof(optarg);
			break;
		case 'v':
			opt.verbose = true;
			break;
		case 'h':
			help(0);
			break;
		default:
			help(2);
		}
	}
	if (optind != argc)
		help(2);
	if (opt.conns < 0)
		opt.conns = opt.mode == MODE_RR ? 1 : 2;
	if (opt.kcms < 0)
		opt.kcms = opt.mode == MODE_RR ? 1 : 2;
	if (opt.warm < 0)
		opt.warm = opt.count ? 0 : opt.secs / 6;
	if (opt.rbatch < 1)
		opt.rbatch = 1;
	if (opt.sbatch < 1)
		opt.sbatch = 1;
	if (opt.kbatch < 1)
		opt.kbatch = 1;
	if (opt.size < HDR || opt.size > MAX_SIZE || opt.conns < 1 ||
	    opt.conns > MAX_CONNS || opt.kcms < 1 || opt.kcms > MAX_KCMS ||
	    opt.secs <= 0 || opt.stall <= 0 || opt.rcvbuf > INT_MAX / 2 ||
	    opt.rbatch > 1024 || opt.sbatch > 1024 || opt.kbatch > 4096 ||
	    (opt.kbatch > 1 && opt.rbatch > 1))
		help(2);
}

int main(int argc, char **argv)
{
	double limit;
	pthread_t wd;

	parse_args(argc, argv);
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	ncpus = sysconf(_SC_NPROCESSORS_ONLN);
	per_buf = WRITE_BYTES / opt.size;
	if (per_buf < (unsigned int)opt.sbatch)
		per_buf = opt.sbatch;
	if (!per_buf)
		per_buf = 1;
	pattern_init();
	tcp_pairs(opt.conns);

	limit = opt.count ? 600 : opt.warm + opt.secs + 2 * opt.stall + 15;
	if (pthread_create(&wd, NULL, watchdog_thread, &limit))
		die("pthread_create");

	if (opt.mode == MODE_RX)
		setup_rx();
	else if (opt.mode == MODE_TX)
		setup_tx();
	else
		setup_rr();

	res.t0 = now();
	sleep_s(opt.warm);
	res.got0 = opt.mode == MODE_RR ? 0 : sum_ok(rxc, n_rx);
	cpu_read(&res.c0);
	res.t0 = now();
	atomic_store(&measuring, 1);
	if (opt.count) {
		while (sum_done(txc, n_tx) < n_tx ||
		       (opt.mode != MODE_RR &&
			sum_ok(rxc, n_rx) + sum_bad(rxc, n_rx) < sum_ok(txc, n_tx))) {
			if (now() - res.t0 > limit - 10)
				break;
			usleep(1000);
		}
	} else {
		sleep_s(opt.secs);
	}
	res.got1 = opt.mode == MODE_RR ? 0 : sum_ok(rxc, n_rx);
	cpu_read(&res.c1);
	res.t1 = now();
	atomic_store(&measuring, 0);
	atomic_store(&tx_stop, 1);

	if (opt.mode != MODE_RR) {
		res.stalled = !drain();
		if (res.stalled)
			atomic_store(&tx_abort, 1);
	}
	/* rr clients give up by themselves after opt.stall */
	while (sum_done(txc, n_tx) < n_tx)
		usleep(10000);
	atomic_store(&rx_stop, 1);
	join_all();
	res.sent = sum_ok(txc, n_tx);
	res.got = sum_ok(rxc, n_rx);
	res.bad = sum_bad(rxc, n_rx) + sum_bad(txc, n_tx);
	if (opt.mode == MODE_RR) {
		res.stalled = atomic_load(&rr_stalled);
		res.sent = 0;
		res.got = 0;
	}
	return report(false);
}
