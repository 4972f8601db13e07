// SPDX-License-Identifier: GPL-2.0
/*
 * What KCM holds is charged like TCP's: to the owner's memory cgroup and
 * to the protocol's pool (net.kcm.mem).
 *
 * Each test has a worker, nobody with no capabilities in a memory cgroup
 * limited to 64 MiB, own KCM sockets and the TCP connections attached to
 * them, and build one hostile pattern with them: muxes nobody reads, a
 * parser that always wants more, peers that stop reading or reset, open
 * messages.  The peers are the test's own (root, in an unlimited cgroup
 * of their own), as remote peers would be nobody's.  The test measures
 * the guest's used memory and both cgroups' charges before and while the
 * worker holds the most it can: their growths must agree (what KCM holds
 * is charged), the worker's cgroup must stay within its limit with no
 * task OOM-killed (KCM holds back the worker's connections, not the
 * system), a mux of the test's own must keep working, every message
 * accepted must come out intact once read, and everything must be given
 * back after close.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/filter.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "kcm_lib.h"
#include "kcm_data.h"

KCM_TEST_MAIN

#define MIB		(1L << 20)
#define CG_LIMIT	(64 * MIB)
/*
 * Growth of the guest's used memory that no cgroup sees.  Plain TCP
 * connections nobody reads (tcp_control) show how closely they agree;
 * the guest's own caches move it by up to about 4 MiB either way within
 * a test, so the bound is twice that, far under what one mux's worth of
 * uncharged messages per socket would add up to over 128 muxes.
 */
#define UNCHARGED_MAX	(8 * MIB)
/* How far charges in softirq (TCP's, forced) may take a cgroup over. */
#define OVER_LIMIT_MAX	(4 * MIB)
#define PLEN		1000	/* payload of the messages pushed */
#define CONNS_MAX	128
/*
 * SO_RCVBUF, SO_SNDBUF of the worker's TCP sockets: what TCP queues on
 * its own for 128 connections fits in what KCM leaves of the cgroup's
 * limit (2 MB), as an application sizes them for its cgroup.
 */
#define TCP_BUF		4096
#define PEER_BUF	65536	/* the peers' */
#define NO_MEM		"the distribution module charges nobody for what it holds"

/* ---- memory ----------------------------------------------------------- */

struct cg {
	char dir[256];
};

/*
 * Pages free but held in the page allocator's per-CPU lists, bytes: the
 * "count" of each CPU's pageset in /proc/zoneinfo.  MemFree leaves them
 * out; freed messages' pages land there first.
 */
static long mem_pcp(void)
{
	FILE *f = fopen("/proc/zoneinfo", "r");
	long pages = 0, v;
	char line[160];

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, " count: %ld", &v) == 1)
			pages += v;
	fclose(f);
	return pages * sysconf(_SC_PAGESIZE);
}

/* The value of @key in /proc/meminfo, bytes; -1 if none. */
static long mem_info(const char *key)
{
	char line[160], k[64];
	FILE *f = fopen("/proc/meminfo", "r");
	long v, ret = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%63[^:]: %ld", k, &v) == 2 && !strcmp(k, key))
			ret = v * 1024;
	fclose(f);
	return ret;
}

/*
 * Is this a KASAN kernel?  Its quarantine keeps freed slab objects for a
 * while, up to a thirty-second of memory: there the slab's growth is not
 * held memory (kmemleak, on the same kernels, looks for what is).
 */
static bool kasan_kernel(void)
{
	static int on = -1;
	char line[256];
	FILE *f;

	if (on >= 0)
		return on;
	on = 0;
	f = fopen("/proc/kallsyms", "r");
	if (!f)
		return false;
	while (!on && fgets(line, sizeof(line), f))
		on = !!strstr(line, " kasan_quarantine_reduce");
	fclose(f);
	return on;
}

/*
 * The guest's used memory, bytes: MemTotal - MemFree - Buffers - Cached,
 * less the free pages of the per-CPU lists, and on a KASAN kernel less
 * the slab.
 */
static long mem_used(void)
{
	long total = mem_info("MemTotal"), free = mem_info("MemFree");
	long buffers = mem_info("Buffers"), cached = mem_info("Cached");
	long used;

	if (total < 0 || free < 0 || buffers < 0 || cached < 0)
		return -1;
	used = total - free - buffers - cached - mem_pcp();
	return kasan_kernel() ? used - mem_info("Slab") : used;
}

/* The number in @cg's file @name, or the value of @key in it; -1 if none. */
static long cg_read(const struct cg *cg, const char *name, const char *key)
{
	char path[320], line[160], k[64];
	long v, ret = -1;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", cg->dir, name);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (!key) {
			ret = strtol(line, NULL, 10);
			break;
		}
		if (sscanf(line, "%63s %ld", k, &v) == 2 && !strcmp(k, key)) {
			ret = v;
			break;
		}
	}
	fclose(f);
	return ret;
}

