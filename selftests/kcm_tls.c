// SPDX-License-Identifier: GPL-2.0
/*
 * KCM and kernel TLS.  A connection with kTLS never carries a KCM message
 * in clear, nor feeds its ciphertext to the parser.  From 6.6 on, where
 * kTLS hands decrypted records to read_sock, KCM goes through kTLS: a
 * TCP socket with software kTLS, set up before or after the attach, is
 * framed from its plaintext and written through its encryption.  Before
 * 6.6 (and for set-ups KCM cannot go through) attach refuses it with
 * EOPNOTSUPP, and kTLS set up after the attach stops the psock, both
 * ways, before a byte is read or written: EOPNOTSUPP on the TCP socket
 * and on the KCM socket whose message was to go out, ulp_stops in
 * /proc/net/kcm_ext; its messages go out on the other connections.
 * Either way unattach gives the socket back with kTLS working.
 *
 * Each test asserts what the running kernel can give; kcm_tls_carried() says
 * which.  kTLS is set up as the kernel's selftests/net/tls.c does, without
 * a handshake: TCP_ULP "tls", then keys for TLS_TX and TLS_RX.  A kernel
 * without kTLS (no tls module) gives a SKIP.
 */
#define _GNU_SOURCE
#include "kcm_data.h"

#define IN_CLEAR "the distro module attaches a kTLS socket and frames what it does not decrypt"

#define NMSGS		200
#define MAXP		20000	/* longest payload: more than a record */

static char buf[2 * 1024 * 1024];
static char in[2 * 1024 * 1024];

/* TCP_ULP "tls" on @fd, or SKIP when the kernel has no kTLS. */
static void tls_ulp(int fd)
{
	int ret = kcm_u_ktls_ulp(fd);

	if (ret && errno == ENOENT)
		SKIP(return, "no kTLS: TCP_ULP \"tls\": %s", strerror(errno));
	ASSERT_EQ(ret, 0);
}

/* A TLS version and cipher. */
struct suite {
	const char *name;
	unsigned short version;
	unsigned short cipher;
};

static const struct suite suites[] = {
	{ "1.2 AES-GCM-128", TLS_1_2_VERSION, TLS_CIPHER_AES_GCM_128 },
	{ "1.2 AES-GCM-256", TLS_1_2_VERSION, TLS_CIPHER_AES_GCM_256 },
	{ "1.2 ChaCha20-Poly1305", TLS_1_2_VERSION,
	  TLS_CIPHER_CHACHA20_POLY1305 },
	{ "1.3 AES-GCM-128", TLS_1_3_VERSION, TLS_CIPHER_AES_GCM_128 },
	{ "1.3 AES-GCM-256", TLS_1_3_VERSION, TLS_CIPHER_AES_GCM_256 },
	{ "1.3 AES-CCM-128", TLS_1_3_VERSION, TLS_CIPHER_AES_CCM_128 },
	{ "1.3 ChaCha20-Poly1305", TLS_1_3_VERSION,
	  TLS_CIPHER_CHACHA20_POLY1305 },
};

/* Keys of @s for @dir (TLS_TX or TLS_RX) on @fd (kcm_u_ktls_key()). */
static void tls_key(int fd, int dir, const struct suite *s,
		    unsigned char key)
{
	ASSERT_OK(kcm_u_ktls_key(fd, dir, s->version, s->cipher, key));
}

/* kTLS both ways on @fd, with @s and @key. */
static void tls_on_with(int fd, const struct suite *s, unsigned char key)
{
	tls_ulp(fd);
	tls_key(fd, TLS_TX, s, key);
	tls_key(fd, TLS_RX, s, key);
}

static void tls_on(int fd)
{
	tls_on_with(fd, &suites[0], 7);
}

/* Nothing, not a byte, arrives on @fd within a while. */
static void nothing_arrives(int fd)
{
	usleep(200000);
	ASSERT_ERRNO(recv(fd, in, sizeof(in), MSG_DONTWAIT), EAGAIN);
}

/* The kcm_ext line of psock @index of the namespace's only mux. */
static void psock_line(int index, char *line, size_t size)
{
	char val[16];

	snprintf(val, sizeof(val), "%d", index);
	ASSERT_OK(kcm_ext_find("psock", "index", val, line, size));
}

