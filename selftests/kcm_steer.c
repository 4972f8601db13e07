// SPDX-License-Identifier: GPL-2.0
/*
 * Steering by key (KCM_RECV_KEY, not in upstream Linux): 4 workers over 8
 * connections, every key's messages at exactly one worker and in the
 * order each connection sent them, whatever kind of key function (the
 * built-in field, classic BPF, eBPF, the connection) and whatever way of
 * reading (one per recv(), KCM_RECV_BATCH, SOCK_SEQPACKET); a worker that
 * closes or sets KCM_RECV_DISABLE moves only its keys, and its queued
 * messages in order; one that joins takes only keys from the others; a
 * stalled worker holds up only the connections that carry its keys, as
 * /proc/net/kcm_ext shows; bad parameters and programs; key functions
 * that fault, return garbage or "no key"; replacing and removing the
 * function while messages flow; unattaching a connection whose messages
 * wait for a worker.
 *
 * Messages are a 4-byte length, a 4-byte key, the connection's number,
 * the message's number among those of its key on its connection, then
 * bytes derived from all that, so that a message cut, merged or moved is
 * caught.  The distro module has no KCM_RECV_KEY (ENOPROTOOPT): every
 * test of it is a TEST_DIFFERS.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>

#include "kcm_data.h"

#define NO_KEY_OPT	"KCM_RECV_KEY fails with ENOPROTOOPT"

#define NW		4	/* workers */
#define NC		8	/* connections */
#define MAXW		8
#define NKEYS		64
#define HDR		16	/* length, key, connection, number */
#define MAXMSG		4096
#define DEADLINE_MS	20000

/* The header fields of a test message, after its length. */
struct tmsg {
	uint32_t key, conn, seq;
};

/* A mux of workers (KCM sockets) and connections. */
struct smux {
	int w[MAXW], nw;
	int peer[NC], local[NC], nc;
	int type;
};

/* What the workers received: who got each key, and how far each went. */
struct seen {
	int owner[NKEYS];		/* worker, -1: none yet */
	int conn_owner[NC];		/* worker, -1: none yet */
	uint32_t next[NC][NKEYS];	/* next number expected */
	long per_worker[MAXW];
	long total;
	int two_owners;			/* a key seen at two workers */
	int two_conn_owners;		/* a connection seen at two workers */
};

static char mbuf[1 << 20];

/* Forget who owned which key and connection, keep the numbering. */
static void seen_new_owners(struct seen *s)
{
	memset(s->owner, -1, sizeof(s->owner));
	memset(s->conn_owner, -1, sizeof(s->conn_owner));
	memset(s->per_worker, 0, sizeof(s->per_worker));
	s->two_owners = 0;
	s->two_conn_owners = 0;
}

static void seen_init(struct seen *s)
{
	memset(s, 0, sizeof(*s));
	seen_new_owners(s);
}

static unsigned char tbyte(const struct tmsg *m, size_t i)
{
	return (unsigned char)(m->key * 29 + m->conn * 7 + m->seq * 131 + i);
}

/* Message of @len bytes (at least HDR) to @buf; returns @len. */
static size_t tmsg_build(char *buf, size_t len, const struct tmsg *m)
{
	uint32_t v[4] = { htonl(len - 4), htonl(m->key), htonl(m->conn),
			  htonl(m->seq) };
	size_t i;

	memcpy(buf, v, HDR);
	for (i = HDR; i < len; i++)
		buf[i] = tbyte(m, i);
	return len;
}

/* Checks a whole message of @n bytes; fills @m; 0 or -1. */
static int tmsg_parse(const char *buf, size_t n, struct tmsg *m)
{
	uint32_t v[4];
	size_t i;

	if (n < HDR)
		return -1;
	memcpy(v, buf, HDR);
	if (ntohl(v[0]) + 4 != n)
		return -1;
	m->key = ntohl(v[1]);
	m->conn = ntohl(v[2]);
	m->seq = ntohl(v[3]);
	for (i = HDR; i < n; i++)
		if ((unsigned char)buf[i] != tbyte(m, i))
			return -1;
	return 0;
}

/* The size of message @i of a connection: mostly small, some large. */
static size_t tmsg_len(unsigned int i)
{
	return i % 97 == 5 ? 3000 : HDR + (i * 37) % 180;
}

/* ---- the mux ---------------------------------------------------------- */

static void smux_setup(struct smux *m, int type, int nw, int nc)
{
	int prog = kcm_u_parser_len4(), i;

	ASSERT_GE(prog, 0);
	memset(m, -1, sizeof(*m));
	m->type = type;
	m->nw = nw;
	m->nc = nc;
	m->w[0] = kcm_socket(type);
	ASSERT_GE(m->w[0], 0);
	for (i = 1; i < nw; i++) {
		m->w[i] = kcm_u_clone(m->w[0]);
		ASSERT_GE(m->w[i], 0);
	}
	for (i = 0; i < nc; i++) {
		ASSERT_OK(kcm_u_tcp_pair(&m->peer[i], &m->local[i]));
		ASSERT_OK(kcm_u_attach(m->w[0], m->local[i], prog));
	}
	close(prog);
}

static int set_key(int kcm, const struct kcm_recv_key *k, socklen_t len)
{
	return setsockopt(kcm, SOL_KCM, KCM_RECV_KEY, k, len);
}

/* The key field of the test messages: 4 bytes at 4, big endian. */
static int set_key_field(int kcm)
{
	struct kcm_recv_key k = { .key_type = KCM_KEY_FIELD };

	k.field.offset = 4;
	k.field.width = 4;
	k.field.byte_order = KCM_LENFIELD_BE;
	return set_key(kcm, &k, sizeof(k));
}

static int set_key_cbpf(int kcm, struct sock_filter *insns, unsigned short n)
{
	struct kcm_recv_key k = { .key_type = KCM_BPF_TYPE_PROG };

	k.fprog.len = n;
	k.fprog.filter = insns;
	return set_key(kcm, &k, sizeof(k));
}

static int set_key_type(int kcm, int type)
{
	struct kcm_recv_key k = { .key_type = type };

	return set_key(kcm, &k, sizeof(k));
}

/* The key field in classic BPF: A = word at 4; return A. */
static struct sock_filter cbpf_key4[] = {
	BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 4),
	BPF_STMT(BPF_RET | BPF_A, 0),
};

/* The key field in eBPF: r0 = ntohl(word at 4); exit. */
static int ebpf_key4(void)
{
	const struct bpf_insn insns[] = {
		BPF_MOV64_REG(6, 1),
		BPF_LD_ABS_W(4),
		BPF_EXIT_INSN(),
	};

	return kcm_load_filter(insns, ARRAY_SIZE(insns));
}

static int set_key_ebpf(int kcm)
{
	struct kcm_recv_key k = { .key_type = KCM_BPF_TYPE_FD };
	int err;

	k.bpf_fd = ebpf_key4();
	ASSERT_GE(k.bpf_fd, 0);
	err = set_key(kcm, &k, sizeof(k));
	close(k.bpf_fd);
	return err;
}