static int cg_write(const struct cg *cg, const char *name, const char *val)
{
	char path[320];

	snprintf(path, sizeof(path), "%s/%s", cg->dir, name);
	return kcm_write_str(path, val);
}

/* Moves the calling process into @cg. */
static int cg_enter(const struct cg *cg)
{
	char pid[16];

	snprintf(pid, sizeof(pid), "%d", getpid());
	return cg_write(cg, "cgroup.procs", pid);
}

/* Where cgroup v2 is mounted: @root.  Mounts it on /sys/fs/cgroup if not. */
static int cg2_root(struct cg *root)
{
	char line[512], dev[128], dir[160], type[64];
	FILE *f = fopen("/proc/self/mounts", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%127s %159s %63s", dev, dir, type) == 3 &&
		    !strcmp(type, "cgroup2")) {
			fclose(f);
			snprintf(root->dir, sizeof(root->dir), "%s", dir);
			return 0;
		}
	}
	fclose(f);
	snprintf(root->dir, sizeof(root->dir), "/sys/fs/cgroup");
	return mount("cgroup2", root->dir, "cgroup2", 0, NULL);
}

/* Context: root.  A new cgroup @name under @root, limited to @limit. */
static void cg_make(const struct cg *root, struct cg *cg, const char *name,
		    const char *limit)
{
	snprintf(cg->dir, sizeof(cg->dir), "%.160s/kcm_mem.%d.%s", root->dir,
		 getpid(), name);
	ASSERT_OK(mkdir(cg->dir, 0755));
	ASSERT_OK(cg_write(cg, "memory.max", limit));
	/* No swap: what is charged stays in memory, and is measured. */
	cg_write(cg, "memory.swap.max", "0");
}

/* Context: root.  Memory cgroups can be made under @root, or a skip. */
static void cg_check(struct cg *root)
{
	char buf[512] = "";
	FILE *f;

	if (cg2_root(root))
		SKIP(return, "no cgroup v2: %s", strerror(errno));
	snprintf(buf, sizeof(buf), "%s/cgroup.controllers", root->dir);
	f = fopen(buf, "r");
	ASSERT_TRUE(f);
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = 0;
	fclose(f);
	if (!strstr(buf, "memory"))
		SKIP(return, "no memory controller in cgroup v2");
	ASSERT_OK(cg_write(root, "cgroup.subtree_control", "+memory"));
}

/* Context: root.  Removes @cg once the sockets charged to it died. */
static void cg_remove(const struct cg *cg)
{
	int i;

	for (i = 0; i < 500 && rmdir(cg->dir) && errno == EBUSY; i++)
		usleep(10000);
}

/* Pages TCP sockets hold, all namespaces: "mem" of /proc/net/sockstat. */
static long sockstat_tcp_mem(void)
{
	char line[256], *m;
	long v = -1;
	FILE *f = fopen("/proc/net/sockstat", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		m = strncmp(line, "TCP:", 4) ? NULL : strstr(line, " mem ");
		if (m)
			v = strtol(m + 5, NULL, 10);
	}
	fclose(f);
	return v;
}

/* ---- /proc/net/kcm_ext ------------------------------------------------ */

/* Sums @key over the kcm_ext lines of @kind ("mem", "mux", "psock"). */
static long long ext_sum(const char *kind, const char *key)
{
	size_t klen = strlen(kind);
	char line[2048];
	long long sum = 0, v;
	FILE *f = fopen("/proc/net/kcm_ext", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, kind, klen) || line[klen] != ' ')
			continue;
		line[strcspn(line, "\n")] = ' ';
		v = kcm_ext_num(line, key);
		if (v > 0)
			sum += v;
	}
	fclose(f);
	return sum;
}

/* ---- message streams -------------------------------------------------- */

/* A stream of messages written without blocking, PLEN bytes of payload. */
struct writer {
	char buf[KCM_U_HDR + PLEN];
	size_t len, off;
	uint32_t seq;		/* messages written whole */
	bool stop;		/* finish the message begun, start none */
	int flags;		/* more flags of send(): MSG_EOR */
};

/* Writes on until @fd is full; returns the bytes written, or -1. */
static long writer_push(struct writer *w, int fd)
{
	long total = 0;
	ssize_t n;

	for (;;) {
		if (!w->len) {
			if (w->stop)
				return total;
			w->len = kcm_u_msg_build(w->buf, PLEN, w->seq);
			w->off = 0;
		}
		n = send(fd, w->buf + w->off, w->len - w->off,
			 MSG_DONTWAIT | MSG_NOSIGNAL | w->flags);
		if (n < 0)
			return errno == EAGAIN ? total : -1;
		w->off += n;
		total += n;
		if (w->off == w->len) {
			w->seq++;
			w->len = 0;
		}
	}
}

