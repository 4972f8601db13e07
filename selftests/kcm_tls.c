// SPDX-License-Identifier: GPL-2.0
/*
 * KCM and kernel TLS.  KCM reads and writes an attached TCP socket beneath
 * any upper layer protocol, so a connection on which the application
 * turned kTLS on must never carry a KCM message in clear, nor feed its
 * ciphertext to the parser.  Attach refuses a socket with kTLS
 * (EOPNOTSUPP); a socket that gets it after the attach is stopped, both
 * ways, the first time KCM would read or write it: EOPNOTSUPP on the TCP
 * socket and on the KCM socket whose message was to go out, ulp_stops in
 * /proc/net/kcm_ext, and its messages go out on the other connections.
 *
 * kTLS is set up as the kernel's selftests/net/tls.c does, without a
 * handshake: TCP_ULP "tls", then TLS 1.2 AES-GCM-128 keys for TLS_TX and
 * TLS_RX.  A kernel without kTLS (no tls module) gives a SKIP.
 */
#define _GNU_SOURCE
#include <linux/tls.h>
#include <netinet/tcp.h>

#include "kcm_data.h"

#ifndef TCP_ULP
#define TCP_ULP		31
#endif
#ifndef SOL_TLS
#define SOL_TLS		282
#endif

#define IN_CLEAR "the distro module attaches a kTLS socket and writes through it"

static char buf[65536];

/* TCP_ULP "tls" on @fd, or SKIP when the kernel has no kTLS. */
static void tls_ulp(int fd)
{
	int ret = setsockopt(fd, IPPROTO_TCP, TCP_ULP, "tls", sizeof("tls"));

	if (ret && errno == ENOENT)
		SKIP(return, "no kTLS: TCP_ULP \"tls\": %s", strerror(errno));
	ASSERT_EQ(ret, 0);
}

/* TLS 1.2 AES-GCM-128 keys for @dir (TLS_TX or TLS_RX), all @key. */
static void tls_key(int fd, int dir, unsigned char key)
{
	struct tls12_crypto_info_aes_gcm_128 ci = {
		.info.version = TLS_1_2_VERSION,
		.info.cipher_type = TLS_CIPHER_AES_GCM_128,
	};

	memset(ci.key, key, sizeof(ci.key));
	memset(ci.iv, 1, sizeof(ci.iv));
	memset(ci.salt, 2, sizeof(ci.salt));
	ASSERT_OK(setsockopt(fd, SOL_TLS, dir, &ci, sizeof(ci)));
}

/* kTLS both ways on @fd. */
static void tls_on(int fd)
{
	tls_ulp(fd);
	tls_key(fd, TLS_TX, 7);
	tls_key(fd, TLS_RX, 7);
}

/* Nothing, not a byte, arrives on @fd within a while. */
static void nothing_arrives(int fd)
{
	usleep(200000);
	ASSERT_ERRNO(recv(fd, buf, sizeof(buf), MSG_DONTWAIT), EAGAIN);
}

/* The kcm_ext line of psock @index of the namespace's only mux. */
static void psock_line(int index, char *line, size_t size)
{
	char val[16];

	snprintf(val, sizeof(val), "%d", index);
	ASSERT_OK(kcm_ext_find("psock", "index", val, line, size));
}

/*
 * A socket with kTLS, or only the ULP and no keys yet, is refused with
 * EOPNOTSUPP and keeps working as a TLS connection.
 */
TEST_DIFFERS(tls_attach_refused, IN_CLEAR)
{
	int kcm = kcm_socket(SOCK_DGRAM), prog = kcm_u_parser_len4();
	int peer, local, peer2, local2;
	size_t len = kcm_u_msg_build(buf, 100, 1);
	char in[200];

	ASSERT_OK(kcm_u_tcp_pair(&peer, &local));
	tls_on(local);
	tls_on(peer);
	ASSERT_ERRNO(kcm_u_attach(kcm, local, prog), EOPNOTSUPP);
	ASSERT_OK(kcm_u_write_all(local, buf, len));
	ASSERT_OK(kcm_u_read_full(peer, in, len));
	ASSERT_EQ(memcmp(in, buf, len), 0);

	ASSERT_OK(kcm_u_tcp_pair(&peer2, &local2));
	tls_ulp(local2);
	ASSERT_ERRNO(kcm_u_attach(kcm, local2, prog), EOPNOTSUPP);
	/* And a plain one still attaches. */
	ASSERT_OK(kcm_u_attach(kcm, peer2, prog));
	close(kcm);
}

/*
 * kTLS turned on after the attach: the message KCM was to write goes
 * nowhere in clear.  The TCP socket and the KCM socket get EOPNOTSUPP,
 * the psock is stopped both ways and counted, a message addressed to it
 * fails with EOPNOTSUPP, and the message goes out, whole, on a
 * connection attached later.
 */
