// SPDX-License-Identifier: GPL-2.0
/*
 * kcmperf: how fast AF_KCM hands out whole messages, next to the framing
 * an application would otherwise write itself, and next to raw TCP.
 *
 * Modes (-m):
 *   rx  N loopback TCP connections feed one mux with M KCM sockets, each
 *       read by a thread of its own (SO_RCVTIMEO 50 ms); a sender
 *       process, forked before any thread, has a thread per connection
 *       that writes pre-built length-prefixed messages, about 64 KB per
 *       write() (TCP_NODELAY), so that the sender is not what is
 *       measured.  TCP sizes both ends' buffers itself, but for
 *       messages over 32 KB, which need SO_RCVBUF (-T; 16 messages)
 *       from the listener.
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
 *   raw   the same bytes over plain TCP, split and checked in place: no
 *         hand-off at all, the ceiling.  rx: one thread epolls the
 *         connections and reads up to 1 MB a call; rr, and the peers of
 *         tx: a thread per connection.
 *
 * A message is a 4-byte big-endian length (of what follows), a 4-byte
 * source (connection or sending socket), an 8-byte sequence number per
 * source, then bytes of a fixed random pattern starting at an offset
 * that depends on the sequence number, and (from 24 bytes on) a trailer,
 * the sequence number complemented.  Every message is checked where it
 * is received: size, header, sequence numbers increasing per source,
 * trailer, and 8 bytes of the pattern every 4 KB (-X: all of it), so a
 * message that arrives cut, merged, shifted, duplicated or reordered
 * counts as bad.  After the timed window the senders stop at a
 * message boundary and the receivers must get every message sent; if
 * nothing moves for -W seconds the run has stalled.  A run with a bad or
 * lost message, or a stall, prints result=FAIL and exits 1.
 *
 * Output: one line of key=value pairs per run, e.g.
 *   impl=kcm mode=rx size=64 conns=2 kcms=2 ... msgs_per_s=... bad=0 result=ok
 *
 * CPU use comes from /proc/stat over the window: the share of all CPUs
 * busy in user (usr) and kernel, interrupts included (sys), the share
 * idle (idle), and the busy time of all CPUs over the window's messages
 * (cpu_ns_per_msg).  A run whose receivers are what is measured leaves
 * next to nothing idle.
 *
 * This file is the driver: options, the timed run and the watchdog; the
 * rest is listed in kcmperf.h.
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kcmperf.h"

const char * const impl_names[] = { "kcm", "user", "raw" };
const char * const parser_names[] = { "ebpf", "cbpf", "lenfield", "distro",
				      "check" };
const struct perf_mode *const modes[MODE_COUNT] = {
	[MODE_RX] = &mode_rx,
	[MODE_TX] = &mode_tx,
	[MODE_RR] = &mode_rr,
	[MODE_SCALE] = &mode_scale,
	[MODE_STEER] = &mode_steer,
};

struct options opt = {
	.impl = IMPL_KCM,
	.mode = MODE_RX,
	.size = 64,
	.conns = -1,
	.dir = MODE_RX,
	.kcms = -1,
	.secs = 3,
	.warm = -1,
	.rbatch = 1,
	.kbatch = 1,
	.sbatch = 1,
	.tcp_rcvbuf = -1,
	.stall = 3,
};

static int report(bool watchdog)
{
	if (!report_begin(watchdog))
		return 1;
	return modes[opt.mode]->report(watchdog);
}

static atomic_ullong wd_deadline;	/* kcm_u_now_ns() when it fires */
static atomic_ullong wd_ms;		/* what it was armed with */

/* Last resort: whatever hangs, a line is printed and the process ends. */
static void *watchdog_thread(void *arg)
{
	double left;

	(void)arg;
	while ((left = ((double)wd_deadline - kcm_u_now_ns()) / 1e9) > 0)
		sleep_s(left < 1 ? left : 1);
	fprintf(stderr, "# kcmperf: watchdog: no end after %.0f s\n",
		wd_ms / 1e3);
	report(true);
	fflush(stdout);
	_exit(1);
	return NULL;
}