/* Messages @first.. of 4 to MAXP payload bytes into buf; their bytes. */
static size_t build(int n, uint32_t first, size_t *len)
{
	size_t off = 0;
	int i;

	for (i = 0; i < n; i++) {
		/* Four bytes at least: the sequence number. */
		size_t plen = 4 + (i * 2654435761u >> 7) % (i % 7 ? 300 : MAXP);

		len[i] = kcm_u_msg_build(buf + off, plen, first + i);
		off += len[i];
	}
	return off;
}

/*
 * The kTLS peer writes @n messages in pieces of awkward sizes (each write
 * is a record or more: many messages per record, messages over several);
 * the KCM socket reads each whole, byte-exact, in order.
 */
static void peer_to_kcm(int peer, int kcm, int n, uint32_t first)
{
	size_t len[NMSGS], total = build(n, first, len), off, piece;
	int i;

	for (off = 0, i = 0; off < total; off += piece, i++) {
		piece = 1 + (i * 40503u) % 9000;
		if (piece > total - off)
			piece = total - off;
		ASSERT_OK(kcm_u_write_all(peer, buf + off, piece));
	}
	for (i = 0; i < n; i++) {
		ASSERT_EQ(kcm_recv_check(kcm, in, sizeof(in)), first + i);
		ASSERT_EQ(kcm_u_msg_check(in, len[i]), first + i);
	}
}

/*
 * The KCM socket sends @n messages (single sends and a sendmmsg() batch);
 * the kTLS peer reads every one whole, byte-exact, in order.
 */
static void kcm_to_peer(int kcm, int peer, int n, uint32_t first)
{
	size_t len[NMSGS], off = 0;
	struct mmsghdr mm[16];
	struct iovec iov[16];
	int i, k;

	build(n, first, len);
	for (i = 0; i < n; ) {
		k = n - i < 16 ? n - i : 16;
		if (i % 32) {
			ASSERT_EQ(send(kcm, buf + off, len[i], 0), len[i]);
			off += len[i++];
			continue;
		}
		memset(mm, 0, sizeof(mm));
		for (int j = 0; j < k; j++) {
			iov[j] = (struct iovec){ buf + off, len[i + j] };
			mm[j].msg_hdr.msg_iov = &iov[j];
			mm[j].msg_hdr.msg_iovlen = 1;
			off += len[i + j];
		}
		ASSERT_EQ(sendmmsg(kcm, mm, k, 0), k);
		i += k;
	}
	for (i = 0; i < n; i++) {
		ASSERT_EQ(kcm_u_read_msg(peer, in, sizeof(in)), len[i]);
		ASSERT_EQ(kcm_u_msg_check(in, len[i]), first + i);
	}
}

/* A KCM socket with big buffers, @local attached; NULL for no attach. */
static int tls_kcm(int local)
{
	int kcm = kcm_socket(SOCK_DGRAM), prog = kcm_u_parser_len4();
	int big = 8 << 20;

	ASSERT_GE(kcm, 0);
	ASSERT_GE(prog, 0);
	ASSERT_OK(setsockopt(kcm, SOL_SOCKET, SO_SNDBUFFORCE, &big,
			     sizeof(big)));
	ASSERT_OK(setsockopt(kcm, SOL_SOCKET, SO_RCVBUFFORCE, &big,
			     sizeof(big)));
	kcm_u_set_timeo(kcm, SO_RCVTIMEO, 10000);
	if (local >= 0)
		ASSERT_OK(kcm_u_attach(kcm, local, prog));
	close(prog);
	return kcm;
}

/* A TCP pair whose peer reads time out instead of hanging a test. */
static void tls_pair(int *peer, int *local)
{
	ASSERT_OK(kcm_u_tcp_pair(peer, local));
	kcm_u_set_timeo(*peer, SO_RCVTIMEO, 10000);
}

/*
 * Every version and cipher (TLS 1.3 with TLS_RX_EXPECT_NO_PAD), kTLS set
 * up on both ends before the attach: from 6.6 messages go both ways
 * through it; before, attach refuses the socket with EOPNOTSUPP and it
 * works on as a TLS connection.
 */
