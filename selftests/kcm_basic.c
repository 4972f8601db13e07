// SPDX-License-Identifier: GPL-2.0
/*
 * KCM sockets and multiplexors: creation, errors, cloning, close order,
 * options, /proc/net/kcm per network namespace.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "kcm_lib.h"

/* Every /proc assertion below runs in a namespace of its own. */
static void proc_expect(int muxes, int socks)
{
	struct kcm_proc p;

	ASSERT_EQ(kcm_proc_read(&p), 0);
	ASSERT_EQ(p.title_muxes, muxes);
	ASSERT_EQ(p.muxes, muxes);
	ASSERT_EQ(p.socks, socks);
}

static void check_kcm_socket(int fd, int type)
{
	ASSERT_GE(fd, 0);
	EXPECT_EQ(kcm_u_getsockopt_int(fd, SOL_SOCKET, SO_DOMAIN), AF_KCM);
	EXPECT_EQ(kcm_u_getsockopt_int(fd, SOL_SOCKET, SO_TYPE), type);
	EXPECT_EQ(kcm_u_getsockopt_int(fd, SOL_SOCKET, SO_PROTOCOL),
		  KCMPROTO_CONNECTED);
}

TEST(create_dgram)
{
	int fd = kcm_socket(SOCK_DGRAM);

	check_kcm_socket(fd, SOCK_DGRAM);
	ASSERT_EQ(close(fd), 0);
}

TEST(create_seqpacket)
{
	int fd = kcm_socket(SOCK_SEQPACKET);

	check_kcm_socket(fd, SOCK_SEQPACKET);
	ASSERT_EQ(close(fd), 0);
}