/* The watchdog fires @secs from now (again, when already armed). */
void watchdog_arm(double secs)
{
	static pthread_t wd;

	wd_ms = secs * 1e3;
	wd_deadline = kcm_u_now_ns() + (uint64_t)(secs * 1e9);
	if (!wd && pthread_create(&wd, NULL, watchdog_thread, NULL))
		die("pthread_create");
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
		sent = sum_ok(sh->txc, n_tx);
		got = sum_ok(rxc, n_rx) + sum_bad(rxc, n_rx);
		if (sum_done(sh->txc, n_tx) == n_tx && got >= sent)
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

static void help(int status)
{
	fprintf(status ? stderr : stdout,
		"usage: kcmperf [options]\n"
		"  -i, --impl kcm|user|raw  what frames the messages (kcm)\n"
		"  -m, --mode rx|tx|rr|scale|steer\n"
		"            direction, request/response, connections axis, or rx\n"
		"            of keyed messages, each key at one worker (rx)\n"
		"  -P ebpf|cbpf|lenfield|distro|check\n"
		"            kcm: the parser (ebpf; cbpf and lenfield need our\n"
		"            module's SIOCKCMATTACHEXT; distro frames correctly\n"
		"            on the distribution's module only; check: an eBPF\n"
		"            parser that checks each header against an array\n"
		"            map, our module only)\n"
		"  -s SIZE   message size on the wire, header included, >= %d;\n"
		"            K and M suffixes (64)\n"
		"  -c N      TCP connections (rx, tx: 2; rr: 1); scale: a list\n"
		"            attached to one mux in turn (1,10,100,1000)\n"
		"  -d rx|tx  scale: KCM receives or sends (rx); -i user with rx:\n"
		"            epoll threads frame the receiving ends instead\n"
		"  -k M      KCM sockets per mux, user-space workers (rx, tx: 2; rr: 1)\n"
		"  -t SECS   measured time (3), after a warm-up (-w, SECS/6)\n"
		"  -n COUNT  messages per sender instead of a time\n"
		"  -R B      receive with recvmmsg(), B messages at a time (recv)\n"
		"  -G N      kcm: KCM_RECV_BATCH, up to N messages per recvmsg()\n"
		"  -U N      kcm: receive through io_uring, N recvs in flight\n"
		"  -S B      tx: sendmmsg() B messages (kcm), B per write (user)\n"
		"  -B BYTES  SO_RCVBUF of each KCM socket, user: bytes queued per\n"
		"            worker (default: untouched; user %d)\n"
		"  -T BYTES  SO_RCVBUF of the receiving TCP sockets (-1: %dx the\n"
		"            message size above 32 KB, else untouched; rx: set on\n"
		"            the listener; scale: %d, and SO_SNDBUF of its\n"
		"            writers)\n"
		"  -W SECS   stalled after SECS without progress (3)\n"
		"  -K        kernel TLS (1.3, AES-GCM-128, a test key) on both\n"
		"            ends of every connection: every mode reads and\n"
		"            writes through it\n"
		"  -X        check every payload byte of every message (else\n"
		"            the header, the trailer and 8 bytes every %d)\n"
		"  -v        show every bad message\n"
		"Prints one line of key=value (scale: one per N); exit 0 ok,\n"
		"1 bad/lost/stalled, 2 error.\n",
		HDR, USER_QLIMIT, TCP_RCVBUF_MSGS, SCALE_TCP_BUF,
		CHECK_STRIDE);
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

static enum mode parse_mode(const char *s)
{
	int i;

	for (i = 0; i < MODE_COUNT; i++)
		if (!strcmp(s, modes[i]->name))
			return i;
	help(2);
	return 0;
}

/* -c: one number, or for scale a comma-separated list. */
static void parse_conns(const char *s)
{
	char *end;
	long v;

	opt.n_conn_list = 0;
	do {
		v = strtol(s, &end, 10);
		if (end == s || v < 1 || v > SCALE_MAX_CONNS ||
		    opt.n_conn_list == MAX_CONN_LIST || (*end && *end != ','))
			help(2);
		opt.conn_list[opt.n_conn_list++] = v;
		s = end + 1;
	} while (*end);
	opt.conns = opt.conn_list[0];
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

	while ((ch = getopt_long(argc, argv, "i:m:P:s:c:d:k:t:w:n:R:G:S:B:T:W:U:KXvh",
				 longopts, NULL)) != -1) {
		switch (ch) {
		case 'i':
			opt.impl = parse_name(optarg, impl_names, 3);
			break;
		case 'm':
			opt.mode = parse_mode(optarg);
			break;
		case 'P':
			opt.parser = parse_name(optarg, parser_names,
						ARRAY_SIZE(parser_names));
			break;
		case 's':
			opt.size = parse_size(optarg);
			break;
		case 'c':
			parse_conns(optarg);
			break;
		case 'd':
			opt.dir = parse_mode(optarg);
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
		case 'U':
			opt.uring = atoi(optarg);
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
		case 'K':
			opt.ktls = true;
			break;
		case 'X':
			opt.full_check = true;
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
	if (opt.mode == MODE_SCALE && !opt.n_conn_list) {
		static const int axis[] = { 1, 10, 100, 1000 };

		memcpy(opt.conn_list, axis, sizeof(axis));
		opt.n_conn_list = ARRAY_SIZE(axis);
		opt.conns = axis[0];
	}
	/* scale: KCM both ways; the user framer as a baseline of rx */
	if (opt.mode == MODE_SCALE &&
	    ((opt.dir != MODE_RX && opt.dir != MODE_TX) ||
	     (opt.impl != IMPL_KCM &&
	      (opt.impl != IMPL_USER || opt.dir != MODE_RX))))
		help(2);
	if (opt.mode != MODE_SCALE && opt.n_conn_list > 1)
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
	    (opt.conns > MAX_CONNS && opt.mode != MODE_SCALE) ||
	    opt.kcms < 1 || opt.kcms > MAX_KCMS ||
	    opt.secs <= 0 || opt.stall <= 0 || opt.rcvbuf > INT_MAX / 2 ||
	    opt.rbatch > 1024 || opt.sbatch > 1024 || opt.kbatch > 4096 ||
	    (opt.kbatch > 1 && opt.rbatch > 1) || opt.uring < 0 ||
	    opt.uring > 4096 || (opt.uring && (opt.kbatch > 1 || opt.rbatch > 1)))
		help(2);
}

/*
 * The measured run of the threads set up: a warm-up, the window (-t, or
 * until -n messages went through), then the senders stop at a message
 * boundary and the receivers must get everything sent.  Fills res, with
 * the CPU of the whole run too.
 */
void run_timed(double limit)
{
	cpu_read(&res.ca0);
	res.t0 = now();
	sleep_s(opt.warm);
	res.got0 = opt.mode == MODE_RR ? 0 : sum_ok(rxc, n_rx);
	res.sent0 = sum_ok(sh->txc, n_tx);
	cpu_read(&res.c0);
	res.t0 = now();
	atomic_store(&measuring, 1);
	if (opt.count) {
		while (sum_done(sh->txc, n_tx) < n_tx ||
		       (opt.mode != MODE_RR &&
			sum_ok(rxc, n_rx) + sum_bad(rxc, n_rx) < sum_ok(sh->txc, n_tx))) {
			if (now() - res.t0 > limit - 10)
				break;
			usleep(1000);
		}
	} else {
		sleep_s(opt.secs);
	}
	res.got1 = opt.mode == MODE_RR ? 0 : sum_ok(rxc, n_rx);
	res.sent1 = sum_ok(sh->txc, n_tx);
	cpu_read(&res.c1);
	res.t1 = now();
	atomic_store(&measuring, 0);
	atomic_store(&sh->tx_stop, 1);

	if (opt.mode != MODE_RR) {
		res.stalled = !drain();
		if (res.stalled && opt.impl == IMPL_KCM)
			kcm_proc_summary();
		if (res.stalled)
			atomic_store(&sh->tx_abort, 1);
	}
	/* rr clients give up by themselves after opt.stall */
	while (sum_done(sh->txc, n_tx) < n_tx)
		usleep(10000);
	atomic_store(&rx_stop, 1);
	join_all();
	senders_reap();
	cpu_read(&res.ca1);
	res.sent = sum_ok(sh->txc, n_tx);
	res.got = sum_ok(rxc, n_rx);
	res.bad = sum_bad(rxc, n_rx) + sum_bad(sh->txc, n_tx);
	if (opt.mode == MODE_RR) {
		res.stalled = atomic_load(&rr_stalled);
		res.sent = 0;
		res.got = 0;
	}
}

int main(int argc, char **argv)
{
	double limit;

	parse_args(argc, argv);
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	ncpus = sysconf(_SC_NPROCESSORS_ONLN);
	shared_init();
	per_buf = (modes[opt.mode]->fork_tx ? RX_WRITE_BYTES : WRITE_BYTES) /
		  opt.size;
	if (per_buf < (unsigned int)opt.sbatch)
		per_buf = opt.sbatch;
	if (!per_buf)
		per_buf = 1;
	pattern_init();
	if (modes[opt.mode]->run)
		return modes[opt.mode]->run();
	conns_alloc(opt.conns);
	tcp_pairs(opt.conns);
	if (modes[opt.mode]->fork_tx)
		senders_fork();

	limit = opt.count ? 600 : opt.warm + opt.secs + 2 * opt.stall + 15;
	watchdog_arm(limit);

	modes[opt.mode]->setup();
	run_timed(limit);
	return report(false);
}