/*
 * Pushes messages into the @n sockets @fds until none takes more for half
 * a second, or each took @cap bytes.  Return: the bytes they took.
 */
static long push_until_full(struct writer *w, const int *fds, int n,
			    long cap)
{
	uint64_t t0 = kcm_u_now_ns();
	long total = 0, round, got;
	int idle = 0, i;

	while (idle < 10 && kcm_u_ms_since(t0) < 30000) {
		round = 0;
		for (i = 0; i < n; i++) {
			if (fds[i] < 0 || (long)w[i].seq * PLEN >= cap)
				continue;
			got = writer_push(&w[i], fds[i]);
			ASSERT_GE(got, 0);
			round += got;
		}
		total += round;
		idle = round ? 0 : idle + 1;
		usleep(round ? 1000 : 50000);
	}
	return total;
}

/* ---- the worker: nobody, in the limited cgroup ------------------------ */

enum { P_NONE, P_LEN4, P_MORE };	/* the parser of the worker's muxes */

/* What the test asks of the worker. */
struct cmd {
	char op;	/* 'a'ttach, 'd'rain, 's'end, 'o'pen, 'e'xceed, 'c'lose */
	int n;			/* of 'a': connections */
	int type;		/* of 'a': SOCK_DGRAM, SOCK_SEQPACKET */
	int parser;		/* of 'a': P_* */
	int small;		/* of 'a': TCP buffers of TCP_BUF, not default */
	uint32_t want[CONNS_MAX];	/* of 'd': messages to read */
};

/* What the worker answers. */
struct reply {
	int err;		/* 0, or the line of what failed */
	long long bytes;	/* of 'o': bytes the open messages hold */
	uint32_t sent[CONNS_MAX];	/* of 's': messages sent */
	uint16_t ports[CONNS_MAX];	/* of 'a': remote ports, accept order */
};

struct worker {
	int to_test, from_test;	/* pipes: the worker's ends */
	int listener[2];	/* default TCP buffers, TCP_BUF */
	int n, kcm[CONNS_MAX], local[CONNS_MAX];
	struct writer w[CONNS_MAX];
	uint32_t got[CONNS_MAX];
	char buf[65536];	/* touched before the cgroup fills */
};

static struct sock_filter cbpf_len4[] = {
	BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 0),
	BPF_STMT(BPF_ALU | BPF_ADD | BPF_K, KCM_U_HDR),
	BPF_STMT(BPF_RET | BPF_A, 0),
};

/* "Need more", whatever the bytes. */
static struct sock_filter cbpf_more[] = {
	BPF_STMT(BPF_RET | BPF_K, 0),
};

static int attach_cbpf(int kcm, int fd, int parser)
{
	struct kcm_attach_ext att;

	memset(&att, 0, sizeof(att));
	att.fd = fd;
	att.bpf_type = KCM_BPF_TYPE_PROG;
	if (parser == P_LEN4) {
		att.fprog.len = ARRAY_SIZE(cbpf_len4);
		att.fprog.filter = cbpf_len4;
	} else {
		att.fprog.len = ARRAY_SIZE(cbpf_more);
		att.fprog.filter = cbpf_more;
	}
	return ioctl(kcm, SIOCKCMATTACHEXT, &att);
}

/*
 * 'a': accepts the test's @c->n connections, on the listener of small TCP
 * buffers or the one of default buffers, and attaches each to a KCM
 * socket of its own.
 */
static void worker_attach(struct worker *wk, const struct cmd *c,
			  struct reply *r)
{
	struct sockaddr_in sin;
	socklen_t len;
	int i;

	wk->n = c->n;
	for (i = 0; i < c->n; i++) {
		len = sizeof(sin);
		wk->local[i] = accept(wk->listener[c->small],
				      (struct sockaddr *)&sin, &len);
		ASSERT_GE(wk->local[i], 0);
		r->ports[i] = ntohs(sin.sin_port);
		wk->kcm[i] = -1;
		memset(&wk->w[i], 0, sizeof(wk->w[i]));
		wk->got[i] = 0;
		if (c->parser == P_NONE)
			continue;
		wk->kcm[i] = kcm_socket(c->type);
		ASSERT_GE(wk->kcm[i], 0);
		/* As much as nobody may ask for. */
		kcm_u_setsockopt_int(wk->kcm[i], SOL_SOCKET, SO_RCVBUF, 1 << 30);
		kcm_u_setsockopt_int(wk->kcm[i], SOL_SOCKET, SO_SNDBUF, 1 << 30);
		ASSERT_OK(attach_cbpf(wk->kcm[i], wk->local[i], c->parser));
		if (c->type == SOCK_SEQPACKET)
			wk->w[i].flags = MSG_EOR;
	}
}