TEST(create_flags)
{
	int fd = socket(AF_KCM, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
			KCMPROTO_CONNECTED);

	check_kcm_socket(fd, SOCK_DGRAM);
	ASSERT_TRUE(fcntl(fd, F_GETFL) & O_NONBLOCK);
	ASSERT_TRUE(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	close(fd);
}

TEST(create_bad_type)
{
	ASSERT_ERRNO(socket(AF_KCM, SOCK_STREAM, 0), ESOCKTNOSUPPORT);
	ASSERT_ERRNO(socket(AF_KCM, SOCK_RAW, 0), ESOCKTNOSUPPORT);
	ASSERT_ERRNO(socket(AF_KCM, SOCK_RDM, 0), ESOCKTNOSUPPORT);
	ASSERT_ERRNO(socket(AF_KCM, SOCK_DCCP, 0), ESOCKTNOSUPPORT);
	/* Out of range for every family: the socket layer says EINVAL. */
	ASSERT_ERRNO(socket(AF_KCM, 11, 0), EINVAL);
}

TEST(create_bad_protocol)
{
	ASSERT_ERRNO(socket(AF_KCM, SOCK_DGRAM, 1), EPROTONOSUPPORT);
	ASSERT_ERRNO(socket(AF_KCM, SOCK_SEQPACKET, IPPROTO_TCP),
		     EPROTONOSUPPORT);
	ASSERT_ERRNO(socket(AF_KCM, SOCK_DGRAM, -1), EPROTONOSUPPORT);
}

TEST(create_no_leak_on_error)
{
	kcm_enter_netns();
	ASSERT_ERRNO(socket(AF_KCM, SOCK_STREAM, 0), ESOCKTNOSUPPORT);
	ASSERT_ERRNO(socket(AF_KCM, SOCK_DGRAM, 7), EPROTONOSUPPORT);
	proc_expect(0, 0);
}

TEST(proc_one_mux)
{
	struct kcm_proc p;
	int fd;

	kcm_enter_netns();
	proc_expect(0, 0);
	fd = kcm_socket(SOCK_DGRAM);
	ASSERT_GE(fd, 0);
	ASSERT_EQ(kcm_proc_read(&p), 0);
	ASSERT_EQ(p.title_muxes, 1);
	ASSERT_EQ(p.muxes, 1);
	ASSERT_EQ(p.socks, 1);
	ASSERT_EQ(p.kcms[0], 1);
	ASSERT_EQ(p.psocks[0], 0);
	close(fd);
	proc_expect(0, 0);
}

static void clone_checks(int type)
{
	struct kcm_proc p;
	int fd, c1, c2;

	kcm_enter_netns();
	fd = kcm_socket(type);
	ASSERT_GE(fd, 0);
	c1 = kcm_u_clone(fd);
	check_kcm_socket(c1, type);
	ASSERT_NE(c1, fd);
	c2 = kcm_u_clone(c1);		/* a clone of a clone */
	check_kcm_socket(c2, type);
	ASSERT_NE(c2, c1);
	/* Clones are not close-on-exec (upstream ABI; see kcm_ext accept4). */
	ASSERT_EQ(fcntl(c1, F_GETFD) & FD_CLOEXEC, 0);

	ASSERT_EQ(kcm_proc_read(&p), 0);
	ASSERT_EQ(p.title_muxes, 1);
	ASSERT_EQ(p.muxes, 1);
	ASSERT_EQ(p.kcms[0], 3);
	ASSERT_EQ(p.socks, 3);
	close(c2);
	close(c1);
	close(fd);
	proc_expect(0, 0);
}

TEST(clone_dgram)
{
	clone_checks(SOCK_DGRAM);
}

TEST(clone_seqpacket)
{
	clone_checks(SOCK_SEQPACKET);
}

TEST(clone_bad_pointer)
{
	struct kcm_proc p;
	int fd, before;

	kcm_enter_netns();
	fd = kcm_socket(SOCK_DGRAM);
	ASSERT_GE(fd, 0);
	before = fcntl(fd + 1, F_GETFD);
	ASSERT_EQ(before, -1);		/* fd + 1 is free */
	ASSERT_ERRNO(ioctl(fd, SIOCKCMCLONE, NULL), EFAULT);
	ASSERT_ERRNO(ioctl(fd, SIOCKCMCLONE, (void *)1), EFAULT);
	/* No descriptor and no socket left behind. */
	ASSERT_EQ(fcntl(fd + 1, F_GETFD), -1);
	ASSERT_EQ(kcm_proc_read(&p), 0);
	ASSERT_EQ(p.muxes, 1);
	ASSERT_EQ(p.kcms[0], 1);
	close(fd);
}

TEST(clone_out_of_fds)
{
	struct rlimit rl, saved;
	struct kcm_proc p;
	int fd;

	kcm_enter_netns();
	fd = kcm_socket(SOCK_DGRAM);
	ASSERT_GE(fd, 0);
	ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
	/* Lower the limit so that fd is the highest descriptor allowed. */
	rl.rlim_cur = fd + 1;
	rl.rlim_max = fd + 1;
	ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &rl), 0);
	/* Fill any free descriptor below it. */
	while (dup(fd) >= 0)
		;
	ASSERT_EQ(errno, EMFILE);
	ASSERT_ERRNO(kcm_u_clone(fd), EMFILE);
	/* Room for fopen(): the limit goes back up (we are root). */
	ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &saved), 0);
	ASSERT_EQ(kcm_proc_read(&p), 0);
	ASSERT_EQ(p.muxes, 1);
	ASSERT_EQ(p.kcms[0], 1);
	close(fd);
}

TEST(clone_not_a_kcm_ioctl_on_udp)
{
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	struct kcm_clone info = { .fd = -1 };

	ASSERT_GE(fd, 0);
	/* SIOCKCMCLONE means nothing to UDP: no KCM socket appears. */
	ASSERT_EQ(ioctl(fd, SIOCKCMCLONE, &info), -1);
	ASSERT_EQ(info.fd, -1);
	close(fd);
}

