// SPDX-License-Identifier: GPL-2.0
/*
 * Extensions of this KCM that upstream Linux does not have: accept() and
 * accept4() as a way to clone.  The distro module refuses them, which the
 * TEST_DIFFERS reasons record as observed there.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sys/socket.h>

#include "kcm_data.h"

#define NO_ACCEPT "accept() on a KCM socket fails with EOPNOTSUPP"

/* Sends message @seq from @peer and checks that @kcm receives it whole. */
static void check_rx(int peer, int kcm, uint32_t seq)
{
	char buf[256];

	ASSERT_OK(kcm_send_msgs(peer, seq, 1, 32));
	kcm_set_timeo(kcm, SO_RCVTIMEO, 5000);
	ASSERT_EQ(kcm_recv_check(kcm, buf, sizeof(buf)), seq);
}

/* Sends message @seq on @kcm and checks the bytes @peer reads. */
static void check_tx(int kcm, int peer, uint32_t seq)
{
	char buf[256], got[256];
	size_t len = kcm_msg_build(buf, 40, seq);

	ASSERT_EQ(send(kcm, buf, len, 0), len);
	ASSERT_OK(kcm_read_full(peer, got, len));
	ASSERT_EQ(memcmp(buf, got, len), 0);
}

TEST_DIFFERS(accept_joins_the_mux, NO_ACCEPT)
{
	int peer, local, kcm, a, off = 1;
	struct kcm_proc p;

	kcm_enter_netns();
	kcm = kcm_with_tcp(SOCK_DGRAM, &peer, &local);
	a = accept(kcm, NULL, NULL);
	ASSERT_GE(a, 0);
	EXPECT_EQ(kcm_sockopt_int(a, SOL_SOCKET, SO_DOMAIN), AF_KCM);
	EXPECT_EQ(kcm_sockopt_int(a, SOL_SOCKET, SO_TYPE), SOCK_DGRAM);

	ASSERT_EQ(kcm_proc_read(&p), 0);
	ASSERT_EQ(p.muxes, 1);
	ASSERT_EQ(p.kcms[0], 2);
	ASSERT_EQ(p.psocks[0], 1);
	ASSERT_EQ(p.socks, 2);

	/* Only the accepted socket receives: the message must reach it. */
	ASSERT_OK(setsockopt(kcm, SOL_KCM, KCM_RECV_DISABLE, &off,
			     sizeof(off)));
	check_rx(peer, a, 7);
	check_tx(a, peer, 8);

	/* The mux outlives the socket it was accepted from. */
	close(kcm);
	check_rx(peer, a, 9);
	ASSERT_EQ(kcm_proc_read(&p), 0);
	ASSERT_EQ(p.kcms[0], 1);
	close(a);
	ASSERT_EQ(kcm_proc_read(&p), 0);
	ASSERT_EQ(p.muxes, 0);
}

TEST_DIFFERS(accept_seqpacket, NO_ACCEPT)
{
	int fd = kcm_socket(SOCK_SEQPACKET), a;

	ASSERT_GE(fd, 0);
	a = accept(fd, NULL, NULL);
	ASSERT_GE(a, 0);
	EXPECT_EQ(kcm_sockopt_int(a, SOL_SOCKET, SO_TYPE), SOCK_SEQPACKET);
	/* A socket accepted from an accepted one: still the same mux. */
	ASSERT_GE(accept(a, NULL, NULL), 0);
}

TEST_DIFFERS(accept4_flags, NO_ACCEPT)
{
	int fd = kcm_socket(SOCK_DGRAM), a, b;
	char c;

	ASSERT_GE(fd, 0);
	a = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	ASSERT_GE(a, 0);
	ASSERT_TRUE(fcntl(a, F_GETFD) & FD_CLOEXEC);
	ASSERT_TRUE(fcntl(a, F_GETFL) & O_NONBLOCK);
	/* Nonblocking for real: an empty socket says EAGAIN at once. */
	ASSERT_ERRNO(recv(a, &c, 1, 0), EAGAIN);

	b = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
	ASSERT_GE(b, 0);
	ASSERT_TRUE(fcntl(b, F_GETFD) & FD_CLOEXEC);
	ASSERT_EQ(fcntl(b, F_GETFL) & O_NONBLOCK, 0);

	/* Neither flag is inherited from the accepting socket. */
	b = accept4(a, NULL, NULL, 0);
	ASSERT_GE(b, 0);
	ASSERT_EQ(fcntl(b, F_GETFD) & FD_CLOEXEC, 0);
	ASSERT_EQ(fcntl(b, F_GETFL) & O_NONBLOCK, 0);
}

/* The socket layer checks the flags before it asks the family. */
TEST(accept4_bad_flags)
{
	int fd = kcm_socket(SOCK_DGRAM);

	ASSERT_GE(fd, 0);
	ASSERT_ERRNO(accept4(fd, NULL, NULL, 1), EINVAL);
	ASSERT_ERRNO(accept4(fd, NULL, NULL, MSG_DONTWAIT), EINVAL);
}

/* An address buffer gets the bare family: KCM sockets have no address. */
TEST_DIFFERS(accept_with_address, NO_ACCEPT)
{
	int fd = kcm_socket(SOCK_DGRAM), a;
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	ASSERT_GE(fd, 0);
	memset(&ss, 0xff, sizeof(ss));
	a = accept(fd, (struct sockaddr *)&ss, &len);
	ASSERT_GE(a, 0);
	ASSERT_EQ(len, sizeof(sa_family_t));
	ASSERT_EQ(ss.ss_family, AF_KCM);
	/* getsockname() and getpeername() still fail, as upstream's do. */
	len = sizeof(ss);
	ASSERT_ERRNO(getsockname(a, (struct sockaddr *)&ss, &len), EOPNOTSUPP);
	ASSERT_ERRNO(getpeername(a, (struct sockaddr *)&ss, &len), EOPNOTSUPP);
	ASSERT_ERRNO(accept(fd, (struct sockaddr *)&ss, NULL), EFAULT);
}

/* The distro module's answer, observed there; ours accepts. */
TEST(accept_result_by_module)
{
	int fd = kcm_socket(SOCK_DGRAM);

	ASSERT_GE(fd, 0);
	if (kcm_test_against_distro())
		ASSERT_ERRNO(accept(fd, NULL, NULL), EOPNOTSUPP);
	else
		ASSERT_GE(accept(fd, NULL, NULL), 0);
}

KCM_TEST_MAIN