/* 'd': reads each KCM socket's messages, intact and in order, to @want. */
static void worker_drain(struct worker *wk, const struct cmd *c)
{
	uint64_t t0 = kcm_u_now_ns();
	int i, left = wk->n;
	ssize_t n;

	while (left && kcm_u_ms_since(t0) < 60000) {
		left = 0;
		for (i = 0; i < wk->n; i++) {
			while (wk->got[i] < c->want[i]) {
				n = recv(wk->kcm[i], wk->buf, sizeof(wk->buf),
					 MSG_DONTWAIT);
				if (n < 0) {
					ASSERT_EQ(errno, EAGAIN);
					left++;
					break;
				}
				ASSERT_EQ(kcm_u_msg_check(wk->buf, n),
					  (long)wk->got[i]);
				wk->got[i]++;
			}
		}
		if (left)
			usleep(2000);
	}
	/* All of them, and nothing more. */
	for (i = 0; i < wk->n; i++) {
		ASSERT_EQ(wk->got[i], c->want[i]);
		ASSERT_ERRNO(recv(wk->kcm[i], wk->buf, sizeof(wk->buf),
				  MSG_DONTWAIT), EAGAIN);
	}
}

/* 's': sends on every KCM socket until none takes more. */
static void worker_send(struct worker *wk, struct reply *r)
{
	int i;

	push_until_full(wk->w, wk->kcm, wk->n, 1L << 40);
	for (i = 0; i < wk->n; i++)
		r->sent[i] = wk->w[i].seq;
}

/*
 * 'o': an open message (no end of record) on each SEQPACKET socket,
 * grown to nearly its send buffer, the bound of a message.
 */
static void worker_open(struct worker *wk, struct reply *r)
{
	const size_t chunk = 16384;
	long long mine;
	int i, sndbuf;
	ssize_t n;

	r->bytes = 0;
	for (i = 0; i < wk->n; i++) {
		/* Not the kernel's default, which may be anything (7.3: 8 MB). */
		sndbuf = 212992;
		ASSERT_OK(setsockopt(wk->kcm[i], SOL_SOCKET, SO_SNDBUF,
				     &sndbuf, sizeof(sndbuf)));
		sndbuf = kcm_u_getsockopt_int(wk->kcm[i], SOL_SOCKET,
					      SO_SNDBUF);
		for (mine = 0; mine + chunk <= (size_t)sndbuf; mine += n) {
			n = send(wk->kcm[i], wk->buf, chunk, MSG_DONTWAIT);
			if (n < 0)
				TH_LOG("socket %d: %s at %lld bytes of %d", i,
				       strerror(errno), mine, sndbuf);
			ASSERT_EQ(n, (ssize_t)chunk);
		}
		ASSERT_GT(mine, sndbuf / 2);
		r->bytes += mine;
	}
}

/* 'e': each open message outgrows the send buffer: it is dropped. */
static void worker_overgrow(struct worker *wk)
{
	int i;

	for (i = 0; i < wk->n; i++)
		ASSERT_ERRNO(send(wk->kcm[i], wk->buf, 16384, MSG_DONTWAIT),
			     EMSGSIZE);
}

static void worker_close(struct worker *wk)
{
	int i;

	for (i = 0; i < wk->n; i++) {
		if (wk->kcm[i] >= 0)
			close(wk->kcm[i]);
		close(wk->local[i]);
	}
	wk->n = 0;
}

/* The worker's life: commands until the test closes its pipe. */
static void worker_run(struct worker *wk)
{
	static struct reply r;
	static struct cmd c;
	struct sockaddr_in sin;
	int i;

	memset(wk->buf, 0, sizeof(wk->buf));
	for (i = 0; i < 2; i++) {
		wk->listener[i] = kcm_u_tcp_listener(&sin);
		ASSERT_GE(wk->listener[i], 0);
		ASSERT_EQ(write(wk->to_test, &sin.sin_port,
				sizeof(sin.sin_port)), sizeof(sin.sin_port));
	}
	/* Accepted sockets inherit them. */
	ASSERT_OK(kcm_u_setsockopt_int(wk->listener[1], SOL_SOCKET, SO_RCVBUF,
				       TCP_BUF));
	ASSERT_OK(kcm_u_setsockopt_int(wk->listener[1], SOL_SOCKET, SO_SNDBUF,
				       TCP_BUF));
	while (read(wk->from_test, &c, sizeof(c)) == sizeof(c)) {
		memset(&r, 0, sizeof(r));
		switch (c.op) {
		case 'a':
			worker_attach(wk, &c, &r);
			break;
		case 'd':
			worker_drain(wk, &c);
			break;
		case 's':
			worker_send(wk, &r);
			break;
		case 'o':
			worker_open(wk, &r);
			break;
		case 'e':
			worker_overgrow(wk);
			break;
		case 'c':
			worker_close(wk);
			break;
		default:
			ASSERT_TRUE(0);
		}
		ASSERT_EQ(write(wk->to_test, &r, sizeof(r)), sizeof(r));
	}
}

