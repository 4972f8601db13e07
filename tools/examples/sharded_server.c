// SPDX-License-Identifier: GPL-2.0
/*
 * sharded_server: worker processes that each own a shard of accounts, fed
 * by one KCM multiplexor that steers every request to the worker that
 * owns its account (KCM_RECV_KEY, not in upstream Linux).
 *
 * A request is a 4-byte length, the account (the key: 4 bytes, big
 * endian, right after the length), its number among the requests of that
 * account and an amount.  The server sets the built-in key field on its
 * mux before it attaches the client's connections, so every request of
 * an account reaches one worker, in the order it was sent.  A worker
 * keeps the balances of its accounts in plain memory, with no lock and
 * no message to any other worker, and replies with the new balance on
 * the connection the request came from (KCM_RECV_CONN_ID in, KCM_CONN_ID
 * out).  A request whose account is KCM_NO_KEY (0xffffffff) has no key:
 * those are the stop requests, balanced in turn like any message without
 * a key.
 *
 * The client (forked here, plain TCP) sends REQUESTS requests over CONNS
 * connections, each account's on one connection, several per write, and
 * checks every reply: its account's next number and the balance the
 * client computed, which only a worker that saw all of the account's
 * requests, in order, can give.  Each worker checks the numbers it sees,
 * from 0 for each account it sees first; the server then checks that
 * the workers together served every request and that each account was
 * served by one worker.
 *
 *   sharded_server [-w WORKERS] [-c CONNS] [-n REQUESTS] [-a ACCOUNTS]
 *                  [-k KCMSTAT]
 *
 * -k: run that kcmstat while the mux is busy.  Exit status 0 when every
 * check held.
 */
#include "kcm_example.h"

#define MAX_WORKERS	16
#define MAX_ACCOUNTS	4096
#define REQ_LEN		16	/* length, account, number, amount */

/* What a worker tells the server when it stops. */
struct report {
	int worker;
	long requests;
	long accounts;
	long bad;
	unsigned char owned[MAX_ACCOUNTS];
};

static int workers = 4, conns = 8, requests = 4000, accounts = 64;
static const char *kcmstat;

/* The amount of request @seq of account @acct. */
static uint32_t amount(uint32_t acct, uint32_t seq)
{
	return (acct * 7 + seq * 13) % 100 + 1;
}

/* A message of four big-endian words, the first the length. */
static void put_words(char *buf, uint32_t a, uint32_t b, uint32_t c)
{
	uint32_t w[4] = { htonl(REQ_LEN - KCM_U_HDR), htonl(a), htonl(b),
			  htonl(c) };

	memcpy(buf, w, REQ_LEN);
}

static void get_words(const char *buf, uint32_t *a, uint32_t *b, uint32_t *c)
{
	uint32_t w[4];

	memcpy(w, buf, REQ_LEN);
	*a = ntohl(w[1]);
	*b = ntohl(w[2]);
	*c = ntohl(w[3]);
}

/* The mux steers by the account: a 4-byte field right after the length. */
static void steer_by_account(int kcm)
{
	struct kcm_recv_key key = { .key_type = KCM_KEY_FIELD };

	key.field.offset = KCM_U_HDR;
	key.field.width = 4;
	key.field.byte_order = KCM_LENFIELD_BE;
	if (setsockopt(kcm, SOL_KCM, KCM_RECV_KEY, &key, sizeof(key)))
		ex_die("setsockopt(KCM_RECV_KEY)");
}

/* Reads one request and the id of its connection; its length. */
static ssize_t recv_request(int fd, char *buf, size_t size, uint32_t *conn)
{
	char ctl[CMSG_SPACE(sizeof(uint32_t))];
	struct iovec iov = { .iov_base = buf, .iov_len = size };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = ctl, .msg_controllen = sizeof(ctl) };
	struct cmsghdr *cm;
	ssize_t n = recvmsg(fd, &mh, 0);

	if (n < 0)
		ex_die("worker: recvmsg");
	cm = CMSG_FIRSTHDR(&mh);
	if (!cm || cm->cmsg_level != SOL_KCM || cm->cmsg_type != KCM_CONN_ID)
		ex_die("worker: no KCM_CONN_ID");
	memcpy(conn, CMSG_DATA(cm), sizeof(*conn));
	return n;
}

