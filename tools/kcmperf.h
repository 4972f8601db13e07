/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kcmperf: what the files share.  kcmperf.c is the driver (options, the
 * timed run, the watchdog); kcmperf_core.c the helpers every mode uses
 * (errors, time, threads, counters, messages and their checks, TCP
 * pairs); kcmperf_kcm.c parser loading and mux set-up; kcmperf_stream.c
 * the TCP stream senders and readers (raw TCP, and the far end of every
 * mode); kcmperf_user.c the user-space framer; kcmperf_report.c the
 * key=value line.  One file per mode: kcmperf_rx.c, kcmperf_tx.c,
 * kcmperf_rr.c, kcmperf_scale.c, kcmperf_steer.c; kcmperf_uring.c the io_uring
 * reader (-U).
 * Loopback TCP, the KCM ioctls, the length parser and the clock come
 * from tools/lib/kcm/kcm_util.h.
 */
#ifndef KCMPERF_H
#define KCMPERF_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kcm_util.h"

#define HDR		16		/* length, source, sequence number */
#define TRAILER		8		/* the sequence number, complemented */
#define CHECK_STRIDE	4096		/* payload bytes between two samples */
#define MAX_SIZE	(64 << 20)
#define MAX_CONNS	64
#define MAX_KCMS	64
#define MAX_THREADS	(2 * MAX_CONNS * MAX_KCMS + 8)
#define PAT_SPAN	256		/* pattern offsets */
#define WRITE_BYTES	(256 << 10)	/* a stream sender's write() (tx) */
#define RX_WRITE_BYTES	(64 << 10)	/* a forked sender's write() (rx) */
#define RX_TIMEO_MS	50		/* SO_RCVTIMEO of a KCM reader */
#define TCP_RCVBUF_MSGS	16		/* SO_RCVBUF above 32 KB, in messages */
#define READ_MIN	(64 << 10)	/* smallest read() of a stream reader */
#define CHUNK_BYTES	(1 << 20)	/* user framer's receive chunks */
#define RING_SLOTS	65536		/* user framer's hand-off ring */
#define WORKER_BATCH	256		/* messages a worker takes at once */
#define USER_QLIMIT	(4 << 20)	/* default bytes queued per worker */
#define RESP_FLAG	0x80000000u	/* source of an answer (rr) */
#define TICK_MS		100		/* how often blocked threads look up */
#define RCV_SLACK	64		/* a longer message than sent is bad */
#define SCALE_MAX_CONNS	4096		/* scale: connections on one mux */
#define MAX_CONN_LIST	8		/* scale: values of -c */
#define SCALE_TCP_BUF	(32 << 10)	/* scale: default -T */

enum impl { IMPL_KCM, IMPL_USER, IMPL_RAW };
enum mode { MODE_RX, MODE_TX, MODE_RR, MODE_SCALE, MODE_STEER, MODE_COUNT };
enum parser { PARSER_EBPF, PARSER_CBPF, PARSER_LENFIELD, PARSER_DISTRO,
	      PARSER_CHECK };

extern const char * const impl_names[];
extern const char * const parser_names[];

/* A mode: what runs, and how its line is printed. */
struct perf_mode {
	const char *name;
	void (*setup)(void);		/* sockets and threads */
	int (*report)(bool watchdog);	/* 1: the run failed */
	int (*run)(void);		/* instead of set-up and timed run */
	bool fork_tx;			/* stream senders in a child process */
};

extern const struct perf_mode mode_rx, mode_tx, mode_rr, mode_scale;
extern const struct perf_mode mode_steer;
extern const struct perf_mode *const modes[MODE_COUNT];

struct options {
	enum impl impl;
	enum mode mode;
	size_t size;
	int conns;
	int conn_list[MAX_CONN_LIST];	/* scale: -c 1,10,100,1000 */
	int n_conn_list;
	enum mode dir;			/* scale: MODE_RX or MODE_TX */
	int kcms;
	double secs;
	double warm;
	unsigned long count;
	int rbatch;
	int kbatch;
	int uring;		/* -U: io_uring receives in flight */
	int sbatch;
	long rcvbuf;
	long tcp_rcvbuf;	/* -1: as the message size needs */
	double stall;
	bool verbose;
	bool ktls;		/* -K: kTLS on both ends of every connection */
	bool full_check;	/* -X: every payload byte, not samples */
	enum parser parser;
};

extern struct options opt;

/* One per thread, on a cache line of its own. */
struct counter {
	atomic_ulong ok;	/* messages received (sent, for senders) */
	atomic_ulong bad;
	atomic_int done;
} __attribute__((aligned(64)));

extern struct counter rxc[MAX_THREADS];	/* receivers, rr servers */
extern int n_rx, n_tx;

/*
 * What the senders share with this process: a sender process forked for
 * rx (fork_tx) writes here too, so it is a MAP_SHARED mapping.
 */