/* ---- the test's side: root, the peers, in an unlimited cgroup -------- */

struct test {
	struct cg root, limited, peers;
	pid_t pid;
	int to_worker, from_worker;
	in_port_t port[2];	/* the worker's listeners, network order */
	int n, peer[CONNS_MAX];
	struct writer w[CONNS_MAX];
	struct reply r;
};

/* The guest's used memory and both cgroups' charges, at one time. */
struct mem_snap {
	long used;		/* bytes the guest uses */
	long limited, peers;	/* memory.current */
	long sock;		/* the limited cgroup's memory.stat sock */
	long slab;		/* the guest's slab caches */
	long pcp;		/* the free pages of the per-CPU lists */
};

static void mem_snap(const struct test *t, struct mem_snap *s)
{
	/* Let what RCU or work items free land first. */
	usleep(300000);
	s->limited = cg_read(&t->limited, "memory.current", NULL);
	s->peers = cg_read(&t->peers, "memory.current", NULL);
	s->sock = cg_read(&t->limited, "memory.stat", "sock");
	s->used = mem_used();
	s->slab = mem_info("Slab");
	s->pcp = mem_pcp();
	ASSERT_GE(s->used, 0);
	ASSERT_GE(s->limited, 0);
	ASSERT_GE(s->peers, 0);
	ASSERT_GE(s->sock, 0);
}

/*
 * A baseline: the guest's used memory once what earlier tests freed has
 * stopped coming back (two snapshots within half a MiB).
 */
static void mem_settle(const struct test *t, struct mem_snap *s)
{
	struct mem_snap prev;
	int i;

	mem_snap(t, &prev);
	for (i = 0; i < 20; i++) {
		mem_snap(t, s);
		if (labs(s->used - prev.used) < MIB / 2)
			return;
		prev = *s;
	}
}

/*
 * The growth from @a to @b: logged, and what no cgroup was charged for
 * checked.  Return: the growth of the worker's cgroup.
 */
static long mem_check(const char *what, const struct mem_snap *a,
		      const struct mem_snap *b)
{
	long grew = b->used - a->used;
	long limited = b->limited - a->limited, peers = b->peers - a->peers;

	TH_LOG("%s: guest used %+.1f MiB; cgroups: worker %+.1f MiB",
	       what, (double)grew / MIB, (double)limited / MIB);
	TH_LOG("  (sock %+.1f MiB), peers %+.1f MiB; uncharged %+.1f MiB",
	       (double)(b->sock - a->sock) / MIB, (double)peers / MIB,
	       (double)(grew - limited - peers) / MIB);
	EXPECT_LE(grew - limited - peers, UNCHARGED_MAX);
	TH_LOG("  TCP holds %ld pages, KCM %lld", sockstat_tcp_mem(),
	       ext_sum("mem", "pages"));
	TH_LOG("  slab %+.1f MiB, free in per-CPU lists %+.1f MiB",
	       (double)(b->slab - a->slab) / MIB,
	       (double)(b->pcp - a->pcp) / MIB);
	return limited;
}

/* Sends @c to the worker and waits for its reply in @t->r. */
static void ask(struct test *t, const struct cmd *c)
{
	ASSERT_EQ(write(t->to_worker, c, sizeof(*c)), sizeof(*c));
	ASSERT_EQ(kcm_u_read_full(t->from_worker, &t->r, sizeof(t->r)), 0);
}

/*
 * Starts the worker: nobody, in a cgroup limited to 64 MiB; the test
 * moves into an unlimited one, where its peers are charged.
 */
static void test_begin(struct test *t)
{
	int to_worker[2], from_worker[2];
	static struct worker wk;

	memset(t, 0, sizeof(*t));
	cg_check(&t->root);
	kcm_enter_netns();
	ASSERT_OK(kcm_u_lo_up());
	cg_make(&t->root, &t->limited, "worker", "67108864");
	cg_make(&t->root, &t->peers, "peers", "max");
	ASSERT_OK(cg_enter(&t->peers));
	ASSERT_OK(pipe(to_worker));
	ASSERT_OK(pipe(from_worker));
	t->pid = fork();
	ASSERT_GE(t->pid, 0);
	if (!t->pid) {
		close(to_worker[1]);
		close(from_worker[0]);
		ASSERT_OK(cg_enter(&t->limited));
		kcm_drop_privileges();
		wk.from_test = to_worker[0];
		wk.to_test = from_worker[1];
		worker_run(&wk);
		fflush(stdout);
		_exit(kcm_test_failed ? KSFT_FAIL : KSFT_PASS);
	}
	close(to_worker[0]);
	close(from_worker[1]);
	t->to_worker = to_worker[1];
	t->from_worker = from_worker[0];
	ASSERT_EQ(kcm_u_read_full(t->from_worker, t->port, sizeof(t->port)),
		  0);
}