TEST_DIFFERS(tls_suites_attach_before, IN_CLEAR)
{
	int kcm, peer, local, prog = kcm_u_parser_len4();
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(suites); i++) {
		TH_LOG("%s", suites[i].name);
		tls_pair(&peer, &local);
		tls_on_with(local, &suites[i], 3 + i);
		tls_on_with(peer, &suites[i], 3 + i);
		/* TLS 1.3: the receive option of kTLS works beneath KCM. */
		if (suites[i].version == TLS_1_3_VERSION)
			ASSERT_OK(kcm_u_setsockopt_int(local, SOL_TLS,
						       TLS_RX_EXPECT_NO_PAD,
						       1));
		if (!kcm_tls_carried()) {
			kcm = tls_kcm(-1);
			ASSERT_ERRNO(kcm_u_attach(kcm, local, prog), EOPNOTSUPP);
			ASSERT_OK(kcm_u_write_all(local, "abcd", 4));
			ASSERT_OK(kcm_u_read_full(peer, in, 4));
			ASSERT_EQ(memcmp(in, "abcd", 4), 0);
		} else {
			kcm = tls_kcm(local);
			peer_to_kcm(peer, kcm, NMSGS, 1000 * i);
			kcm_to_peer(kcm, peer, NMSGS, 1000 * i);
		}
		close(kcm);
		close(peer);
		close(local);
	}
}

/*
 * kTLS set up after the attach, keys on both ends: from 6.6 the
 * connection goes on through it.  Before, see the tests below.
 */
TEST_DIFFERS(tls_attach_after, IN_CLEAR)
{
	int kcm, peer, local;

	if (!kcm_tls_carried())
		SKIP(return, "kTLS after attach stops the psock before 6.6: tls_stop_*");
	tls_pair(&peer, &local);
	kcm = tls_kcm(local);
	tls_on_with(local, &suites[3], 5);
	tls_on_with(peer, &suites[3], 5);
	kcm_to_peer(kcm, peer, 50, 1);
	peer_to_kcm(peer, kcm, 50, 2000);
	close(kcm);
}

/*
 * What goes on the wire is a TLS record, not the message: a peer without
 * kTLS receive reads record headers (type 23, version 3.3) and never the
 * plaintext.  From 6.6 the distribution module writes through kTLS too.
 */
TEST(tls_wire_is_ciphertext)
{
	int kcm, peer, local;
	size_t len = kcm_u_msg_build(buf, 500, 0x5a5a5a);
	ssize_t got;

	if (!kcm_tls_carried())
		SKIP(return, "KCM does not go through kTLS before 6.6");
	tls_pair(&peer, &local);
	tls_on(local);
	kcm = tls_kcm(local);
	ASSERT_EQ(send(kcm, buf, len, 0), len);
	got = recv(peer, in, sizeof(in), 0);
	ASSERT_GT(got, 5);
	ASSERT_EQ((unsigned char)in[0], 23);
	ASSERT_EQ((unsigned char)in[1], 3);
	ASSERT_EQ((unsigned char)in[2], 3);
	ASSERT_TRUE(!memmem(in, got, buf + 8, 64));
	close(kcm);
}

/*
 * Only the ULP, no keys yet: KCM writes nothing and reads nothing (before
 * 6.6 the psock stops).  From 6.6, once the keys are set the message that
 * waited goes out through kTLS.
 */
TEST_DIFFERS(tls_waits_for_keys, IN_CLEAR)
{
	int kcm, peer, local;
	size_t len = kcm_u_msg_build(buf, 50, 4);

	kcm_enter_netns();
	tls_pair(&peer, &local);
	kcm = tls_kcm(local);
	tls_ulp(local);
	ASSERT_EQ(send(kcm, buf, len, 0), len);
	nothing_arrives(peer);
	if (!kcm_tls_carried()) {
		ASSERT_EQ(kcm_wait_so_error(local, 2000), EOPNOTSUPP);
		close(kcm);
		return;
	}
	ASSERT_EQ(kcm_u_getsockopt_int(local, SOL_SOCKET, SO_ERROR), 0);
	tls_key(local, TLS_TX, &suites[0], 8);
	tls_key(local, TLS_RX, &suites[0], 8);
	tls_on_with(peer, &suites[0], 8);
	ASSERT_EQ(kcm_u_read_msg(peer, in, sizeof(in)), len);
	ASSERT_EQ(kcm_u_msg_check(in, len), 4);
	peer_to_kcm(peer, kcm, 10, 50);
	close(kcm);
}