/* ---- sending ---------------------------------------------------------- */

/* The key of message @i of connection @c (consecutive ones differ). */
static uint32_t mixed_key(int c, unsigned int i)
{
	return (c * 131 + i * 17) % NKEYS;
}

/*
 * Builds @n messages of connection @c into @out (NULL: only counts their
 * bytes), keys from @keyf, numbered on from the counters @sent (NC x
 * NKEYS, which it advances).  Returns their bytes.
 */
static size_t build_conn(int c, unsigned int n,
			 uint32_t (*keyf)(int, unsigned int), uint32_t *sent,
			 char *out)
{
	struct tmsg t = { .conn = c };
	size_t off = 0;
	unsigned int i;

	for (i = 0; i < n; i++) {
		if (!out) {
			off += tmsg_len(i);
			continue;
		}
		t.key = keyf(c, i);
		t.seq = sent[c * NKEYS + t.key]++;
		off += tmsg_build(out + off, tmsg_len(i), &t);
	}
	return off;
}

/*
 * In a child: sends @n messages on each connection (keys from @keyf), a
 * few KB at a time round the connections, then exits.  The counters
 * @sent (NC x NKEYS) are advanced here, as the child sends.
 */
static pid_t send_all(struct smux *m, unsigned int n,
		      uint32_t (*keyf)(int, unsigned int), uint32_t *sent)
{
	size_t len[NC], off[NC] = {}, chunk;
	char *buf[NC];
	int c, busy;
	pid_t pid;

	for (c = 0; c < m->nc; c++) {
		buf[c] = malloc(build_conn(c, n, keyf, sent, NULL));
		ASSERT_TRUE(buf[c]);
		len[c] = build_conn(c, n, keyf, sent, buf[c]);
	}
	fflush(stdout);
	pid = fork();
	ASSERT_GE(pid, 0);
	if (pid) {
		for (c = 0; c < m->nc; c++)
			free(buf[c]);
		return pid;
	}
	alarm(DEADLINE_MS / 1000 + 5);
	do {
		busy = 0;
		for (c = 0; c < m->nc; c++) {
			chunk = len[c] - off[c] < 7000 ? len[c] - off[c] : 7000;
			if (!chunk)
				continue;
			if (kcm_u_write_all(m->peer[c], buf[c] + off[c], chunk))
				_exit(1);
			off[c] += chunk;
			busy = 1;
		}
	} while (busy);
	_exit(0);
}

/* ---- receiving -------------------------------------------------------- */

/* One message received by worker @w: checked and recorded. */
static void seen_msg(struct seen *s, int w, const char *buf, size_t n)
{
	struct tmsg t;

	ASSERT_EQ(tmsg_parse(buf, n, &t), 0);
	ASSERT_LT(t.conn, NC);
	ASSERT_LT(t.key, NKEYS);
	if (s->owner[t.key] < 0)
		s->owner[t.key] = w;
	if (s->owner[t.key] != w)
		s->two_owners++;
	if (s->conn_owner[t.conn] < 0)
		s->conn_owner[t.conn] = w;
	if (s->conn_owner[t.conn] != w)
		s->two_conn_owners++;
	/* In order, none lost: the next number of its key on its connection. */
	if (t.seq != s->next[t.conn][t.key])
		TH_LOG("conn %u key %u: got %u, want %u (worker %d)", t.conn,
		       t.key, t.seq, s->next[t.conn][t.key], w);
	ASSERT_EQ(t.seq, s->next[t.conn][t.key]);
	s->next[t.conn][t.key]++;
	s->per_worker[w]++;
	s->total++;
}

/* A batch of @n bytes, lengths in the KCM_MSG_LENS control message. */
static void seen_batch(struct seen *s, int w, struct msghdr *mh, size_t n)
{
	struct cmsghdr *cm;
	size_t off = 0;
	__u32 *lens;
	int i, cnt;

	cm = CMSG_FIRSTHDR(mh);
	ASSERT_TRUE(cm);
	ASSERT_EQ(cm->cmsg_type, KCM_MSG_LENS);
	lens = (__u32 *)CMSG_DATA(cm);
	cnt = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(__u32);
	for (i = 0; i < cnt; i++) {
		seen_msg(s, w, (char *)mh->msg_iov->iov_base + off, lens[i]);
		off += lens[i];
	}
	ASSERT_EQ(off, n);
}