/*
 * A peer, with buffers of a bounded size: what the peers queue stays
 * well within TCP's memory (tcp_mem) with the worker's.
 */
static int peer_connect(const struct sockaddr_in *sin)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0)
		return -1;
	if (kcm_u_setsockopt_int(fd, SOL_SOCKET, SO_SNDBUF, PEER_BUF) ||
	    kcm_u_setsockopt_int(fd, SOL_SOCKET, SO_RCVBUF, PEER_BUF) ||
	    connect(fd, (const struct sockaddr *)sin, sizeof(*sin))) {
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * @n connections to the worker, which attaches each to a KCM socket of
 * @type with @parser, its TCP buffers small (TCP_BUF) or default; the
 * test's peers, in the order of the worker's.
 */
static void test_connect(struct test *t, int n, int type, int parser,
			 bool small)
{
	struct sockaddr_in sin = {
		.sin_family = AF_INET,
		.sin_port = t->port[small],
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK),
	};
	struct cmd c = {
		.op = 'a', .n = n, .type = type, .parser = parser,
		.small = small,
	};
	int fds[CONNS_MAX], i, j;
	socklen_t len;

	ASSERT_LE(n, CONNS_MAX);
	/* The worker accepts meanwhile: more than the listener's backlog. */
	ASSERT_EQ(write(t->to_worker, &c, sizeof(c)), sizeof(c));
	for (i = 0; i < n; i++) {
		fds[i] = peer_connect(&sin);
		ASSERT_GE(fds[i], 0);
	}
	ASSERT_EQ(kcm_u_read_full(t->from_worker, &t->r, sizeof(t->r)), 0);
	t->n = n;
	for (i = 0; i < n; i++) {
		t->peer[i] = -1;
		memset(&t->w[i], 0, sizeof(t->w[i]));
		for (j = 0; j < n; j++) {
			len = sizeof(sin);
			ASSERT_OK(getsockname(fds[j], (struct sockaddr *)&sin,
					      &len));
			if (ntohs(sin.sin_port) == t->r.ports[i])
				t->peer[i] = fds[j];
		}
		ASSERT_GE(t->peer[i], 0);
	}
}

/*
 * While the worker holds all it can: its cgroup is within its limit,
 * nothing was OOM-killed, and a mux of the test's own, outside that
 * cgroup, carries messages both ways.
 */
static void test_holding(struct test *t)
{
	int kcm, peer, local, i;
	char buf[2048];

	EXPECT_LE(cg_read(&t->limited, "memory.current", NULL),
		  CG_LIMIT + OVER_LIMIT_MAX);
	EXPECT_EQ(cg_read(&t->limited, "memory.events", "oom_kill"), 0);

	kcm = kcm_with_tcp(SOCK_DGRAM, &peer, &local);
	ASSERT_GE(kcm, 0);
	for (i = 0; i < 100; i++) {
		ASSERT_OK(kcm_send_msgs(peer, i, 1, 500));
		ASSERT_EQ(kcm_recv_check(kcm, buf, sizeof(buf)), i);
		kcm_u_msg_build(buf, 500, i);
		ASSERT_EQ(send(kcm, buf, KCM_U_HDR + 500, 0), KCM_U_HDR + 500);
		ASSERT_EQ(kcm_u_read_msg(peer, buf, sizeof(buf)),
			  KCM_U_HDR + 500);
		ASSERT_EQ(kcm_u_msg_check(buf, KCM_U_HDR + 500), i);
	}
	close(kcm);
	close(local);
	close(peer);
}

/*
 * The worker reads every message the peers wrote, intact and in order;
 * the peers finish the messages they began meanwhile.
 */
static void test_drain_to_worker(struct test *t)
{
	static struct cmd c = { .op = 'd' };
	uint64_t t0 = kcm_u_now_ns();
	int i, left = 1;

	for (i = 0; i < t->n; i++) {
		t->w[i].stop = true;
		c.want[i] = t->w[i].seq + !!t->w[i].len;
	}
	ASSERT_EQ(write(t->to_worker, &c, sizeof(c)), sizeof(c));
	while (left && kcm_u_ms_since(t0) < 60000) {
		left = 0;
		for (i = 0; i < t->n; i++) {
			ASSERT_GE(writer_push(&t->w[i], t->peer[i]), 0);
			left += !!t->w[i].len;
		}
		usleep(2000);
	}
	ASSERT_EQ(left, 0);
	ASSERT_EQ(kcm_u_read_full(t->from_worker, &t->r, sizeof(t->r)), 0);
}

static void test_close_peers(struct test *t)
{
	int i;

	for (i = 0; i < t->n; i++)
		if (t->peer[i] >= 0)
			close(t->peer[i]);
	t->n = 0;
}

/*
 * Ends the worker and checks all was given back: the guest's used memory
 * to within the margin of @a, nothing charged for sockets.
 */