/*
 * A record that does not decrypt (the peer has another key) stops that
 * connection with EBADMSG; the mux's other connection goes on.
 */
TEST_DIFFERS(tls_wrong_key, IN_CLEAR)
{
	int kcm, peer, local, peer2, local2;
	char line[1024];

	if (!kcm_tls_carried())
		SKIP(return, "KCM does not go through kTLS before 6.6");
	kcm_enter_netns();
	tls_pair(&peer, &local);
	tls_pair(&peer2, &local2);
	tls_on_with(local, &suites[0], 1);
	tls_ulp(peer);
	tls_key(peer, TLS_TX, &suites[0], 2);
	tls_on_with(local2, &suites[4], 6);
	tls_on_with(peer2, &suites[4], 6);
	kcm = tls_kcm(local);
	ASSERT_OK(kcm_u_attach(kcm, local2, kcm_u_parser_len4()));
	ASSERT_OK(kcm_send_msgs(peer, 1, 3, 100));
	ASSERT_EQ(kcm_wait_so_error(local, 5000), EBADMSG);
	psock_line(0, line, sizeof(line));
	EXPECT_EQ(kcm_ext_num(line, "rx_stopped"), 1);
	EXPECT_EQ(kcm_ext_num(line, "rx_msgs"), 0);
	EXPECT_EQ(kcm_ext_num(line, "ulp_stops"), 0);
	peer_to_kcm(peer2, kcm, 20, 100);
	close(kcm);
}

/* Sends a TLS alert record (close_notify) from @fd. */
static void send_alert(int fd)
{
	char ctl[CMSG_SPACE(sizeof(unsigned char))];
	unsigned char alert[2] = { 1, 0 };
	struct iovec iov = { alert, sizeof(alert) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = ctl, .msg_controllen = sizeof(ctl) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);

	c->cmsg_level = SOL_TLS;
	c->cmsg_type = TLS_SET_RECORD_TYPE;
	c->cmsg_len = CMSG_LEN(sizeof(unsigned char));
	*CMSG_DATA(c) = 21;
	ASSERT_EQ(sendmsg(fd, &mh, 0), sizeof(alert));
}

/*
 * A record that is not application data (here an alert) stops the
 * connection with EINVAL after the messages before it; after unattach
 * the application reads the alert itself, with its record type.
 */
TEST_DIFFERS(tls_alert, IN_CLEAR)
{
	int kcm, peer, local;
	char ctl[CMSG_SPACE(sizeof(unsigned char))];
	struct iovec iov = { in, sizeof(in) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = ctl, .msg_controllen = sizeof(ctl) };
	struct cmsghdr *c;

	if (!kcm_tls_carried())
		SKIP(return, "KCM does not go through kTLS before 6.6");
	tls_pair(&peer, &local);
	tls_on(local);
	tls_on(peer);
	kcm = tls_kcm(local);
	peer_to_kcm(peer, kcm, 5, 1);
	send_alert(peer);
	ASSERT_EQ(kcm_wait_so_error(local, 5000), EINVAL);
	ASSERT_OK(kcm_u_unattach(kcm, local));
	kcm_u_set_timeo(local, SO_RCVTIMEO, 5000);
	ASSERT_EQ(recvmsg(local, &mh, 0), 2);
	c = CMSG_FIRSTHDR(&mh);
	ASSERT_TRUE(c && c->cmsg_level == SOL_TLS &&
		    c->cmsg_type == TLS_GET_RECORD_TYPE);
	ASSERT_EQ(*CMSG_DATA(c), 21);
	close(kcm);
}