TEST(close_clone_first)
{
	struct kcm_proc p;
	int fd, c;

	kcm_enter_netns();
	fd = kcm_socket(SOCK_DGRAM);
	c = kcm_u_clone(fd);
	ASSERT_GE(c, 0);
	ASSERT_EQ(close(c), 0);
	ASSERT_EQ(kcm_proc_read(&p), 0);
	ASSERT_EQ(p.muxes, 1);
	ASSERT_EQ(p.kcms[0], 1);
	ASSERT_EQ(p.socks, 1);
	/* The original still clones into the same mux. */
	c = kcm_u_clone(fd);
	ASSERT_GE(c, 0);
	ASSERT_EQ(kcm_proc_read(&p), 0);
	ASSERT_EQ(p.muxes, 1);
	ASSERT_EQ(p.kcms[0], 2);
	close(c);
	close(fd);
	proc_expect(0, 0);
}

TEST(close_original_first)
{
	struct kcm_proc p;
	int fd, c, c2;

	kcm_enter_netns();
	fd = kcm_socket(SOCK_SEQPACKET);
	c = kcm_u_clone(fd);
	ASSERT_GE(c, 0);
	ASSERT_EQ(close(fd), 0);
	/* The mux lives on with the clone. */
	ASSERT_EQ(kcm_proc_read(&p), 0);
	ASSERT_EQ(p.muxes, 1);
	ASSERT_EQ(p.kcms[0], 1);
	c2 = kcm_u_clone(c);
	check_kcm_socket(c2, SOCK_SEQPACKET);
	ASSERT_EQ(kcm_proc_read(&p), 0);
	ASSERT_EQ(p.muxes, 1);
	ASSERT_EQ(p.kcms[0], 2);
	close(c);
	close(c2);
	proc_expect(0, 0);
}

TEST(close_via_exit)
{
	pid_t pid;
	int status;

	kcm_enter_netns();
	pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		int fd = kcm_socket(SOCK_DGRAM);

		if (fd < 0 || kcm_u_clone(fd) < 0)
			_exit(1);
		_exit(0);	/* the kernel closes both */
	}
	ASSERT_EQ(waitpid(pid, &status, 0), pid);
	ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	proc_expect(0, 0);
}

#define MANY_MUXES 100

TEST(many_muxes)
{
	int fds[MANY_MUXES][3];
	struct kcm_proc p;
	int i;

	kcm_enter_netns();
	for (i = 0; i < MANY_MUXES; i++) {
		fds[i][0] = kcm_socket(i % 2 ? SOCK_DGRAM : SOCK_SEQPACKET);
		ASSERT_GE(fds[i][0], 0);
		fds[i][1] = kcm_u_clone(fds[i][0]);
		ASSERT_GE(fds[i][1], 0);
		fds[i][2] = kcm_u_clone(fds[i][1]);
		ASSERT_GE(fds[i][2], 0);
	}
	ASSERT_EQ(kcm_proc_read(&p), 0);
	ASSERT_EQ(p.title_muxes, MANY_MUXES);
	ASSERT_EQ(p.muxes, MANY_MUXES);
	ASSERT_EQ(p.socks, 3 * MANY_MUXES);
	for (i = 0; i < MANY_MUXES; i++)
		ASSERT_EQ(p.kcms[i], 3);

	/* Close the middle member of every other mux. */
	for (i = 0; i < MANY_MUXES; i += 2)
		close(fds[i][1]);
	ASSERT_EQ(kcm_proc_read(&p), 0);
	ASSERT_EQ(p.muxes, MANY_MUXES);
	ASSERT_EQ(p.socks, 3 * MANY_MUXES - MANY_MUXES / 2);

	/* Close the first half of the muxes completely. */
	for (i = 0; i < MANY_MUXES / 2; i++) {
		close(fds[i][0]);
		if (i % 2)
			close(fds[i][1]);
		close(fds[i][2]);
	}
	ASSERT_EQ(kcm_proc_read(&p), 0);
	ASSERT_EQ(p.title_muxes, MANY_MUXES / 2);
	ASSERT_EQ(p.muxes, MANY_MUXES / 2);
	for (i = MANY_MUXES / 2; i < MANY_MUXES; i++) {
		close(fds[i][0]);
		if (i % 2)
			close(fds[i][1]);
		close(fds[i][2]);
	}
	proc_expect(0, 0);
}