/* Sends @len bytes of @buf, whole, on connection @conn of the mux. */
static void send_on(int fd, const char *buf, size_t len, uint32_t conn)
{
	char ctl[CMSG_SPACE(sizeof(uint32_t))] = { 0 };
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = ctl, .msg_controllen = sizeof(ctl) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);

	cm->cmsg_level = SOL_KCM;
	cm->cmsg_type = KCM_CONN_ID;
	cm->cmsg_len = CMSG_LEN(sizeof(conn));
	memcpy(CMSG_DATA(cm), &conn, sizeof(conn));
	if (sendmsg(fd, &mh, 0) != (ssize_t)len)
		ex_die("worker: sendmsg");
}

/*
 * A worker: owns the balances of the accounts KCM steers to it; each
 * request must be the next of its account, from 0.
 */
static void run_worker(int id, int fd, int report_fd)
{
	static uint32_t balance[MAX_ACCOUNTS], next[MAX_ACCOUNTS];
	static struct report r;
	uint32_t acct, seq, amt, conn;
	char buf[64];

	alarm(60);
	r.worker = id;
	if (kcm_u_setsockopt_int(fd, SOL_KCM, KCM_RECV_CONN_ID, 1))
		ex_die("worker: KCM_RECV_CONN_ID");
	for (;;) {
		if (recv_request(fd, buf, sizeof(buf), &conn) != REQ_LEN) {
			r.bad++;
			continue;
		}
		get_words(buf, &acct, &seq, &amt);
		if (acct == KCM_NO_KEY)
			break;
		if (acct >= (uint32_t)accounts || seq != next[acct] ||
		    amt != amount(acct, seq)) {
			r.bad++;
			continue;
		}
		if (!r.owned[acct]++)
			r.accounts++;
		next[acct]++;
		balance[acct] += amt;
		r.requests++;
		put_words(buf, acct, seq, balance[acct]);
		send_on(fd, buf, REQ_LEN, conn);
	}
	if (write(report_fd, &r, sizeof(r)) != sizeof(r))
		ex_die("worker: report");
	exit(0);
}

/* Client: reads and checks every reply, on all connections. */
static int client_replies(const int *fds)
{
	static uint32_t next[MAX_ACCOUNTS], balance[MAX_ACCOUNTS];
	struct pollfd pfd[EX_MAX_CONNS];
	uint32_t acct, seq, bal;
	int got = 0, bad = 0, i;
	char buf[64];

	for (i = 0; i < conns; i++)
		pfd[i] = (struct pollfd){ .fd = fds[i], .events = POLLIN };
	while (got < requests) {
		if (poll(pfd, conns, 5000) <= 0) {
			fprintf(stderr, "client: %d of %d replies, none for 5 s\n",
				got, requests);
			return -1;
		}
		for (i = 0; i < conns; i++) {
			if (!(pfd[i].revents & POLLIN))
				continue;
			if (kcm_u_read_msg(fds[i], buf, sizeof(buf)) != REQ_LEN)
				ex_die("client: read reply");
			get_words(buf, &acct, &seq, &bal);
			got++;
			if (acct >= (uint32_t)accounts || seq != next[acct] ||
			    bal != balance[acct] + amount(acct, seq)) {
				bad++;
				continue;
			}
			balance[acct] = bal;
			next[acct]++;
		}
	}
	printf("client: %d replies over %d connections, %d bad\n", got, conns,
	       bad);
	return bad ? -1 : 0;
}

/*
 * The client: request i is for account i % ACCOUNTS, sent on connection
 * account % CONNS, so each account's requests keep one connection's
 * order; 8 requests per write.  Then the stops, one per worker.
 */
static void __attribute__((noreturn)) client(const struct sockaddr_in *sin)
{
	static char buf[EX_MAX_CONNS][8 * REQ_LEN];
	static uint32_t seq[MAX_ACCOUNTS];
	int fds[EX_MAX_CONNS], i, c;
	size_t len[EX_MAX_CONNS] = { 0 };

	alarm(60);
	for (i = 0; i < conns; i++)
		fds[i] = ex_connect(sin);
	for (i = 0; i < requests; i++) {
		uint32_t acct = i % accounts;

		c = acct % conns;
		put_words(buf[c] + len[c], acct, seq[acct],
			  amount(acct, seq[acct]));
		seq[acct]++;
		len[c] += REQ_LEN;
		if (len[c] == sizeof(buf[c]) || i + accounts >= requests) {
			if (kcm_u_write_all(fds[c], buf[c], len[c]))
				ex_die("client: write");
			len[c] = 0;
		}
	}
	if (client_replies(fds))
		exit(1);
	if (kcmstat) {
		fflush(stdout);
		if (system(kcmstat) != 0)
			fprintf(stderr, "client: %s failed\n", kcmstat);
	}
	for (i = 0; i < workers; i++) {
		put_words(buf[0], KCM_NO_KEY, 0, 0);
		if (kcm_u_write_all(fds[0], buf[0], REQ_LEN))
			ex_die("client: write stop");
	}
	for (i = 0; i < conns; i++)
		while (read(fds[i], buf[0], sizeof(buf[0])) > 0)
			;
	exit(0);
}