/*
 * kTLS set up after the attach, then unattach (or the mux goes with its
 * last socket): the TCP socket carries kTLS records both ways, the one
 * that arrived while attached included, and nothing of KCM is left in
 * it.  Before 6.6 the psock had stopped; from 6.6 it had carried the
 * connection.
 */
static void keeps_tls(int by_close)
{
	int peer, local, kcm, i;
	size_t len = kcm_u_msg_build(buf, 1000, 5);

	tls_pair(&peer, &local);
	kcm = tls_kcm(local);
	tls_on(local);
	tls_on(peer);
	if (kcm_tls_carried()) {
		peer_to_kcm(peer, kcm, 20, 1);
		kcm_to_peer(kcm, peer, 20, 100);
	} else {
		/* A record arrives: kTLS's callback calls KCM's. */
		ASSERT_OK(kcm_u_write_all(peer, buf, 100));
		ASSERT_EQ(kcm_wait_so_error(local, 2000), EOPNOTSUPP);
	}
	if (!by_close)
		ASSERT_OK(kcm_u_unattach(kcm, local));
	close(kcm);
	kcm_u_set_timeo(local, SO_RCVTIMEO, 5000);
	if (!kcm_tls_carried()) {
		ASSERT_OK(kcm_u_read_full(local, in, 100));
		ASSERT_EQ(memcmp(in, buf, 100), 0);
	}
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

TEST_DIFFERS(tls_unattach_keeps_tls, IN_CLEAR)
{
	keeps_tls(0);
	keeps_tls(1);
}

/*
 * Before 6.6: kTLS turned on after the attach.  The message KCM was to
 * write goes nowhere in clear; the TCP socket and the KCM socket get
 * EOPNOTSUPP, the psock is stopped both ways and counted, a message
 * addressed to it fails with EOPNOTSUPP, and the message goes out, whole,
 * on a connection attached later.
 */
TEST_DIFFERS(tls_stop_send, IN_CLEAR)
{
	int peer, local, peer2, local2, kcm;
	size_t len = kcm_u_msg_build(buf, 300, 2);
	char line[1024], ctl[CMSG_SPACE(sizeof(__u32))];
	struct iovec iov = { buf, len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = ctl, .msg_controllen = sizeof(ctl) };
	struct cmsghdr *c;

	if (kcm_tls_carried())
		SKIP(return, "from 6.6 KCM goes through kTLS: tls_attach_after");
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
	tls_pair(&peer2, &local2);
	ASSERT_OK(kcm_u_attach(kcm, local2, kcm_u_parser_len4()));
	ASSERT_EQ(kcm_u_read_msg(peer2, in, sizeof(in)), len);
	ASSERT_EQ(kcm_u_msg_check(in, len), 2);
	nothing_arrives(peer);
	close(kcm);
}

/*
 * Before 6.6: kTLS receive turned on after the attach: the peer's record
 * reaches no parser and no KCM socket; the TCP socket gets EOPNOTSUPP.
 */
TEST_DIFFERS(tls_stop_recv, IN_CLEAR)
{
	int peer, local, kcm;
	size_t len = kcm_u_msg_build(buf, 200, 3);
	char line[1024];

	if (kcm_tls_carried())
		SKIP(return, "from 6.6 KCM goes through kTLS: tls_attach_after");
	kcm_enter_netns();
	kcm = kcm_with_tcp(SOCK_DGRAM, &peer, &local);
	tls_ulp(local);
	tls_key(local, TLS_RX, &suites[0], 9);
	tls_ulp(peer);
	tls_key(peer, TLS_TX, &suites[0], 9);
	ASSERT_OK(kcm_u_write_all(peer, buf, len));
	ASSERT_EQ(kcm_wait_so_error(local, 2000), EOPNOTSUPP);
	nothing_arrives(kcm);
	psock_line(0, line, sizeof(line));
	EXPECT_EQ(kcm_ext_num(line, "ulp_stops"), 1);
	EXPECT_EQ(kcm_ext_num(line, "rx_stopped"), 1);
	EXPECT_EQ(kcm_ext_num(line, "rx_msgs"), 0);
	close(kcm);
}

KCM_TEST_MAIN