TEST(proc_per_netns)
{
	int a1, a2, b, pipefd[2];
	struct kcm_proc p;
	char c = 0;
	pid_t pid;
	int status;

	kcm_enter_netns();
	a1 = kcm_socket(SOCK_DGRAM);
	a2 = kcm_socket(SOCK_SEQPACKET);
	ASSERT_GE(a1, 0);
	ASSERT_GE(a2, 0);
	ASSERT_GE(kcm_u_clone(a2), 0);
	proc_expect(2, 3);

	ASSERT_EQ(pipe(pipefd), 0);
	pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		close(pipefd[0]);
		kcm_enter_netns();
		proc_expect(0, 0);
		b = kcm_socket(SOCK_DGRAM);
		ASSERT_GE(b, 0);
		proc_expect(1, 1);
		/* A clone made here joins the mux of the first namespace. */
		ASSERT_GE(kcm_u_clone(a1), 0);
		proc_expect(1, 1);
		c = 1;
		ASSERT_EQ(write(pipefd[1], &c, 1), 1);
		pause();
		_exit(0);
	}
	close(pipefd[1]);
	/* EOF here means the child failed an assertion. */
	ASSERT_EQ(read(pipefd[0], &c, 1), 1);
	ASSERT_EQ(c, 1);
	/* The first namespace sees its own two muxes, with the child's clone. */
	ASSERT_EQ(kcm_proc_read(&p), 0);
	ASSERT_EQ(p.title_muxes, 2);
	ASSERT_EQ(p.muxes, 2);
	ASSERT_EQ(p.socks, 4);
	kill(pid, SIGKILL);
	ASSERT_EQ(waitpid(pid, &status, 0), pid);
	/* The child's death closed its clone in our mux. */
	proc_expect(2, 3);
}

TEST(unsupported_ops)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int fd = kcm_socket(SOCK_DGRAM);
	int sv[2];

	ASSERT_GE(fd, 0);
	ASSERT_ERRNO(bind(fd, (struct sockaddr *)&addr, sizeof(addr)),
		     EOPNOTSUPP);
	ASSERT_ERRNO(connect(fd, (struct sockaddr *)&addr, sizeof(addr)),
		     EOPNOTSUPP);
	ASSERT_ERRNO(listen(fd, 1), EOPNOTSUPP);
	ASSERT_ERRNO(getsockname(fd, (struct sockaddr *)&ss, &len),
		     EOPNOTSUPP);
	ASSERT_ERRNO(getpeername(fd, (struct sockaddr *)&ss, &len),
		     EOPNOTSUPP);
	ASSERT_ERRNO(shutdown(fd, SHUT_RDWR), EOPNOTSUPP);
	ASSERT_ERRNO(socketpair(AF_KCM, SOCK_DGRAM, 0, sv), EOPNOTSUPP);
	close(fd);
}