static void parse_args(int argc, char **argv)
{
	int opt;

	while ((opt = getopt(argc, argv, "w:c:n:a:k:")) != -1) {
		switch (opt) {
		case 'w':
			workers = atoi(optarg);
			break;
		case 'c':
			conns = atoi(optarg);
			break;
		case 'n':
			requests = atoi(optarg);
			break;
		case 'a':
			accounts = atoi(optarg);
			break;
		case 'k':
			kcmstat = optarg;
			break;
		default:
			fprintf(stderr, "usage: sharded_server [-w WORKERS] [-c CONNS]");
			fprintf(stderr, " [-n REQUESTS] [-a ACCOUNTS] [-k KCMSTAT]\n");
			exit(2);
		}
	}
	/* All requests are written before the replies are read: bounded. */
	if (workers < 1 || workers > MAX_WORKERS || conns < 1 ||
	    conns > EX_MAX_CONNS || requests < 1 || requests > 20000 ||
	    accounts < 1 || accounts > MAX_ACCOUNTS) {
		fprintf(stderr, "sharded_server: 1..%d workers, 1..%d connections",
			MAX_WORKERS, EX_MAX_CONNS);
		fprintf(stderr, ", 1..20000 requests, 1..%d accounts\n",
			MAX_ACCOUNTS);
		exit(2);
	}
}

/* Sums the workers' reports; 0 when each account had one worker. */
static int collect(int report_fd)
{
	static struct report r;
	static int owner[MAX_ACCOUNTS];
	long total = 0, owned = 0, bad = 0, shared = 0;
	int i, a;

	memset(owner, -1, sizeof(owner));
	for (i = 0; i < workers; i++) {
		if (read(report_fd, &r, sizeof(r)) != sizeof(r))
			ex_die("server: worker report");
		printf("worker %d: %ld requests for %ld accounts\n", r.worker,
		       r.requests, r.accounts);
		total += r.requests;
		owned += r.accounts;
		bad += r.bad;
		for (a = 0; a < accounts; a++) {
			if (!r.owned[a])
				continue;
			if (owner[a] >= 0)
				shared++;
			owner[a] = r.worker;
		}
	}
	printf("server: %d workers served %ld of %d requests for %ld of %d accounts, %s, %ld bad\n",
	       workers, total, requests, owned, accounts,
	       shared ? "accounts shared by workers" :
	       "each account at one worker", bad);
	return total == requests && owned == accounts && !shared && !bad ?
	       0 : -1;
}

int main(int argc, char **argv)
{
	int kcm[MAX_WORKERS], report, lfd, i, rc;
	pid_t cpid, pids[MAX_WORKERS];
	struct sockaddr_in sin;

	parse_args(argc, argv);
	setvbuf(stdout, NULL, _IOLBF, 0);
	alarm(60);	/* an example must never hang a test run */
	ex_kcm_socks(kcm, workers);
	/* Before the first connection: every request gets its key. */
	steer_by_account(kcm[0]);
	lfd = ex_listen(&sin);
	cpid = fork();
	if (cpid == 0) {
		/* Else the client would keep the mux alive. */
		for (i = 0; i < workers; i++)
			close(kcm[i]);
		close(lfd);
		client(&sin);
	}
	ex_accept_attach(kcm[0], lfd, conns);
	printf("server: mux with %d KCM sockets and %d connections, steered by account\n",
	       workers, conns);

	report = ex_fork_workers(kcm, workers, pids, run_worker);
	rc = ex_wait_client(cpid, pids, workers);
	if (!rc)
		rc = collect(report);
	ex_reap(pids, workers);
	printf("sharded_server: %s\n", rc ? "FAIL" : "PASS");
	return rc ? 1 : 0;
}