struct shared {
	struct counter txc[MAX_THREADS];	/* senders, rr clients */
	atomic_int tx_go;	/* forked senders: start */
	atomic_int tx_exit;	/* forked senders: close the connections */
	atomic_int tx_stop;	/* senders: stop at a message boundary */
	atomic_int tx_abort;	/* senders: stop now (stalled) */
	atomic_int first_err;
};

extern struct shared *sh;

extern atomic_int rx_stop;	/* receivers: stop */
extern atomic_int measuring;	/* rr clients: record latencies */
extern atomic_int rr_stalled;

extern char *pattern;
extern unsigned int per_buf;	/* messages in a sender's buffer */
extern int ncpus;

extern int *peer;		/* the connecting ends */
extern int *local;		/* the accepted ends */
extern int kfd[MAX_CONNS * MAX_KCMS];
extern int n_kfd;
extern int eff_rcvbuf;
extern int eff_tcp_rcvbuf;

/* What a receiver knows: the next sequence number of each source. */
struct checker {
	unsigned int nsrc;
	const char *who;
	uint64_t next[];
};

/* kcmperf.c */
void watchdog_arm(double secs);
void run_timed(double limit);

/* kcmperf_core.c */
void die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
void die_errno(const char *what) __attribute__((noreturn));
double now(void);
void sleep_s(double s);
void note_err(int err);
void futex_wait(atomic_int *addr, int val, int ms);
void futex_wake(atomic_int *addr);
void spawn(void *(*fn)(void *), void *arg);
void join_all(void);
void counters_reset(void);
unsigned long sum_ok(struct counter *c, int n);
unsigned long sum_bad(struct counter *c, int n);
int sum_done(struct counter *c, int n);
void count(struct counter *c, unsigned long *ok, unsigned long *bad, long src);

void pattern_init(void);
void msg_set_seq(char *p, uint64_t seq);
void msg_fill(char *p, uint32_t src, uint64_t seq);
char *msgs_build(uint32_t src, unsigned int n);
void show_bad(struct checker *ck, const char *p, size_t n, const char *why);
long msg_check(struct checker *ck, const char *p, size_t n, uint32_t flag);
struct checker *checker_new(unsigned int nsrc, const char *fmt, int i);

void set_int(int fd, int level, int name, int val);
int get_int(int fd, int level, int name);
void set_timeo(int fd, int name, double s);
void set_nonblock(int fd);
struct mmsghdr *mmsg_alloc(int n);
void mmsg_free(struct mmsghdr *mm);
void conns_alloc(int n);
void shared_init(void);
void thread_name(const char *fmt, long i);
void tcp_pairs(int n);
void tcp_rcvbuf(int fd);
bool write_all(int fd, const char *p, size_t len);

/* kcmperf_kcm.c */
extern double parser_ns;	/* a run of the eBPF parser; -1: unknown */

int kcm_parser(void);
int kcm_socks(void);
void attach_tcp(int kcm, int tcp, int prog);
int kcm_mux(const int *tcp, int n);
void kcm_proc_summary(void);

/* kcmperf_stream.c */
struct stream_rd {
	int fd;
	int idx;
	unsigned int nsrc;
	bool reply;
};

void *stream_sender(void *arg);
void *stream_reader(void *arg);
void stream_readers(const int *fds, unsigned int nsrc, bool reply);
void stream_epoll_reader(const int *fds);
void senders_fork(void);
void senders_go(void);
void senders_reap(void);

/* kcmperf_user.c */
void user_framer(void);

/* kcmperf_rx.c, kcmperf_tx.c, kcmperf_rr.c */
void setup_receivers(void);
void *kcm_reader(void *arg);
void *kcm_sender(void *arg);
void kcm_answer(int fd, char *p);

/* kcmperf_uring.c */
void *kcm_uring_reader(void *arg);

/* kcmperf_steer.c: -m steer, and the checks of the receiving workers */
uint32_t steer_src(uint32_t src, unsigned int i);
int steer_worker(const char *msg);
long rx_check(struct checker *ck, const char *p, size_t n);
struct checker *rx_checker(const char *fmt, int i);

/* kcmperf_report.c */
struct cpu {
	unsigned long long usr;		/* jiffies of all CPUs (/proc/stat) */
	unsigned long long sys;
	unsigned long long idle;	/* idle and iowait */
	unsigned long long total;
	double self;			/* seconds of this process (rusage) */
};

struct results {
	double t0, t1;
	struct cpu c0, c1;
	struct cpu ca0, ca1;		/* the whole run, until all is read */
	unsigned long got0, got1;
	unsigned long sent0, sent1;	/* what the senders counted */
	unsigned long sent, got, bad;
	bool stalled;
};

extern struct results res;

void cpu_read(struct cpu *c);
double busy_ns(const struct cpu *a, const struct cpu *b);
const char *err_name(void);
void err_save(void);
void print_common(double secs);
void print_cpu(void);
void report_reset(void);
bool report_begin(bool watchdog);
int report_msgs(bool watchdog, void (*extra)(double secs, unsigned long msgs));
int report_stream(bool watchdog);

#endif /* KCMPERF_H */
