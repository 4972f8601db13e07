// SPDX-License-Identifier: GPL-2.0
/*
 * A seeded, reproducible random walk over the KCM system calls with
 * hostile arguments: bad descriptors and pointers, random lengths and
 * flags, parsers that return random lengths or read random offsets, peers
 * that send random bytes and huge length headers.
 *
 * Every call must return a result or a real errno (no kernel-internal
 * value), nothing may hang, and once everything is closed the namespace
 * must have no multiplexor left.  The debug kernel adds KASAN, lockdep
 * and kmemleak to that.  KCM_FUZZ_SEED (default: three fixed seeds, so
 * that CI is reproducible) and KCM_FUZZ_OPS pick the run; a failure
 * prints the seed and the operation number.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>

#include "kcm_data.h"

#define SLOTS	48
#define NPROGS	6

static unsigned long long rng_state;
static int fds[SLOTS];
static int kinds[SLOTS];

enum { K_KCM = 1, K_TCP, K_PEER, K_OTHER };
static int progs[NPROGS];
static char buf[80000];
static long op_no;
static long n_attach, n_clone, n_send, n_recv;

static unsigned int rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (unsigned int)(rng_state >> 11);
}

static unsigned int pick(unsigned int n)
{
	return rnd() % n;
}

/* A descriptor from the table, or something that is not one. */
static int any_fd(void);

/* Mostly a descriptor of @kind, so that calls get past the checks. */
static int fd_of(int kind)
{
	unsigned int i, start = pick(SLOTS);

	if (pick(4))
		for (i = 0; i < SLOTS; i++)
			if (kinds[(start + i) % SLOTS] == kind)
				return fds[(start + i) % SLOTS];
	return any_fd();
}

static int any_fd(void)
{
	switch (pick(10)) {
	case 0:
		return -1;
	case 1:
		return 100000;
	case 2:
		return progs[pick(NPROGS)];
	default:
		return fds[pick(SLOTS)];
	}
}

static void *any_ptr(void *good)
{
	switch (pick(8)) {
	case 0:
		return NULL;
	case 1:
		return (void *)8;
	default:
		return good;
	}
}

static size_t any_len(void)
{
	static const size_t lens[] = { 0, 1, 3, 4, 5, 64, 4095, 4096, 65535,
				       70000, (size_t)INT_MAX + 1, SIZE_MAX };

	return pick(3) ? pick(2000) : lens[pick(ARRAY_SIZE(lens))];
}

static int any_flags(void)
{
	static const int f[] = { MSG_MORE, MSG_EOR, MSG_BATCH, MSG_PEEK,
				 MSG_TRUNC, MSG_OOB, MSG_WAITALL, MSG_NOSIGNAL };
	int flags = MSG_DONTWAIT;
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(f); i++)
		if (!pick(4))
			flags |= f[i];
	return flags;
}

/* Kernel-internal values (ERESTARTSYS = 512...) must never escape. */
static void check_result(long ret, const char *what)
{
	int e = errno;

	if (ret >= 0)
		return;
	if (e <= 0 || e > 133) {
		printf("# seed %llu op %ld: %s returned errno %d\n",
		       rng_state, op_no, what, e);
		kcm_test_failed = 1;
	}
}

static void put_fd(int fd, int kind)
{
	int slot = pick(SLOTS);

	if (fd < 0)
		return;
	if (fds[slot] >= 0)
		close(fds[slot]);
	fds[slot] = fd;
	kinds[slot] = kind;
}

static void op_socket(void)
{
	static const int types[] = { SOCK_DGRAM, SOCK_SEQPACKET, SOCK_STREAM,
				     SOCK_RAW };
	int fd = socket(AF_KCM, types[pick(4)] | (pick(2) ? SOCK_NONBLOCK : 0),
			pick(8) ? 0 : (int)rnd());

	check_result(fd, "socket");
	put_fd(fd, K_KCM);
}

static void op_tcp(void)
{
	int peer, local, one = 1;

	if (kcm_u_tcp_pair(&peer, &local))
		return;
	fcntl(peer, F_SETFL, O_NONBLOCK);
	fcntl(local, F_SETFL, O_NONBLOCK);
	if (pick(3) == 0)
		setsockopt(local, SOL_SOCKET, SO_RCVBUF, &one, sizeof(one));
	put_fd(peer, K_PEER);
	put_fd(local, K_TCP);
}

static void op_other_socket(void)
{
	static const int types[][2] = { { AF_INET, SOCK_DGRAM },
					{ AF_INET, SOCK_STREAM },
					{ AF_UNIX, SOCK_STREAM },
					{ AF_INET6, SOCK_STREAM } };
	unsigned int k = pick(ARRAY_SIZE(types));

	put_fd(socket(types[k][0], types[k][1], 0), K_OTHER);
}

static void op_ioctl(void)
{
	struct kcm_attach att = { fd_of(K_TCP), any_fd() };
	struct kcm_unattach un = { fd_of(K_TCP) };
	struct kcm_clone cl;
	int fd = fd_of(K_KCM), cmd = pick(4);
	long ret;

	if (!pick(3))
		att.bpf_fd = progs[pick(NPROGS)];
	switch (cmd) {
	case 0:
		ret = ioctl(fd, SIOCKCMATTACH, any_ptr(&att));
		n_attach += !ret;
		break;
	case 1:
		ret = ioctl(fd, SIOCKCMUNATTACH, any_ptr(&un));
		break;
	case 2:
		ret = ioctl(fd, SIOCKCMCLONE, any_ptr(&cl));
		if (ret == 0) {
			put_fd(cl.fd, K_KCM);
			n_clone++;
		}
		break;
	default:
		/* Numbers of the private range that KCM does not use. */
		ret = ioctl(fd, SIOCPROTOPRIVATE + 3 + pick(13), any_ptr(&cl));
	}
	check_result(ret, "ioctl");
}