/* Reads what worker @w has, without waiting; returns messages read. */
static long read_worker(struct smux *m, struct seen *s, int w, int batch)
{
	static char ctl[CMSG_SPACE(4 * 4096)];
	struct iovec iov = { .iov_base = mbuf, .iov_len = sizeof(mbuf) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	long before = s->total;
	ssize_t n;

	for (;;) {
		mh.msg_control = batch ? ctl : NULL;
		mh.msg_controllen = batch ? sizeof(ctl) : 0;
		n = recvmsg(m->w[w], &mh, MSG_DONTWAIT);
		if (n < 0) {
			ASSERT_EQ(errno, EAGAIN);
			break;
		}
		ASSERT_TRUE(mh.msg_flags & MSG_EOR);
		if (batch)
			seen_batch(s, w, &mh, n);
		else
			seen_msg(s, w, mbuf, n);
	}
	return s->total - before;
}

/*
 * Reads the workers set in @mask until @s counts @want messages in all,
 * or DEADLINE_MS pass; returns the count.
 */
static long read_until(struct smux *m, struct seen *s, unsigned int mask,
		       long want, int batch)
{
	struct pollfd p[MAXW];
	uint64_t t0 = kcm_u_now_ns();
	int w;

	while (s->total < want && kcm_u_ms_since(t0) < DEADLINE_MS) {
		for (w = 0; w < m->nw; w++) {
			p[w].fd = mask & (1u << w) ? m->w[w] : -1;
			p[w].events = POLLIN;
		}
		poll(p, m->nw, 100);
		for (w = 0; w < m->nw; w++)
			if (p[w].revents & POLLIN)
				read_worker(m, s, w, batch);
	}
	return s->total;
}

#define ALL	0xffu

/*
 * @n messages on each connection, keys changing from message to message,
 * all read by the workers, each key at one worker and in order.
 */
static void send_and_read(struct smux *m, struct seen *s, uint32_t *sent,
			  unsigned int n, int batch)
{
	long want = s->total + (long)m->nc * n;
	pid_t pid = send_all(m, n, mixed_key, sent);

	ASSERT_EQ(read_until(m, s, ALL, want, batch), want);
	ASSERT_EQ(kcm_wait_child(pid), 0);
	ASSERT_EQ(s->two_owners, 0);
}

/* Bits of the messages seen: connection, key, number. */
static unsigned char got_bits[NC][NKEYS][2048 / 8];

/* Marks message @t seen; false when it was already. */
static int got_once(const struct tmsg *t)
{
	unsigned char *b = &got_bits[t->conn][t->key][t->seq / 8];
	unsigned char bit = 1u << (t->seq % 8);

	if (t->seq >= 2048 || (*b & bit))
		return 0;
	*b |= bit;
	return 1;
}

/*
 * Reads the workers until *@total reaches @want: every message whole and
 * seen once, in any order (messages without a key, or whose keys change
 * owner, may be at several workers); @per counts them per worker.
 */
static void read_once_until(struct smux *m, long *total, long want,
			    long *per)
{
	uint64_t t0 = kcm_u_now_ns();
	struct tmsg t;
	ssize_t n;
	int w;

	while (*total < want) {
		ASSERT_LT(kcm_u_ms_since(t0), DEADLINE_MS);
		for (w = 0; w < m->nw; w++) {
			n = recv(m->w[w], mbuf, sizeof(mbuf), MSG_DONTWAIT);
			if (n < 0) {
				ASSERT_EQ(errno, EAGAIN);
				continue;
			}
			ASSERT_EQ(tmsg_parse(mbuf, n, &t), 0);
			ASSERT_TRUE(got_once(&t));
			per[w]++;
			(*total)++;
		}
	}
}

/* Workers that own keys, as seen. */
static int owners_seen(const struct seen *s)
{
	unsigned int mask = 0, k;
	int n = 0;

	for (k = 0; k < NKEYS; k++)
		if (s->owner[k] >= 0)
			mask |= 1u << s->owner[k];
	while (mask) {
		n += mask & 1;
		mask >>= 1;
	}
	return n;
}

/* One message of every key on connection 0: learns who owns each. */
static void learn_owners(struct smux *m, struct seen *s, uint32_t *sent,
			 unsigned int mask)
{
	struct tmsg t = { .conn = 0 };
	long want = s->total + NKEYS;
	size_t off = 0;

	for (t.key = 0; t.key < NKEYS; t.key++) {
		t.seq = sent[t.key]++;
		off += tmsg_build(mbuf + off, HDR + 8, &t);
	}
	ASSERT_OK(kcm_u_write_all(m->peer[0], mbuf, off));
	ASSERT_EQ(read_until(m, s, mask, want, 0), want);
}

/* ---- /proc/net/kcm_ext ------------------------------------------------ */

/* The numeric @key of the first kcm_ext line of @kind with @sel=@val. */
static long long ext_num(const char *kind, const char *sel, const char *val,
			 const char *key)
{
	char line[4096];

	if (kcm_ext_find(kind, sel, val, line, sizeof(line)))
		return -1;
	return kcm_ext_num(line, key);
}

/* The string @key of the kcm_ext line of psock @c's local TCP socket. */
static int ext_psock_str(struct smux *m, int c, const char *key, char *val,
			 size_t size)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	char addr[64], line[4096];

	ASSERT_OK(getsockname(m->local[c], (struct sockaddr *)&sin, &len));
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", ntohs(sin.sin_port));
	if (kcm_ext_find("psock", "local", addr, line, sizeof(line)))
		return -1;
	return kcm_ext_str(line, key, val, size);
}

/* The index of KCM socket @fd in /proc/net/kcm_ext (by inode). */
static long long ext_kcm_index(int fd)
{
	struct stat st;
	char ino[32];

	ASSERT_OK(fstat(fd, &st));
	snprintf(ino, sizeof(ino), "%lu", (unsigned long)st.st_ino);
	return ext_num("kcm", "ino", ino, "index");
}

static long long ext_mux(const char *key)
{
	return ext_num("mux", NULL, NULL, key);
}

/* Waits until the mux has steered @n messages (all framed and sorted). */
static void wait_steered(long long n)
{
	uint64_t t0 = kcm_u_now_ns();

	while (ext_mux("steered") < n && kcm_u_ms_since(t0) < DEADLINE_MS)
		usleep(10000);
	ASSERT_EQ(ext_mux("steered"), n);
}

/* ---- every key at one worker, in order -------------------------------- */

FIXTURE(steer) {
	struct smux m;
	struct seen s;
	uint32_t sent[NC * NKEYS];
};

FIXTURE_VARIANT(steer) {
	int type;
	int key;	/* KCM_KEY_FIELD, KCM_BPF_TYPE_PROG, _FD, KCM_KEY_CONN */
	int batch;	/* KCM_RECV_BATCH of the workers */
};

FIXTURE_VARIANT_ADD(steer, dgram_field) {
	.type = SOCK_DGRAM, .key = KCM_KEY_FIELD,
};

FIXTURE_VARIANT_ADD(steer, dgram_cbpf) {
	.type = SOCK_DGRAM, .key = KCM_BPF_TYPE_PROG,
};

FIXTURE_VARIANT_ADD(steer, dgram_ebpf) {
	.type = SOCK_DGRAM, .key = KCM_BPF_TYPE_FD,
};

FIXTURE_VARIANT_ADD(steer, seqpacket_field) {
	.type = SOCK_SEQPACKET, .key = KCM_KEY_FIELD,
};

FIXTURE_VARIANT_ADD(steer, dgram_field_batch) {
	.type = SOCK_DGRAM, .key = KCM_KEY_FIELD, .batch = 64,
};

FIXTURE_VARIANT_ADD(steer, seqpacket_cbpf_batch) {
	.type = SOCK_SEQPACKET, .key = KCM_BPF_TYPE_PROG, .batch = 256,
};

FIXTURE_VARIANT_ADD(steer, dgram_conn) {
	.type = SOCK_DGRAM, .key = KCM_KEY_CONN,
};

FIXTURE_SETUP(steer)
{
	int w;

	kcm_enter_netns();
	seen_init(&self->s);
	smux_setup(&self->m, variant->type, NW, NC);
	for (w = 0; w < NW; w++)
		if (variant->batch)
			ASSERT_OK(kcm_u_setsockopt_int(self->m.w[w], SOL_KCM,
						       KCM_RECV_BATCH,
						       variant->batch));
	switch (variant->key) {
	case KCM_KEY_FIELD:
		ASSERT_OK(set_key_field(self->m.w[1]));
		break;
	case KCM_BPF_TYPE_PROG:
		ASSERT_OK(set_key_cbpf(self->m.w[2], cbpf_key4,
				       ARRAY_SIZE(cbpf_key4)));
		break;
	case KCM_BPF_TYPE_FD:
		ASSERT_OK(set_key_ebpf(self->m.w[3]));
		break;
	default:
		ASSERT_OK(set_key_type(self->m.w[0], KCM_KEY_CONN));
	}
}

FIXTURE_TEARDOWN(steer)
{
	int i;

	for (i = 0; i < self->m.nw; i++)
		close(self->m.w[i]);
	for (i = 0; i < self->m.nc; i++) {
		close(self->m.peer[i]);
		close(self->m.local[i]);
	}
}

/*
 * 8 connections send 1500 messages each, keys changing from message to
 * message: every key's messages arrive at one worker, in each
 * connection's order, none lost; all 4 workers get keys.  With the
 * connection as the key, each connection goes to one worker.
 */