TEST_DIFFERS(tls_after_attach_send, IN_CLEAR)
{
	int peer, local, peer2, local2, kcm;
	size_t len = kcm_u_msg_build(buf, 300, 2);
	char line[1024], ctl[CMSG_SPACE(sizeof(__u32))];
	struct iovec iov = { buf, len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = ctl, .msg_controllen = sizeof(ctl) };
	struct cmsghdr *c;

	kcm_enter_netns();
	kcm = kcm_with_tcp(SOCK_DGRAM, &peer, &local);
	tls_on(local);
	ASSERT_EQ(send(kcm, buf, len, 0), len);
	nothing_arrives(peer);
	ASSERT_EQ(kcm_wait_so_error(local, 2000), EOPNOTSUPP);
	ASSERT_EQ(kcm_u_getsockopt_int(kcm, SOL_SOCKET, SO_ERROR), EOPNOTSUPP);
	psock_line(0, line, sizeof(line));
	EXPECT_EQ(kcm_ext_num(line, "ulp_stops"), 1);
	EXPECT_EQ(kcm_ext_num(line, "rx_stopped"), 1);
	EXPECT_EQ(kcm_ext_num(line, "tx_stopped"), 1);
	EXPECT_EQ(kcm_ext_num(line, "tx_msgs"), 0);

	/* Addressed to the stopped connection: refused, with the cause. */
	c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_KCM;
	c->cmsg_type = KCM_CONN_ID;
	c->cmsg_len = CMSG_LEN(sizeof(__u32));
	memset(CMSG_DATA(c), 0, sizeof(__u32));
	ASSERT_ERRNO(sendmsg(kcm, &mh, 0), EOPNOTSUPP);

	/* The first message was kept for another connection. */
	ASSERT_OK(kcm_u_tcp_pair(&peer2, &local2));
	ASSERT_OK(kcm_u_attach(kcm, local2, kcm_u_parser_len4()));
	kcm_u_set_timeo(peer2, SO_RCVTIMEO, 5000);
	ASSERT_EQ(kcm_u_read_msg(peer2, buf, sizeof(buf)), len);
	ASSERT_EQ(kcm_u_msg_check(buf, len), 2);
	nothing_arrives(peer);
	close(kcm);
}

/*
 * kTLS receive turned on after the attach: the peer's record reaches no
 * parser and no KCM socket; the TCP socket gets EOPNOTSUPP.
 */
TEST_DIFFERS(tls_after_attach_recv, IN_CLEAR)
{
	int peer, local, kcm;
	size_t len = kcm_u_msg_build(buf, 200, 3);
	char line[1024];

	kcm_enter_netns();
	kcm = kcm_with_tcp(SOCK_DGRAM, &peer, &local);
	tls_ulp(local);
	tls_key(local, TLS_RX, 9);
	tls_ulp(peer);
	tls_key(peer, TLS_TX, 9);
	ASSERT_OK(kcm_u_write_all(peer, buf, len));
	ASSERT_EQ(kcm_wait_so_error(local, 2000), EOPNOTSUPP);
	nothing_arrives(kcm);
	psock_line(0, line, sizeof(line));
	EXPECT_EQ(kcm_ext_num(line, "ulp_stops"), 1);
	EXPECT_EQ(kcm_ext_num(line, "rx_stopped"), 1);
	EXPECT_EQ(kcm_ext_num(line, "rx_msgs"), 0);
	close(kcm);
}

/*
 * Only the ULP, no keys: plain bytes from the peer are not framed either
 * (the application is setting TLS up), and nothing is sent.
 */
TEST_DIFFERS(tls_ulp_only, IN_CLEAR)
{
	int peer, local, kcm;
	size_t len = kcm_u_msg_build(buf, 50, 4);

	kcm_enter_netns();
	kcm = kcm_with_tcp(SOCK_SEQPACKET, &peer, &local);
	tls_ulp(local);
	ASSERT_OK(kcm_u_write_all(peer, buf, len));
	ASSERT_EQ(kcm_wait_so_error(local, 2000), EOPNOTSUPP);
	nothing_arrives(kcm);
	ASSERT_EQ(send(kcm, buf, len, MSG_EOR), len);
	nothing_arrives(peer);
	close(kcm);
}

/*
 * kTLS turned on after the attach, then unattach: the TCP socket goes
 * back with kTLS working both ways (kTLS took over KCM's callbacks and
 * gets the socket's own in their place), and after close nothing of KCM
 * is left in it.
 */
TEST_DIFFERS(tls_unattach_keeps_tls, IN_CLEAR)
{
	int peer, local, kcm, i;
	size_t len = kcm_u_msg_build(buf, 1000, 5);
	char in[2000];

	kcm = kcm_with_tcp(SOCK_DGRAM, &peer, &local);
	tls_on(local);
	tls_on(peer);
	/* A record arrives while attached: kTLS's callback calls KCM's. */
	ASSERT_OK(kcm_u_write_all(peer, buf, 100));
	ASSERT_EQ(kcm_wait_so_error(local, 2000), EOPNOTSUPP);
	ASSERT_OK(kcm_u_unattach(kcm, local));
	close(kcm);
	kcm_u_set_timeo(local, SO_RCVTIMEO, 5000);
	ASSERT_OK(kcm_u_read_full(local, in, 100));
	ASSERT_EQ(memcmp(in, buf, 100), 0);
	for (i = 0; i < 3; i++) {
		ASSERT_OK(kcm_u_write_all(peer, buf, len));
		ASSERT_OK(kcm_u_read_full(local, in, len));
		ASSERT_EQ(memcmp(in, buf, len), 0);
		ASSERT_OK(kcm_u_write_all(local, buf, len));
		ASSERT_OK(kcm_u_read_full(peer, in, len));
		ASSERT_EQ(memcmp(in, buf, len), 0);
	}
	close(local);
	close(peer);
}

KCM_TEST_MAIN