static void test_end(struct test *t, const struct mem_snap *a)
{
	struct mem_snap z;
	int i, status;

	close(t->to_worker);
	status = kcm_wait_child(t->pid);
	close(t->from_worker);
	test_close_peers(t);
	for (i = 0; i < 30; i++) {
		mem_snap(t, &z);
		if (z.used - a->used < UNCHARGED_MAX && !z.sock)
			break;
	}
	mem_check("all closed", a, &z);
	EXPECT_LT(z.used - a->used, UNCHARGED_MAX);
	EXPECT_EQ(z.sock, 0);
	/* Every charge was given back, to the page. */
	EXPECT_EQ(ext_sum("mem", "pages"), 0);
	EXPECT_EQ(cg_read(&t->limited, "memory.events", "oom_kill"), 0);
	ASSERT_OK(cg_enter(&t->root));
	cg_remove(&t->limited);
	cg_remove(&t->peers);
	ASSERT_EQ(status, KSFT_PASS);
}

/* ---- the hostile patterns --------------------------------------------- */

/*
 * The control: plain TCP connections nobody reads.  TCP is accounted;
 * the measurement must say so.
 */
TEST_DIFFERS(tcp_control, NO_MEM)
{
	static const struct cmd close_all = { .op = 'c' };
	struct mem_snap a, b;
	struct test t;

	test_begin(&t);
	mem_settle(&t, &a);
	test_connect(&t, 32, SOCK_DGRAM, P_NONE, false);
	ASSERT_GT(push_until_full(t.w, t.peer, t.n, 8 * MIB), 1 * MIB);
	mem_snap(&t, &b);
	mem_check("32 TCP connections nobody reads", &a, &b);
	EXPECT_GT(b.sock - a.sock, 1 * MIB);
	test_holding(&t);
	ask(&t, &close_all);
	test_end(&t, &a);
}

/*
 * 128 muxes whose KCM sockets nobody reads: more than the cgroup allows
 * is offered; KCM holds what it may, charged, and pauses the rest.
 */
TEST_DIFFERS(unread_muxes, NO_MEM)
{
	static const struct cmd close_all = { .op = 'c' };
	long long short_, fail;
	struct mem_snap a, b;
	struct test t;

	alarm(300);
	test_begin(&t);
	mem_settle(&t, &a);
	test_connect(&t, 128, SOCK_DGRAM, P_LEN4, true);
	ASSERT_GT(push_until_full(t.w, t.peer, t.n, 4 * MIB), 16 * MIB);
	mem_snap(&t, &b);
	EXPECT_GT(mem_check("128 muxes nobody reads", &a, &b), 16 * MIB);
	/* The limit bit: KCM could not take all that was offered. */
	short_ = ext_sum("mux", "rx_mem_short");
	fail = ext_sum("psock", "rx_mem_fail");
	TH_LOG("rx_mem_short %lld, rx_mem_fail %lld; KCM sockets hold %lld pages",
	       short_, fail, ext_sum("mem", "pages"));
	EXPECT_GT(short_ + fail, 0);
	EXPECT_GT(ext_sum("mem", "pages"), 0);
	/* Who waits for memory shows: sockets and connections held back. */
	EXPECT_GT(ext_sum("kcm", "mem_short") + ext_sum("psock", "mem_short"),
		  0);
	test_holding(&t);
	test_drain_to_worker(&t);
	ask(&t, &close_all);
	test_end(&t, &a);
}

/*
 * 8 muxes whose parser always wants more: each psock assembles until its
 * bound (the TCP socket's receive buffer), charged all along.
 */
TEST_DIFFERS(need_more_parser, NO_MEM)
{
	static const struct cmd close_all = { .op = 'c' };
	struct mem_snap a, b;
	struct test t;

	alarm(120);
	test_begin(&t);
	mem_settle(&t, &a);
	test_connect(&t, 8, SOCK_DGRAM, P_MORE, false);
	ASSERT_GT(push_until_full(t.w, t.peer, t.n, 6 * MIB), 1 * MIB);
	mem_snap(&t, &b);
	mem_check("8 parsers wanting more", &a, &b);
	TH_LOG("psocks charged %lld bytes, rx_need_more %lld",
	       ext_sum("psock", "mem_charged"),
	       ext_sum("psock", "rx_need_more"));
	EXPECT_GT(ext_sum("psock", "rx_need_more"), 0);
	test_holding(&t);
	ask(&t, &close_all);
	test_end(&t, &a);
}

/*
 * 128 muxes sending to peers that never read; 32 of the peers then
 * reset.  What is queued is charged, and the other peers get every
 * message their mux took, intact and in order.
 */