TEST_F_DIFFERS(steer, every_key_one_worker_in_order, NO_KEY_OPT)
{
	const unsigned int n = 1500;
	long want = (long)NC * n;
	struct kcm_recv_key k;
	socklen_t len = sizeof(k);
	pid_t pid;
	int c, w;

	/* Any socket of the mux tells the key function in force. */
	memset(&k, 0xff, sizeof(k));
	ASSERT_OK(getsockopt(self->m.w[0], SOL_KCM, KCM_RECV_KEY, &k, &len));
	ASSERT_EQ(len, sizeof(k));
	ASSERT_EQ(k.key_type, variant->key);

	pid = send_all(&self->m, n, mixed_key, self->sent);
	ASSERT_EQ(read_until(&self->m, &self->s, ALL, want, variant->batch),
		  want);
	ASSERT_EQ(kcm_wait_child(pid), 0);
	ASSERT_EQ(ext_mux("steered"), (long long)NC * n);
	ASSERT_EQ(ext_mux("steer_nokey"), 0);
	if (variant->key == KCM_KEY_CONN) {
		/* Each connection at one worker; 8 of them reach several. */
		ASSERT_EQ(self->s.two_conn_owners, 0);
		for (w = 0, c = 0; w < NW; w++)
			c += self->s.per_worker[w] > 0;
		ASSERT_GT(c, 1);
		return;
	}
	ASSERT_EQ(self->s.two_owners, 0);
	ASSERT_EQ(owners_seen(&self->s), NW);
	for (w = 0; w < NW; w++)
		ASSERT_GT(self->s.per_worker[w], 0);
}

/* ---- keys move with the sockets ---------------------------------------- */

/*
 * Fills @s2 with the owners the keys now have: one message of each on
 * connection 0, read by the workers of @mask.
 */
static void relearn(struct smux *m, struct seen *s, uint32_t *sent,
		    unsigned int mask)
{
	seen_new_owners(s);
	learn_owners(m, s, sent, mask);
}

/* Keys owned by worker @w in @s. */
static int keys_of(const struct seen *s, int w)
{
	int k, n = 0;

	for (k = 0; k < NKEYS; k++)
		n += s->owner[k] == w;
	return n;
}

/*
 * Messages for every key are queued, worker @v reads none of them; then
 * @leave takes it away (close or KCM_RECV_DISABLE).  Its messages go to
 * the keys' new owners, in order, and only its keys moved.
 */
static void leave_moves_only_its_keys(int how)
{
	const int v = 2, per_key = 12;
	int before[NKEYS], k, w, off = 1;
	uint32_t sent[NC * NKEYS] = {};
	struct smux m;
	struct seen s;
	long mine, others, want;
	pid_t pid;

	kcm_enter_netns();
	seen_init(&s);
	smux_setup(&m, SOCK_DGRAM, NW, NC);
	/* A small receive buffer: some of its messages wait on the mux. */
	ASSERT_OK(kcm_u_setsockopt_int(m.w[v], SOL_SOCKET, SO_RCVBUF, 8192));
	ASSERT_OK(set_key_field(m.w[0]));
	learn_owners(&m, &s, sent, ALL);
	ASSERT_EQ(owners_seen(&s), NW);
	memcpy(before, s.owner, sizeof(before));
	mine = (long)keys_of(&s, v) * per_key * NC;
	others = (long)NKEYS * per_key * NC - mine;

	/* Every connection sends every key per_key times. */
	pid = send_all(&m, NKEYS * per_key, mixed_key, sent);
	want = s.total + others;
	ASSERT_EQ(read_until(&m, &s, ALL & ~(1u << v), want, 0), want);
	ASSERT_EQ(kcm_wait_child(pid), 0);
	wait_steered(NKEYS + (long long)NKEYS * per_key * NC);
	ASSERT_GT(ext_num("kcm", "index", "2", "steer_held"), 0);

	if (how)
		ASSERT_OK(setsockopt(m.w[v], SOL_KCM, KCM_RECV_DISABLE, &off,
				     sizeof(off)));
	else
		close(m.w[v]);
	/* Its messages, none read, now at the new owners of its keys. */
	seen_new_owners(&s);
	want = s.total + mine;
	ASSERT_EQ(read_until(&m, &s, ALL & ~(1u << v), want, 0), want);
	ASSERT_EQ(s.two_owners, 0);
	ASSERT_EQ(ext_mux("steer_moved"), mine);
	for (k = 0; k < NKEYS; k++) {
		if (before[k] == v)
			ASSERT_TRUE(s.owner[k] >= 0 && s.owner[k] != v);
		else
			ASSERT_EQ(s.owner[k], -1);
	}

	/* From now on: the others' keys where they were, its keys moved. */
	relearn(&m, &s, sent, ALL & ~(1u << v));
	for (k = 0; k < NKEYS; k++)
		if (before[k] != v)
			ASSERT_EQ(s.owner[k], before[k]);
	ASSERT_EQ(keys_of(&s, v), 0);
	for (w = 0, k = 0; w < NW; w++)
		k += w == v ? 0 : keys_of(&s, w);
	ASSERT_EQ(k, NKEYS);
	if (!how)
		return;

	/* Receiving again, it takes back exactly the keys it had. */
	off = 0;
	ASSERT_OK(setsockopt(m.w[v], SOL_KCM, KCM_RECV_DISABLE, &off,
			     sizeof(off)));
	relearn(&m, &s, sent, ALL);
	for (k = 0; k < NKEYS; k++)
		ASSERT_EQ(s.owner[k], before[k]);
}

TEST_DIFFERS(close_moves_only_its_keys, NO_KEY_OPT)
{
	leave_moves_only_its_keys(0);
}

TEST_DIFFERS(disable_moves_only_its_keys, NO_KEY_OPT)
{
	leave_moves_only_its_keys(1);
}

/* A worker that joins (accept(), a clone) takes keys only from others. */
TEST_DIFFERS(join_takes_only_its_keys, NO_KEY_OPT)
{
	uint32_t sent[NC * NKEYS] = {};
	int before[NKEYS], k, got = 0;
	struct smux m;
	struct seen s;

	kcm_enter_netns();
	seen_init(&s);
	smux_setup(&m, SOCK_DGRAM, NW, NC);
	ASSERT_OK(set_key_field(m.w[0]));
	learn_owners(&m, &s, sent, ALL);
	memcpy(before, s.owner, sizeof(before));
	ASSERT_EQ(ext_mux("steer_remaps"), 0);

	m.w[NW] = accept4(m.w[0], NULL, NULL, SOCK_CLOEXEC);
	ASSERT_GE(m.w[NW], 0);
	m.nw = NW + 1;
	relearn(&m, &s, sent, ALL);
	for (k = 0; k < NKEYS; k++) {
		ASSERT_TRUE(s.owner[k] == before[k] || s.owner[k] == NW);
		got += s.owner[k] == NW;
	}
	ASSERT_GT(got, 0);
	ASSERT_GT(ext_mux("steer_remaps"), 0);
	/* 1024 slots: a fifth of them, give or take, moved. */
	ASSERT_GT(ext_num("kcm", "index", "4", "steer_slots"), 100);
	ASSERT_EQ(ext_mux("steer_moved"), 0);
}

/* ---- backpressure --------------------------------------------------- */