static void op_send(void)
{
	size_t len = any_len();
	struct iovec iov[2] = { { any_ptr(buf), len }, { any_ptr(buf), 100 } };
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 1 + pick(2) };
	long ret;

	if (!pick(4)) {
		uint32_t hdr = pick(2) ? 0xffffffff : htonl(pick(100000));

		memcpy(buf, &hdr, 4);
	}
	ret = sendmsg(fd_of(pick(2) ? K_KCM : K_PEER), &mh, any_flags());
	n_send += ret > 0;
	check_result(ret, "sendmsg");
}

static void op_recv(void)
{
	struct iovec iov = { any_ptr(buf), pick(2) ? pick(200) : sizeof(buf) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	long ret = recvmsg(fd_of(K_KCM), &mh, any_flags());

	n_recv += ret > 0;
	check_result(ret, "recvmsg");
}

static void op_sockopt(void)
{
	int val = pick(2) ? (int)pick(3) : (int)rnd(), levels[] = {
		SOL_KCM, SOL_SOCKET, IPPROTO_TCP };
	int level = levels[pick(3)], name = pick(3) ? (int)pick(10) : (int)rnd();
	socklen_t len = pick(4) ? sizeof(int) : pick(8);

	if (pick(2))
		check_result(setsockopt(any_fd(), level, name, any_ptr(&val),
					len), "setsockopt");
	else
		check_result(getsockopt(any_fd(), level, name, any_ptr(&val),
					any_ptr(&len)), "getsockopt");
}

static void op_poll(void)
{
	struct pollfd p = { .fd = any_fd(), .events = POLLIN | POLLOUT };

	check_result(poll(&p, 1, 0), "poll");
}

static void op_close(void)
{
	int slot = pick(SLOTS);

	if (fds[slot] >= 0) {
		if (!pick(4)) {
			struct linger lg = { 1, 0 };

			setsockopt(fds[slot], SOL_SOCKET, SO_LINGER, &lg,
				   sizeof(lg));
		}
		close(fds[slot]);
		fds[slot] = -1;
		kinds[slot] = 0;
	}
}

/* Parsers: the documented one, fixed answers, loads at random offsets. */
static void load_progs(void)
{
	const struct bpf_insn at_offset[] = {
		BPF_MOV64_REG(6, 1),
		BPF_LD_ABS_W(pick(64)),
		BPF_EXIT_INSN(),
	};

	progs[0] = kcm_u_parser_len4();
	progs[1] = kcm_parser_const(0);
	progs[2] = kcm_parser_const((int)rnd());
	progs[3] = kcm_parser_const(-(int)pick(200));
	progs[4] = kcm_parser_min_len(pick(300), pick(5000));
	progs[5] = kcm_load_filter(at_offset, ARRAY_SIZE(at_offset));
}

typedef void (*fuzz_op_t)(void);

static void run_fuzz(unsigned long long seed)
{
	const char *ops_env = getenv("KCM_FUZZ_OPS");
	long ops = ops_env ? atol(ops_env) : 4000;
	static const fuzz_op_t table[] = {
		op_socket, op_socket, op_tcp, op_other_socket, op_ioctl,
		op_ioctl, op_ioctl, op_send, op_send, op_send, op_recv,
		op_recv, op_sockopt, op_poll, op_close,
	};
	struct kcm_proc p;
	int i;

	kcm_enter_netns();
	signal(SIGPIPE, SIG_IGN);
	printf("# fuzz: KCM_FUZZ_SEED=%llu KCM_FUZZ_OPS=%ld\n", seed, ops);
	rng_state = seed | 1;
	for (i = 0; i < SLOTS; i++) {
		fds[i] = -1;
		kinds[i] = 0;
	}
	load_progs();
	for (op_no = 0; op_no < ops; op_no++)
		table[pick(ARRAY_SIZE(table))]();

	printf("# fuzz: %ld attaches, %ld clones, %ld sends and %ld receives succeeded\n",
	       n_attach, n_clone, n_send, n_recv);
	for (i = 0; i < SLOTS; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	/* Muxes die with their last socket; psocks with their mux. */
	for (i = 0; i < 100; i++) {
		ASSERT_EQ(kcm_proc_read(&p), 0);
		if (!p.muxes)
			break;
		usleep(10000);
	}
	if (p.muxes || kcm_test_failed)
		printf("# fuzz failed: KCM_FUZZ_SEED=%llu\n", seed);
	ASSERT_EQ(p.muxes, 0);
	ASSERT_EQ(p.title_muxes, 0);
}

TEST(fuzz_seeds)
{
	const char *env = getenv("KCM_FUZZ_SEED");
	static const unsigned long long seeds[] = { 1, 0x5eed, 20261203 };
	unsigned int i;
	pid_t pid;

	if (env) {
		run_fuzz(strtoull(env, NULL, 0));
		return;
	}
	/* Each seed in a process (and namespace) of its own, in the time of a test. */
	for (i = 0; i < ARRAY_SIZE(seeds); i++) {
		alarm(KCM_TEST_TIMEOUT);
		pid = fork();
		ASSERT_GE(pid, 0);
		if (!pid) {
			run_fuzz(seeds[i]);
			fflush(stdout);
			_exit(kcm_test_failed);
		}
		ASSERT_EQ(kcm_wait_child(pid), 0);
	}
}

KCM_TEST_MAIN