TEST_DIFFERS(stalled_peers, NO_MEM)
{
	static const struct cmd send_all = { .op = 's' }, close_all = { .op = 'c' };
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };
	struct mem_snap a, b;
	static char buf[65536];
	struct test t;
	uint32_t seq;
	long n;
	int i;

	alarm(300);
	test_begin(&t);
	mem_settle(&t, &a);
	test_connect(&t, 128, SOCK_DGRAM, P_LEN4, true);
	ask(&t, &send_all);
	for (i = 0; i < 32; i++) {
		ASSERT_OK(setsockopt(t.peer[i], SOL_SOCKET, SO_LINGER, &lg,
				     sizeof(lg)));
		close(t.peer[i]);
		t.peer[i] = -1;
	}
	mem_snap(&t, &b);
	EXPECT_GT(mem_check("128 muxes to stalled peers, 32 reset", &a, &b),
		  8 * MIB);
	test_holding(&t);
	for (i = 32; i < t.n; i++) {
		kcm_u_set_timeo(t.peer[i], SO_RCVTIMEO, 20000);
		for (seq = 0; seq < t.r.sent[i]; seq++) {
			n = kcm_u_read_msg(t.peer[i], buf, sizeof(buf));
			ASSERT_EQ(kcm_u_msg_check(buf, n), seq);
		}
		ASSERT_ERRNO(recv(t.peer[i], buf, sizeof(buf), MSG_DONTWAIT),
			     EAGAIN);
	}
	ask(&t, &close_all);
	test_end(&t, &a);
}

/*
 * An open message (no end of record) on each of 32 SEQPACKET sockets,
 * grown to nearly the send buffer, is charged all along; past the send
 * buffer it is dropped, and its memory given back.
 */
TEST_DIFFERS(open_message, NO_MEM)
{
	static const struct cmd open_all = { .op = 'o' },
		exceed = { .op = 'e' }, close_all = { .op = 'c' };
	struct mem_snap a, b, c;
	long long bytes;
	struct test t;

	test_begin(&t);
	mem_settle(&t, &a);
	test_connect(&t, 32, SOCK_SEQPACKET, P_LEN4, true);
	ask(&t, &open_all);
	bytes = t.r.bytes;
	mem_snap(&t, &b);
	TH_LOG("open messages hold %lld bytes", bytes);
	EXPECT_GT(mem_check("32 open messages", &a, &b), bytes);
	EXPECT_GT(b.sock - a.sock, bytes);
	test_holding(&t);
	ask(&t, &exceed);
	mem_snap(&t, &c);
	mem_check("32 messages too long, dropped", &a, &c);
	EXPECT_LT(c.sock - a.sock, bytes / 8);
	ask(&t, &close_all);
	test_end(&t, &a);
}

/*
 * net.kcm.mem: KCM sockets together hold no more than its third value
 * (give or take the per-CPU reserves of socket accounting); the muxes
 * over it wait, and their messages arrive all the same.
 */
static void proto_limited(int knob)
{
	static const struct cmd close_all = { .op = 'c' };
	const long long hard = 2048, slack = 2 * 256 + 64;
	struct mem_snap a;
	long long pages;
	struct test t;

	test_begin(&t);
	mem_settle(&t, &a);
	ASSERT_EQ(pwrite(knob, "1024 1536 2048", 14, 0), 14);
	test_connect(&t, 64, SOCK_DGRAM, P_LEN4, true);
	/* At least half the limit's worth goes in before the peers wait. */
	ASSERT_GT(push_until_full(t.w, t.peer, t.n, 2 * MIB), hard * 4096 / 2);
	pages = ext_sum("mem", "pages");
	TH_LOG("KCM sockets hold %lld pages (limit %lld), rx_mem_short %lld",
	       pages, hard, ext_sum("mux", "rx_mem_short"));
	EXPECT_LE(pages, hard + slack);
	EXPECT_GT(ext_sum("mux", "rx_mem_short"), 0);
	test_drain_to_worker(&t);
	ask(&t, &close_all);
	test_end(&t, &a);
}

TEST_DIFFERS(protocol_limit, NO_MEM)
{
	char old[128] = "";
	int knob, status;
	pid_t pid;

	alarm(240);
	/* The knob is init_net's: opened before the test's namespace. */
	knob = open("/proc/sys/net/kcm/mem", O_RDWR);
	ASSERT_GE(knob, 0);
	ASSERT_GT(read(knob, old, sizeof(old) - 1), 0);
	/* The limit is restored however the test ends. */
	pid = fork();
	ASSERT_GE(pid, 0);
	if (!pid) {
		proto_limited(knob);
		fflush(stdout);
		_exit(kcm_test_failed ? KSFT_FAIL : KSFT_PASS);
	}
	status = kcm_wait_child(pid);
	ASSERT_EQ(pwrite(knob, old, strlen(old), 0), (ssize_t)strlen(old));
	close(knob);
	if (status == KSFT_SKIP)
		SKIP(return, "no memory cgroups");
	ASSERT_EQ(status, KSFT_PASS);
}