/* Sets @fd nonblocking. */
static void nonblock(int fd)
{
	ASSERT_OK(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK));
}

#define PUMP_MSG	200

/*
 * Goes on writing, without blocking, the stream of @total bytes that
 * connection @c carries: messages of PUMP_MSG bytes of key @key numbered
 * from @base; *@off bytes of it are written already.  Returns whether
 * more went.
 */
static int pump(struct smux *m, int c, uint32_t key, uint32_t base,
		size_t total, size_t *off, char *buf)
{
	struct tmsg t = { .key = key, .conn = c };
	size_t i = *off / PUMP_MSG, skip = *off % PUMP_MSG, len = 0;
	ssize_t n;

	for (; len < 16384 && i * PUMP_MSG < total; i++) {
		t.seq = base + i;
		len += tmsg_build(buf + len, PUMP_MSG, &t);
	}
	if (!len)
		return 0;
	n = write(m->peer[c], buf + skip, len - skip);
	if (n < 0) {
		ASSERT_EQ(errno, EAGAIN);
		return 0;
	}
	*off += n;
	return n > 0;
}

/* Keys @key[c] for connection c: 0 and 1 of worker @v, the rest not. */
static void keys_for_stall(const struct seen *s, int v, uint32_t *key)
{
	int c, k = 0, o = 0;

	for (c = 0; c < NC; c++) {
		if (c < 2) {
			while (k < NKEYS && s->owner[k] != v)
				k++;
			ASSERT_LT(k, NKEYS);
			key[c] = k++;
		} else {
			while (o < NKEYS && s->owner[o] == v)
				o++;
			ASSERT_LT(o, NKEYS);
			key[c] = o++;
		}
	}
}

/* A worker that reads nothing, and the connections it holds up. */
struct stall {
	struct smux m;
	struct seen s;
	int v;				/* the worker */
	uint32_t key[NC], base[NC];	/* each connection's key, first number */
	size_t off[NC];			/* bytes each connection wrote */
	char *buf;
};

#define STALL_BYTES	(5000 * PUMP_MSG)	/* a connection's stream */

/*
 * Connections 0 and 1 carry keys of worker @st->v, the six others keys of
 * the others.  Every connection writes what goes, the workers but v read,
 * until nothing moves: the six are through, the two are not.
 */
static void stall_worker(struct stall *st)
{
	uint32_t sent[NC * NKEYS] = {};
	uint64_t t0, quiet;
	int c, w, progress;

	kcm_enter_netns();
	seen_init(&st->s);
	smux_setup(&st->m, SOCK_DGRAM, NW, NC);
	ASSERT_OK(set_key_field(st->m.w[0]));
	learn_owners(&st->m, &st->s, sent, ALL);
	st->v = st->s.owner[0];
	keys_for_stall(&st->s, st->v, st->key);
	st->buf = malloc(16384 + PUMP_MSG);
	ASSERT_TRUE(st->buf);
	for (c = 0; c < NC; c++) {
		st->base[c] = st->s.next[c][st->key[c]];
		st->off[c] = 0;
		/* Bounded buffers: the stall reaches the writers sooner. */
		ASSERT_OK(kcm_u_setsockopt_int(st->m.local[c], SOL_SOCKET,
					       SO_RCVBUF, 65536));
		ASSERT_OK(kcm_u_setsockopt_int(st->m.peer[c], SOL_SOCKET,
					       SO_SNDBUF, 65536));
		nonblock(st->m.peer[c]);
	}
	t0 = kcm_u_now_ns();
	quiet = t0;
	while (kcm_u_ms_since(quiet) < 1000) {
		progress = 0;
		for (c = 0; c < NC; c++)
			progress |= pump(&st->m, c, st->key[c], st->base[c],
					 STALL_BYTES, &st->off[c], st->buf);
		for (w = 0; w < NW; w++)
			if (w != st->v)
				progress |= read_worker(&st->m, &st->s, w, 0) > 0;
		if (progress)
			quiet = kcm_u_now_ns();
		else
			usleep(2000);
		ASSERT_LT(kcm_u_ms_since(t0), DEADLINE_MS);
	}
	for (c = 2; c < NC; c++) {
		ASSERT_EQ(st->off[c], STALL_BYTES);
		ASSERT_EQ(st->s.next[c][st->key[c]],
			  st->base[c] + STALL_BYTES / PUMP_MSG);
	}
	ASSERT_LT(st->off[0], STALL_BYTES);
	ASSERT_LT(st->off[1], STALL_BYTES);
}

/*
 * The stalled worker holds up only its connections, as kcm_ext shows:
 * they wait for it, the others for nobody.  Once it reads, everything
 * arrives, in order.
 */
TEST_DIFFERS(stalled_worker_stalls_only_its_keys, NO_KEY_OPT)
{
	struct stall st;
	char val[32], wait[32];
	uint64_t t0;
	long want;
	int c;

	stall_worker(&st);
	snprintf(val, sizeof(val), "%lld", ext_kcm_index(st.m.w[st.v]));
	for (c = 0; c < NC; c++) {
		ASSERT_OK(ext_psock_str(&st.m, c, "rx_wait", wait,
					sizeof(wait)));
		if (strcmp(wait, c < 2 ? val : "-"))
			TH_LOG("connection %d: rx_wait=%s", c, wait);
		ASSERT_EQ(strcmp(wait, c < 2 ? val : "-"), 0);
	}
	ASSERT_GT(ext_num("kcm", "index", val, "steer_held"), 0);

	/* v reads: its connections go through too, in order. */
	t0 = kcm_u_now_ns();
	while (st.off[0] < STALL_BYTES || st.off[1] < STALL_BYTES) {
		for (c = 0; c < 2; c++)
			pump(&st.m, c, st.key[c], st.base[c], STALL_BYTES,
			     &st.off[c], st.buf);
		read_worker(&st.m, &st.s, st.v, 0);
		ASSERT_LT(kcm_u_ms_since(t0), DEADLINE_MS);
	}
	want = NKEYS + (long)NC * (STALL_BYTES / PUMP_MSG);
	ASSERT_EQ(read_until(&st.m, &st.s, 1u << st.v, want, 0), want);
	ASSERT_EQ(st.s.two_owners, 0);
	ASSERT_OK(ext_psock_str(&st.m, 0, "rx_wait", wait, sizeof(wait)));
	ASSERT_EQ(strcmp(wait, "-"), 0);
	free(st.buf);
}

/* kcmstat shows the same: the key function, who waits, who is held for. */
TEST_DIFFERS(kcmstat_shows_who_waits, NO_KEY_OPT)
{
	const char *bin = kcm_kcmstat_bin();
	char want[32], *p;
	struct stall st;
	int n = 0;

	stall_worker(&st);
	ASSERT_EQ(kcm_cmd(mbuf, sizeof(mbuf), "%s", bin), 0);
	ASSERT_TRUE(strstr(mbuf, "; steer field: steered "));
	snprintf(want, sizeof(want), "Wait-%lld", ext_kcm_index(st.m.w[st.v]));
	for (p = mbuf; (p = strstr(p, want)); p++)
		n++;
	ASSERT_EQ(n, 2);
	ASSERT_TRUE(strstr(mbuf, ",Held-") || strstr(mbuf, " Held-"));
	ASSERT_TRUE(strstr(mbuf, "Keys-"));
	free(st.buf);
}