TEST(recv_disable_option)
{
	int fd = kcm_socket(SOCK_DGRAM);
	socklen_t len;
	int val;

	ASSERT_GE(fd, 0);
	EXPECT_EQ(kcm_u_getsockopt_int(fd, SOL_KCM, KCM_RECV_DISABLE), 0);
	val = 1;
	ASSERT_OK(setsockopt(fd, SOL_KCM, KCM_RECV_DISABLE, &val, sizeof(val)));
	EXPECT_EQ(kcm_u_getsockopt_int(fd, SOL_KCM, KCM_RECV_DISABLE), 1);
	val = 42;	/* any non-zero value disables */
	ASSERT_OK(setsockopt(fd, SOL_KCM, KCM_RECV_DISABLE, &val, sizeof(val)));
	EXPECT_EQ(kcm_u_getsockopt_int(fd, SOL_KCM, KCM_RECV_DISABLE), 1);
	val = 0;
	ASSERT_OK(setsockopt(fd, SOL_KCM, KCM_RECV_DISABLE, &val, sizeof(val)));
	EXPECT_EQ(kcm_u_getsockopt_int(fd, SOL_KCM, KCM_RECV_DISABLE), 0);

	/* A short buffer is refused on set and truncates on get. */
	ASSERT_ERRNO(setsockopt(fd, SOL_KCM, KCM_RECV_DISABLE, &val, 2),
		     EINVAL);
	ASSERT_ERRNO(setsockopt(fd, SOL_KCM, KCM_RECV_DISABLE, NULL,
				sizeof(int)), EFAULT);
	len = 0;
	ASSERT_OK(getsockopt(fd, SOL_KCM, KCM_RECV_DISABLE, &val, &len));
	EXPECT_EQ(len, 0);
	close(fd);
}

/* /proc shows which sockets are in the receive rotation (RxWait). */
TEST(recv_disable_in_proc)
{
	struct kcm_proc p;
	int fd, c, val;

	kcm_enter_netns();
	fd = kcm_socket(SOCK_DGRAM);
	c = kcm_u_clone(fd);
	ASSERT_GE(c, 0);
	ASSERT_EQ(kcm_proc_read(&p), 0);
	ASSERT_EQ(p.socks, 2);
	ASSERT_EQ(p.rxwait, 2);

	val = 1;
	ASSERT_OK(setsockopt(c, SOL_KCM, KCM_RECV_DISABLE, &val, sizeof(val)));
	ASSERT_EQ(kcm_proc_read(&p), 0);
	ASSERT_EQ(p.rxwait, 1);
	ASSERT_OK(setsockopt(fd, SOL_KCM, KCM_RECV_DISABLE, &val, sizeof(val)));
	ASSERT_EQ(kcm_proc_read(&p), 0);
	ASSERT_EQ(p.rxwait, 0);

	val = 0;
	ASSERT_OK(setsockopt(c, SOL_KCM, KCM_RECV_DISABLE, &val, sizeof(val)));
	ASSERT_EQ(kcm_proc_read(&p), 0);
	ASSERT_EQ(p.rxwait, 1);
	close(c);
	close(fd);
}

TEST(unknown_options)
{
	int fd = kcm_socket(SOCK_SEQPACKET);
	socklen_t len = sizeof(int);
	int val = 1;

	ASSERT_GE(fd, 0);
	ASSERT_ERRNO(setsockopt(fd, SOL_KCM, 999, &val, sizeof(val)),
		     ENOPROTOOPT);
	ASSERT_ERRNO(getsockopt(fd, SOL_KCM, 999, &val, &len), ENOPROTOOPT);
	ASSERT_ERRNO(setsockopt(fd, IPPROTO_TCP, 1, &val, sizeof(val)),
		     ENOPROTOOPT);
	ASSERT_ERRNO(getsockopt(fd, IPPROTO_TCP, 1, &val, &len), ENOPROTOOPT);
	/* Generic socket options work as on any socket. */
	val = 65536;
	ASSERT_OK(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &val, sizeof(val)));
	EXPECT_EQ(kcm_u_getsockopt_int(fd, SOL_SOCKET, SO_RCVBUF), 2 * 65536);
	close(fd);
}

TEST(unknown_ioctl)
{
	int fd = kcm_socket(SOCK_DGRAM);
	int arg = 0;

	ASSERT_GE(fd, 0);
	/* Free numbers of the private range; not a KCM request. */
	ASSERT_EQ(ioctl(fd, SIOCPROTOPRIVATE + 15, &arg), -1);
	EXPECT_TRUE(errno == ENOTTY || errno == EINVAL || errno == ENODEV);
	close(fd);
}

KCM_TEST_MAIN