/*
 * In a child, with the net.kcm.mem knob @knob: the owners of the keys
 * cannot be charged (the protocol's pool is all but closed), so their
 * messages wait for them; once the pool opens again all arrive, each key
 * at one worker, in order.
 */
static void memory_refused(int knob, const char *open_pool)
{
	const unsigned int n = 500;
	uint32_t sent[NC * NKEYS] = {};
	struct smux m;
	struct seen s;
	long want;
	pid_t pid;

	kcm_enter_netns();
	seen_init(&s);
	smux_setup(&m, SOCK_DGRAM, 2, 2);
	ASSERT_OK(set_key_field(m.w[0]));
	learn_owners(&m, &s, sent, ALL);
	ASSERT_EQ(pwrite(knob, "1 2 4", 5, 0), 5);
	pid = send_all(&m, n, mixed_key, sent);
	ASSERT_EQ(kcm_wait_child(pid), 0);
	usleep(200000);
	ASSERT_GT(ext_mux("rx_mem_short"), 0);
	ASSERT_GT(ext_num("kcm", "index", "0", "steer_held") +
		  ext_num("kcm", "index", "1", "steer_held"), 0);
	ASSERT_EQ(pwrite(knob, open_pool, strlen(open_pool), 0),
		  (ssize_t)strlen(open_pool));
	want = NKEYS + 2L * n;
	ASSERT_EQ(read_until(&m, &s, ALL, want, 0), want);
	ASSERT_EQ(s.two_owners, 0);
}

/*
 * When the owner of a key cannot be charged for its messages (its memory
 * cgroup or, here, net.kcm.mem refuses), they wait for it, as for a full
 * receive buffer: none goes to another worker, none is lost.
 */
TEST_DIFFERS(memory_refused_holds_not_drops, NO_KEY_OPT)
{
	char old[128] = "";
	int knob, status;
	pid_t pid;

	/* The knob is init_net's: opened before the test's namespace. */
	knob = open("/proc/sys/net/kcm/mem", O_RDWR);
	ASSERT_GE(knob, 0);
	ASSERT_GT(read(knob, old, sizeof(old) - 1), 0);
	old[strcspn(old, "\n")] = 0;
	/* The pool is opened again however the test ends. */
	pid = fork();
	ASSERT_GE(pid, 0);
	if (!pid) {
		memory_refused(knob, old);
		fflush(stdout);
		_exit(kcm_test_failed ? KSFT_FAIL : KSFT_PASS);
	}
	status = kcm_wait_child(pid);
	ASSERT_EQ(pwrite(knob, old, strlen(old), 0), (ssize_t)strlen(old));
	close(knob);
	ASSERT_EQ(status, KSFT_PASS);
}

/* ---- bad parameters ------------------------------------------------- */

TEST_DIFFERS(bad_parameters, NO_KEY_OPT)
{
	static const struct kcm_keyfield bad_fields[] = {
		{ .width = 0 }, { .width = 3 }, { .width = 16 },
		{ .width = 4, .byte_order = 2 },
		{ .width = 4, .reserved = 1 },
		{ .width = 4, .offset = 65536 },
	};
	struct sock_filter junk[] = {
		{ .code = 0xffff },
		BPF_STMT(BPF_RET | BPF_K, 0),
	};
	struct kcm_recv_key k, got;
	socklen_t len;
	int kcm = kcm_socket(SOCK_DGRAM), map;
	size_t i;

	ASSERT_GE(kcm, 0);
	for (i = 0; i < ARRAY_SIZE(bad_fields); i++) {
		memset(&k, 0, sizeof(k));
		k.key_type = KCM_KEY_FIELD;
		k.field = bad_fields[i];
		ASSERT_ERRNO(set_key(kcm, &k, sizeof(k)), EINVAL);
	}
	memset(&k, 0, sizeof(k));
	k.key_type = 99;
	ASSERT_ERRNO(set_key(kcm, &k, sizeof(k)), EINVAL);
	k.key_type = -1;
	ASSERT_ERRNO(set_key(kcm, &k, sizeof(k)), EINVAL);
	k.key_type = KCM_KEY_CONN;
	k.reserved = 1;
	ASSERT_ERRNO(set_key(kcm, &k, sizeof(k)), EINVAL);
	k.reserved = 0;
	/* Types without parameters: the rest of the value is 0. */
	k.bpf_fd = 3;
	ASSERT_ERRNO(set_key(kcm, &k, sizeof(k)), EINVAL);
	k.key_type = KCM_KEY_OFF;
	ASSERT_ERRNO(set_key(kcm, &k, sizeof(k)), EINVAL);
	k.key_type = KCM_KEY_CONN;
	k.bpf_fd = 0;
	ASSERT_ERRNO(set_key(kcm, &k, sizeof(k) - 1), EINVAL);
	ASSERT_ERRNO(set_key(kcm, &k, 0), EINVAL);
	ASSERT_ERRNO(setsockopt(kcm, SOL_KCM, KCM_RECV_KEY, NULL, sizeof(k)),
		     EFAULT);
	ASSERT_ERRNO(setsockopt(kcm, SOL_KCM, KCM_RECV_KEY, (void *)8,
				sizeof(k)), EFAULT);

	/* Classic BPF: none, empty, unterminated, bad opcode, unreadable. */
	ASSERT_ERRNO(set_key_cbpf(kcm, NULL, 2), EINVAL);
	ASSERT_ERRNO(set_key_cbpf(kcm, cbpf_key4, 0), EINVAL);
	ASSERT_ERRNO(set_key_cbpf(kcm, cbpf_key4, 1), EINVAL);
	ASSERT_ERRNO(set_key_cbpf(kcm, junk, 2), EINVAL);
	ASSERT_ERRNO(set_key_cbpf(kcm, (struct sock_filter *)8, 2), EFAULT);

	/* eBPF: not open, not a program, not a socket filter. */
	memset(&k, 0, sizeof(k));
	k.key_type = KCM_BPF_TYPE_FD;
	k.bpf_fd = -1;
	ASSERT_ERRNO(set_key(kcm, &k, sizeof(k)), EBADF);
	map = kcm_bpf_array_map(4);
	ASSERT_GE(map, 0);
	k.bpf_fd = map;
	ASSERT_ERRNO(set_key(kcm, &k, sizeof(k)), EINVAL);
	k.bpf_fd = kcm;
	ASSERT_ERRNO(set_key(kcm, &k, sizeof(k)), EINVAL);

	/* None of it stuck: no key function. */
	len = sizeof(got);
	memset(&got, 0xff, sizeof(got));
	ASSERT_OK(getsockopt(kcm, SOL_KCM, KCM_RECV_KEY, &got, &len));
	ASSERT_EQ(len, sizeof(got));
	ASSERT_EQ(got.key_type, KCM_KEY_OFF);
	ASSERT_OK(kcm_ext_find("mux", NULL, NULL, mbuf, 4096));
	ASSERT_OK(kcm_ext_str(mbuf, "steer", mbuf + 4096, 32));
	ASSERT_EQ(strcmp(mbuf + 4096, "off"), 0);

	/* A field reads back; a short length gets that much of it. */
	ASSERT_OK(set_key_field(kcm));
	len = sizeof(got);
	ASSERT_OK(getsockopt(kcm, SOL_KCM, KCM_RECV_KEY, &got, &len));
	ASSERT_EQ(got.key_type, KCM_KEY_FIELD);
	ASSERT_EQ(got.field.offset, 4);
	ASSERT_EQ(got.field.width, 4);
	ASSERT_EQ(got.field.byte_order, KCM_LENFIELD_BE);
	len = 2;
	ASSERT_OK(getsockopt(kcm, SOL_KCM, KCM_RECV_KEY, &got, &len));
	ASSERT_EQ(len, 2);
	len = (socklen_t)-1;
	ASSERT_ERRNO(getsockopt(kcm, SOL_KCM, KCM_RECV_KEY, &got, &len),
		     EINVAL);
	ASSERT_ERRNO(getsockopt(kcm, SOL_KCM, KCM_RECV_KEY, &got, NULL),
		     EFAULT);
	/* Off again. */
	ASSERT_OK(set_key_type(kcm, KCM_KEY_OFF));
	len = sizeof(got);
	ASSERT_OK(getsockopt(kcm, SOL_KCM, KCM_RECV_KEY, &got, &len));
	ASSERT_EQ(got.key_type, KCM_KEY_OFF);
}

/*
 * Without privilege an eBPF key function cannot even be loaded (EPERM);
 * a classic one is set and steers.
 */
TEST_DIFFERS(classic_key_unprivileged, NO_KEY_OPT)
{
	uint32_t sent[NC * NKEYS] = {};
	struct smux m;
	struct seen s;

	kcm_enter_netns();
	kcm_u_lo_up();
	kcm_disable_unprivileged_bpf();
	kcm_drop_privileges();
	ASSERT_ERRNO(ebpf_key4(), EPERM);

	seen_init(&s);
	memset(&m, -1, sizeof(m));
	m.nw = 2;
	m.nc = 1;
	m.w[0] = kcm_socket(SOCK_DGRAM);
	ASSERT_GE(m.w[0], 0);
	m.w[1] = kcm_u_clone(m.w[0]);
	ASSERT_GE(m.w[1], 0);
	ASSERT_OK(kcm_u_tcp_pair(&m.peer[0], &m.local[0]));
	{
		struct kcm_attach_ext att = { .fd = m.local[0],
					      .bpf_type = KCM_PARSER_LENFIELD };

		att.lenfield.width = 4;
		att.lenfield.adjust = 4;
		ASSERT_OK(ioctl(m.w[0], SIOCKCMATTACHEXT, &att));
	}
	ASSERT_OK(set_key_cbpf(m.w[1], cbpf_key4, ARRAY_SIZE(cbpf_key4)));
	learn_owners(&m, &s, sent, ALL);
	learn_owners(&m, &s, sent, ALL);
	ASSERT_EQ(s.two_owners, 0);
	ASSERT_EQ(owners_seen(&s), 2);
}

/* ---- key functions that misbehave ------------------------------------ */

/*
 * A classic key function that loads past every message (a fault) gives
 * key 0 to all: one worker gets everything, in order.
 */
TEST_DIFFERS(faulting_key_is_key_zero, NO_KEY_OPT)
{
	struct sock_filter past[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 100000),
		BPF_STMT(BPF_RET | BPF_A, 0),
	};
	uint32_t sent[NC * NKEYS] = {};
	struct smux m;
	struct seen s;
	int w, got = 0;

	kcm_enter_netns();
	seen_init(&s);
	smux_setup(&m, SOCK_DGRAM, NW, NC);
	ASSERT_OK(set_key_cbpf(m.w[0], past, ARRAY_SIZE(past)));
	send_and_read(&m, &s, sent, 300, 0);
	for (w = 0; w < NW; w++)
		got += s.per_worker[w] > 0;
	/* The test's own key field varies, but KCM saw key 0 only. */
	ASSERT_EQ(got, 1);
	ASSERT_EQ(ext_mux("steered"), NC * 300);
}

/*
 * An eBPF key function whose results are garbage (bytes of the payload,
 * any 32-bit value): every message still arrives once, each of those
 * keys at one worker.  One that answers KCM_NO_KEY: messages are
 * balanced in turn, over several workers, and counted as without a key.
 */
TEST_DIFFERS(garbage_and_no_key, NO_KEY_OPT)
{
	/* Keys all over the 32 bits: the test's key field, scrambled. */
	const struct bpf_insn garbage[] = {
		BPF_MOV64_REG(6, 1),
		BPF_LD_ABS_W(4),
		KCM_INSN(BPF_ALU | BPF_MUL | BPF_K, 0, 0, 0, -1640531535),
		BPF_EXIT_INSN(),
	};
	const struct bpf_insn none[] = {
		BPF_MOV64_IMM(0, -1),		/* KCM_NO_KEY */
		BPF_EXIT_INSN(),
	};
	struct kcm_recv_key k = { .key_type = KCM_BPF_TYPE_FD };
	uint32_t sent[NC * NKEYS] = {};
	long per[NW] = {}, total = 0;
	struct smux m;
	struct seen s;
	int w, got = 0;
	pid_t pid;

	kcm_enter_netns();
	seen_init(&s);
	memset(got_bits, 0, sizeof(got_bits));
	smux_setup(&m, SOCK_DGRAM, NW, NC);
	k.bpf_fd = kcm_load_filter(garbage, ARRAY_SIZE(garbage));
	ASSERT_GE(k.bpf_fd, 0);
	ASSERT_OK(set_key(m.w[0], &k, sizeof(k)));
	close(k.bpf_fd);
	send_and_read(&m, &s, sent, 400, 0);

	/* No key: in turn, as without a key function. */
	k.bpf_fd = kcm_load_filter(none, ARRAY_SIZE(none));
	ASSERT_GE(k.bpf_fd, 0);
	ASSERT_OK(set_key(m.w[1], &k, sizeof(k)));
	close(k.bpf_fd);
	pid = send_all(&m, 400, mixed_key, sent);
	read_once_until(&m, &total, NC * 400, per);
	ASSERT_EQ(kcm_wait_child(pid), 0);
	for (w = 0; w < NW; w++)
		got += per[w] > 0;
	ASSERT_GT(got, 1);
	ASSERT_EQ(ext_mux("steer_nokey"), NC * 400);
	ASSERT_EQ(ext_mux("steered"), NC * 400);
}

/*
 * The key function is replaced (field by classic BPF reading the same
 * field) and then removed while messages flow: every message arrives
 * once and whole, and kcm_ext tells the function in force.
 */
TEST_DIFFERS(replace_and_remove_while_flowing, NO_KEY_OPT)
{
	uint32_t sent[NC * NKEYS] = {};
	long total = 0, want = (long)NC * 2000, per[NW] = {};
	char line[4096], kind[32];
	struct smux m;
	pid_t pid;
	int w;

	kcm_enter_netns();
	memset(got_bits, 0, sizeof(got_bits));
	smux_setup(&m, SOCK_DGRAM, NW, NC);
	ASSERT_OK(set_key_field(m.w[0]));
	pid = send_all(&m, 2000, mixed_key, sent);
	read_once_until(&m, &total, want / 3, per);
	ASSERT_OK(set_key_cbpf(m.w[1], cbpf_key4, ARRAY_SIZE(cbpf_key4)));
	read_once_until(&m, &total, 2 * want / 3, per);
	ASSERT_OK(set_key_type(m.w[2], KCM_KEY_OFF));
	read_once_until(&m, &total, want, per);
	ASSERT_EQ(kcm_wait_child(pid), 0);
	ASSERT_OK(kcm_ext_find("mux", NULL, NULL, line, sizeof(line)));
	ASSERT_OK(kcm_ext_str(line, "steer", kind, sizeof(kind)));
	ASSERT_EQ(strcmp(kind, "off"), 0);
	/* Nothing stays held for any socket. */
	for (w = 0; w < NW; w++) {
		char idx[16];

		snprintf(idx, sizeof(idx), "%d", w);
		ASSERT_EQ(ext_num("kcm", "index", idx, "steer_held"), 0);
		ASSERT_EQ(ext_num("kcm", "index", idx, "steer_slots"), 0);
	}
}

/* ---- with the other extensions ---------------------------------------- */

/*
 * By connection, with KCM_RECV_CONN_ID and MSG_PEEK: the id each message
 * comes with names one connection, whose messages all go to one worker;
 * a peek shows the message the next read returns.
 */
TEST_DIFFERS(conn_key_with_conn_id_and_peek, NO_KEY_OPT)
{
	char ctl[CMSG_SPACE(sizeof(__u32))], peek[512];
	uint32_t sent[NC * NKEYS] = {};
	int owner_of_id[64], w, i;
	struct smux m;
	long total = 0;
	pid_t pid;

	kcm_enter_netns();
	memset(owner_of_id, -1, sizeof(owner_of_id));
	smux_setup(&m, SOCK_SEQPACKET, NW, NC);
	ASSERT_OK(set_key_type(m.w[3], KCM_KEY_CONN));
	for (w = 0; w < NW; w++)
		ASSERT_OK(kcm_u_setsockopt_int(m.w[w], SOL_KCM,
					       KCM_RECV_CONN_ID, 1));
	pid = send_all(&m, 200, mixed_key, sent);
	for (i = 0; i < 200000 && total < NC * 200; i++) {
		for (w = 0; w < NW; w++) {
			struct iovec iov = { .iov_base = mbuf,
					     .iov_len = sizeof(mbuf) };
			struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
					     .msg_control = ctl,
					     .msg_controllen = sizeof(ctl) };
			struct cmsghdr *cm;
			ssize_t n, p;
			__u32 id;

			p = recv(m.w[w], peek, sizeof(peek),
				 MSG_PEEK | MSG_DONTWAIT);
			if (p < 0) {
				ASSERT_EQ(errno, EAGAIN);
				continue;
			}
			n = recvmsg(m.w[w], &mh, MSG_DONTWAIT);
			ASSERT_GT(n, 0);
			ASSERT_EQ(memcmp(peek, mbuf, p < n ? p : n), 0);
			cm = CMSG_FIRSTHDR(&mh);
			ASSERT_TRUE(cm && cm->cmsg_type == KCM_CONN_ID);
			memcpy(&id, CMSG_DATA(cm), sizeof(id));
			ASSERT_LT(id, 64);
			if (owner_of_id[id] < 0)
				owner_of_id[id] = w;
			ASSERT_EQ(owner_of_id[id], w);
			total++;
		}
		if (total < NC * 200)
			usleep(100);
	}
	ASSERT_EQ(total, NC * 200);
	ASSERT_EQ(kcm_wait_child(pid), 0);
}

/*
 * A connection whose messages wait for a stalled worker is unattached:
 * what it framed stays and reaches the worker, in order, once it reads.
 */
TEST_DIFFERS(unattach_while_held, NO_KEY_OPT)
{
	uint32_t sent[NC * NKEYS] = {}, base;
	uint64_t t0, quiet;
	long long framed;
	size_t off = 0;
	struct smux m;
	struct seen s;
	char val[32];
	int v, c;

	kcm_enter_netns();
	seen_init(&s);
	smux_setup(&m, SOCK_DGRAM, 2, 1);
	ASSERT_OK(kcm_u_setsockopt_int(m.w[0], SOL_SOCKET, SO_RCVBUF, 4096));
	ASSERT_OK(kcm_u_setsockopt_int(m.w[1], SOL_SOCKET, SO_RCVBUF, 4096));
	ASSERT_OK(set_key_field(m.w[0]));
	learn_owners(&m, &s, sent, ALL);
	v = s.owner[0];
	c = 0;
	ASSERT_OK(kcm_u_setsockopt_int(m.local[c], SOL_SOCKET, SO_RCVBUF,
				       65536));
	ASSERT_OK(kcm_u_setsockopt_int(m.peer[c], SOL_SOCKET, SO_SNDBUF,
				       65536));
	nonblock(m.peer[c]);
	/* Key 0 only, until the connection stops. */
	base = s.next[c][0];
	t0 = kcm_u_now_ns();
	quiet = t0;
	while (kcm_u_ms_since(quiet) < 500) {
		if (pump(&m, c, 0, base, 64 << 20, &off, mbuf))
			quiet = kcm_u_now_ns();
		else
			usleep(2000);
		ASSERT_LT(kcm_u_ms_since(t0), DEADLINE_MS);
	}
	usleep(100000);
	ASSERT_OK(ext_psock_str(&m, c, "rx_paused", val, sizeof(val)));
	ASSERT_EQ(strcmp(val, "1"), 0);
	framed = ext_num("psock", NULL, NULL, "rx_msgs");
	ASSERT_GT(framed, NKEYS);
	ASSERT_OK(kcm_u_unattach(m.w[0], m.local[c]));
	ASSERT_EQ(read_until(&m, &s, 1u << v, framed, 0), framed);
	/* Nothing more, and nothing for the other worker. */
	usleep(100000);
	ASSERT_EQ(read_worker(&m, &s, v, 0), 0);
	ASSERT_EQ(read_worker(&m, &s, !v, 0), 0);
	ASSERT_EQ(s.two_owners, 0);
}

/* The distro module's answer, observed there; ours takes the option. */
TEST(recv_key_result_by_module)
{
	int kcm = kcm_socket(SOCK_DGRAM);

	ASSERT_GE(kcm, 0);
	if (kcm_test_against_distro())
		ASSERT_ERRNO(set_key_field(kcm), ENOPROTOOPT);
	else
		ASSERT_OK(set_key_field(kcm));
}

KCM_TEST_MAIN
