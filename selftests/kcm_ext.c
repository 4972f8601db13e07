// SPDX-License-Identifier: GPL-2.0
/*
 * Extensions of this KCM that upstream Linux does not have: accept() and
 * accept4() as a way to clone; SIOCKCMATTACHEXT with a classic BPF parser
 * (usable without privilege) or the built-in length field parser;
 * per-connection addressing with KCM_CONN_ID control messages.  The
 * distro module refuses them, which the TEST_DIFFERS reasons record as
 * observed there.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <sys/socket.h>

#include "kcm_data.h"

#define NO_ACCEPT "accept() on a KCM socket fails with EOPNOTSUPP"
#define NO_EXT "SIOCKCMATTACHEXT fails with ENOTTY"
#define NO_CONN "KCM_RECV_CONN_ID fails with ENOPROTOOPT"
#define NO_CMSG "KCM_CONN_ID control messages are ignored: the send succeeds"

/* Sends message @seq from @peer and checks that @kcm receives it whole. */
static void check_rx(int peer, int kcm, uint32_t seq)
{
	char buf[256];

	ASSERT_OK(kcm_send_msgs(peer, seq, 1, 32));
	kcm_u_set_timeo(kcm, SO_RCVTIMEO, 5000);
	ASSERT_EQ(kcm_recv_check(kcm, buf, sizeof(buf)), seq);
}

/* Sends message @seq on @kcm and checks the bytes @peer reads. */
static void check_tx(int kcm, int peer, uint32_t seq)
{
	char buf[256], got[256];
	size_t len = kcm_u_msg_build(buf, 40, seq);

	ASSERT_EQ(send(kcm, buf, len, MSG_EOR), len);
	ASSERT_OK(kcm_u_read_full(peer, got, len));
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
	EXPECT_EQ(kcm_u_getsockopt_int(a, SOL_SOCKET, SO_DOMAIN), AF_KCM);
	EXPECT_EQ(kcm_u_getsockopt_int(a, SOL_SOCKET, SO_TYPE), SOCK_DGRAM);

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
	EXPECT_EQ(kcm_u_getsockopt_int(a, SOL_SOCKET, SO_TYPE), SOCK_SEQPACKET);
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

/* ---- extended attach ------------------------------------------------ */

/* The documented parser in classic BPF: A = ntohl(word at 0); A += 4. */
static struct sock_filter cbpf_len4[] = {
	BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 0),
	BPF_STMT(BPF_ALU | BPF_ADD | BPF_K, KCM_U_HDR),
	BPF_STMT(BPF_RET | BPF_A, 0),
};

static int attach_cbpf(int kcm, int fd, struct sock_filter *insns,
		       unsigned short n)
{
	struct kcm_attach_ext att;

	memset(&att, 0, sizeof(att));
	att.fd = fd;
	att.bpf_type = KCM_BPF_TYPE_PROG;
	att.fprog.len = n;
	att.fprog.filter = insns;
	return ioctl(kcm, SIOCKCMATTACHEXT, &att);
}

static int attach_lenfield(int kcm, int fd, const struct kcm_lenfield *lf)
{
	struct kcm_attach_ext att;

	memset(&att, 0, sizeof(att));
	att.fd = fd;
	att.bpf_type = KCM_PARSER_LENFIELD;
	att.lenfield = *lf;
	return ioctl(kcm, SIOCKCMATTACHEXT, &att);
}

/* A KCM socket of @type with a new TCP pair, nothing attached yet. */
static int kcm_and_pair(int type, int *peer, int *local)
{
	int kcm = kcm_socket(type);

	ASSERT_GE(kcm, 0);
	ASSERT_OK(kcm_u_tcp_pair(peer, local));
	kcm_u_set_timeo(kcm, SO_RCVTIMEO, 5000);
	kcm_u_set_timeo(*peer, SO_RCVTIMEO, 10000);
	return kcm;
}

/* Messages of several sizes, sent in one write, arrive one by one. */
static void check_framing(int peer, int kcm)
{
	static const size_t sizes[] = { 0, 4, 31, 1000, 3000, 70000, 5 };
	char *buf = malloc(80000);
	size_t i;

	ASSERT_TRUE(buf);
	for (i = 0; i < ARRAY_SIZE(sizes); i++)
		ASSERT_OK(kcm_send_msgs(peer, i, 1, sizes[i]));
	for (i = 0; i < ARRAY_SIZE(sizes); i++)
		ASSERT_EQ(kcm_recv_check(kcm, buf, 80000), sizes[i] >= 4 ?
			  (long)i : 0);
	free(buf);
}

TEST_DIFFERS(cbpf_attach_frames, NO_EXT)
{
	int peer, local, kcm;

	kcm_enter_netns();
	kcm = kcm_and_pair(SOCK_DGRAM, &peer, &local);
	ASSERT_OK(attach_cbpf(kcm, local, cbpf_len4, ARRAY_SIZE(cbpf_len4)));
	/* Attached once is attached: the same socket again is EALREADY. */
	ASSERT_ERRNO(attach_cbpf(kcm, local, cbpf_len4,
				 ARRAY_SIZE(cbpf_len4)), EALREADY);
	check_framing(peer, kcm);
	check_tx(kcm, peer, 3);
	/* Unattach releases the program; the socket can be attached again. */
	ASSERT_OK(kcm_u_unattach(kcm, local));
	ASSERT_OK(attach_cbpf(kcm, local, cbpf_len4, ARRAY_SIZE(cbpf_len4)));
	check_rx(peer, kcm, 11);
}

/* A classic result from 2^31 on is an error, like a negative eBPF one. */
TEST_DIFFERS(cbpf_error_result, NO_EXT)
{
	struct sock_filter ret_err[] = {
		BPF_STMT(BPF_RET | BPF_K, (unsigned int)-EBADMSG),
	};
	int peer, local, kcm;

	kcm_enter_netns();
	kcm = kcm_and_pair(SOCK_DGRAM, &peer, &local);
	ASSERT_OK(attach_cbpf(kcm, local, ret_err, 1));
	ASSERT_OK(kcm_send_msgs(peer, 1, 1, 8));
	ASSERT_EQ(kcm_wait_so_error(local, 5000), EBADMSG);
}

TEST_DIFFERS(cbpf_unprivileged, NO_EXT)
{
	int peer, local, kcm, a;

	kcm_enter_netns();
	kcm_u_lo_up();
	kcm_disable_unprivileged_bpf();
	kcm_drop_privileges();

	/* eBPF, the only parser upstream has, is out of reach now. */
	ASSERT_ERRNO(kcm_u_parser_len4(), EPERM);

	/* Everything else works as nobody, end to end. */
	kcm = kcm_and_pair(SOCK_SEQPACKET, &peer, &local);
	ASSERT_OK(attach_cbpf(kcm, local, cbpf_len4, ARRAY_SIZE(cbpf_len4)));
	check_framing(peer, kcm);
	check_tx(kcm, peer, 12);
	a = accept4(kcm, NULL, NULL, SOCK_CLOEXEC);
	ASSERT_GE(a, 0);
	check_tx(a, peer, 13);
}

struct lenfield_case {
	unsigned int offset, width, order;
	int adjust;		/* header counted: offset + width + extra */
};

/* Builds a message: @off filler bytes, the field, the payload. */
static size_t lf_build(char *buf, const struct lenfield_case *c,
		       size_t plen, uint32_t seq)
{
	size_t hdr = c->offset + c->width, total = hdr + plen, i;
	unsigned long long v = total - c->adjust;

	memset(buf, 0xa5, c->offset);
	for (i = 0; i < c->width; i++) {
		unsigned int shift = c->order == KCM_LENFIELD_LE ?
				     8 * i : 8 * (c->width - 1 - i);

		buf[c->offset + i] = (char)(v >> shift);
	}
	for (i = 0; i < plen; i++)
		buf[hdr + i] = kcm_u_msg_byte(seq, i);
	return total;
}

static void lenfield_case_run(const struct lenfield_case *c)
{
	static const size_t sizes[] = { 0, 1, 100, 200, 3000, 20000 };
	struct kcm_lenfield lf = {
		.offset = c->offset, .width = c->width,
		.byte_order = c->order, .adjust = c->adjust,
	};
	char *out = malloc(ARRAY_SIZE(sizes) * 20100);
	char *in = malloc(20100);
	size_t i, n = 0, len[ARRAY_SIZE(sizes)], off = 0;
	int peer, local, kcm, flags;

	ASSERT_TRUE(out && in);
	kcm = kcm_and_pair(SOCK_DGRAM, &peer, &local);
	ASSERT_OK(attach_lenfield(kcm, local, &lf));
	for (i = 0; i < ARRAY_SIZE(sizes); i++) {
		/* A one-byte field cannot count the large ones. */
		if (c->width == 1 && c->offset + 1 + sizes[i] - c->adjust > 255)
			continue;
		len[n] = lf_build(out + off, c, sizes[i], i);
		off += len[n++];
	}
	/* One write, so messages share segments and split across them. */
	ASSERT_OK(kcm_u_write_all(peer, out, off));
	for (off = 0, i = 0; i < n; off += len[i++]) {
		ASSERT_EQ(kcm_recv(kcm, in, 20100, 0, &flags), len[i]);
		ASSERT_TRUE(flags & MSG_EOR);
		ASSERT_EQ(memcmp(in, out + off, len[i]), 0);
	}
	close(kcm);
	close(peer);
	close(local);
	free(out);
	free(in);
}

TEST_DIFFERS(lenfield_every_width_and_order, NO_EXT)
{
	static const unsigned int widths[] = { 1, 2, 4, 8 };
	unsigned int w, o;

	kcm_enter_netns();
	for (w = 0; w < ARRAY_SIZE(widths); w++) {
		for (o = 0; o < 2; o++) {
			/* The field counts the payload only... */
			struct lenfield_case payload = {
				.offset = 0, .width = widths[w], .order = o,
				.adjust = widths[w],
			};
			/* ...or comes after 3 bytes and counts 5 too many. */
			struct lenfield_case shifted = {
				.offset = 3, .width = widths[w], .order = o,
				.adjust = -5,
			};

			lenfield_case_run(&payload);
			lenfield_case_run(&shifted);
		}
	}
}

/* The field counts the whole message (adjust 0), at an odd offset. */
TEST_DIFFERS(lenfield_whole_length, NO_EXT)
{
	struct lenfield_case c = { .offset = 7, .width = 2,
				   .order = KCM_LENFIELD_LE, .adjust = 0 };

	kcm_enter_netns();
	lenfield_case_run(&c);
}

TEST_DIFFERS(lenfield_bad_parameters, NO_EXT)
{
	static const struct kcm_lenfield bad[] = {
		{ .width = 0 }, { .width = 3 }, { .width = 16 },
		{ .width = 4, .byte_order = 2 },
		{ .width = 4, .reserved = 1 },
		{ .width = 4, .offset = 65536 },
		{ .width = 4, .offset = 4, .max_len = 7 },
		{ .width = 4, .max_len = (unsigned int)INT_MAX + 1 },
	};
	struct kcm_lenfield good = { .width = 4, .adjust = 4 };
	struct kcm_attach_ext att;
	int peer, local, kcm;
	size_t i;

	kcm_enter_netns();
	kcm = kcm_and_pair(SOCK_DGRAM, &peer, &local);
	for (i = 0; i < ARRAY_SIZE(bad); i++)
		ASSERT_ERRNO(attach_lenfield(kcm, local, &bad[i]), EINVAL);

	memset(&att, 0, sizeof(att));
	att.fd = local;
	att.bpf_type = 0;
	ASSERT_ERRNO(ioctl(kcm, SIOCKCMATTACHEXT, &att), EINVAL);
	att.bpf_type = 99;
	ASSERT_ERRNO(ioctl(kcm, SIOCKCMATTACHEXT, &att), EINVAL);
	ASSERT_ERRNO(ioctl(kcm, SIOCKCMATTACHEXT, NULL), EFAULT);
	ASSERT_ERRNO(attach_lenfield(kcm, -1, &good), ENOENT);
	/* Not a TCP socket (a KCM one is never attached). */
	ASSERT_ERRNO(attach_lenfield(kcm, kcm_socket(SOCK_DGRAM), &good),
		     EOPNOTSUPP);

	/* Classic BPF: none (NULL), empty, unterminated, bad opcode,
	 * unreadable.
	 */
	ASSERT_ERRNO(attach_cbpf(kcm, local, NULL, 3), EINVAL);
	ASSERT_ERRNO(attach_cbpf(kcm, local, cbpf_len4, 0), EINVAL);
	ASSERT_ERRNO(attach_cbpf(kcm, local, cbpf_len4, 2), EINVAL);
	{
		struct sock_filter junk[] = {
			{ .code = 0xffff },
			BPF_STMT(BPF_RET | BPF_K, 0),
		};

		ASSERT_ERRNO(attach_cbpf(kcm, local, junk, 2), EINVAL);
	}
	ASSERT_ERRNO(attach_cbpf(kcm, local, (struct sock_filter *)8, 3),
		     EFAULT);
	/* eBPF through the extended ioctl: a bad descriptor. */
	att.bpf_type = KCM_BPF_TYPE_FD;
	att.bpf_fd = -1;
	ASSERT_ERRNO(ioctl(kcm, SIOCKCMATTACHEXT, &att), EBADF);

	/* None of it stuck: the socket attaches and frames. */
	ASSERT_OK(attach_lenfield(kcm, local, &good));
	check_rx(peer, kcm, 21);
}

/* eBPF through the extended ioctl works as SIOCKCMATTACH does. */
TEST_DIFFERS(ext_ebpf_fd, NO_EXT)
{
	struct kcm_attach_ext att;
	int peer, local, kcm;

	kcm_enter_netns();
	kcm = kcm_and_pair(SOCK_DGRAM, &peer, &local);
	memset(&att, 0, sizeof(att));
	att.fd = local;
	att.bpf_type = KCM_BPF_TYPE_FD;
	att.bpf_fd = kcm_u_parser_len4();
	ASSERT_GE(att.bpf_fd, 0);
	ASSERT_OK(ioctl(kcm, SIOCKCMATTACHEXT, &att));
	close(att.bpf_fd);
	check_framing(peer, kcm);
}

/* Sends raw @bytes on a lenfield psock; returns the TCP socket's error. */
static int lenfield_error(const struct kcm_lenfield *lf, const char *bytes,
			  size_t n)
{
	int peer, local, kcm, err;

	kcm = kcm_and_pair(SOCK_DGRAM, &peer, &local);
	ASSERT_OK(attach_lenfield(kcm, local, lf));
	ASSERT_OK(kcm_u_write_all(peer, bytes, n));
	err = kcm_wait_so_error(local, 5000);
	close(kcm);
	close(peer);
	close(local);
	return err;
}

TEST_DIFFERS(lenfield_bad_lengths, NO_EXT)
{
	struct kcm_lenfield max100 = { .width = 2, .adjust = 2,
				       .max_len = 100 };
	struct kcm_lenfield w8 = { .width = 8, .offset = 1 };
	struct kcm_lenfield neg = { .width = 1, .adjust = -10 };
	struct kcm_stats before, after;
	char big[8] = { 0, 99 };	/* 99 + 2 = 101 > 100 */
	char ok[100] = { 0, 98 };	/* exactly 100 */
	char huge[9] = { 0, 0, 0, 0, 1, 0, 0, 0, 0 };	/* 2^32 */
	char small[9] = { 0, 0, 0, 0, 0, 0, 0, 0, 8 };	/* 8 < 9 */
	char under[2] = { 5 };		/* 5 - 10 < 1 */
	int peer, local, kcm;

	kcm_enter_netns();
	ASSERT_EQ(kcm_stats_read(&before), 0);
	ASSERT_EQ(lenfield_error(&max100, big, sizeof(big)), EMSGSIZE);
	ASSERT_EQ(lenfield_error(&w8, huge, sizeof(huge)), EMSGSIZE);
	ASSERT_EQ(lenfield_error(&w8, small, sizeof(small)), EPROTO);
	ASSERT_EQ(lenfield_error(&neg, under, sizeof(under)), EPROTO);
	ASSERT_EQ(kcm_stats_read(&after), 0);
	ASSERT_EQ(after.psock[KP_RX_TOO_BIG] - before.psock[KP_RX_TOO_BIG], 2);
	ASSERT_EQ(after.psock[KP_RX_BAD_LEN] - before.psock[KP_RX_BAD_LEN], 2);

	/* At the maximum is fine. */
	kcm = kcm_and_pair(SOCK_DGRAM, &peer, &local);
	ASSERT_OK(attach_lenfield(kcm, local, &max100));
	ASSERT_OK(kcm_u_write_all(peer, ok, sizeof(ok)));
	ASSERT_EQ(recv(kcm, ok, sizeof(ok), 0), sizeof(ok));
	ASSERT_EQ(kcm_u_getsockopt_int(local, SOL_SOCKET, SO_ERROR), 0);
}

/* The distro module's answer, observed there; ours attaches. */
TEST(attach_ext_result_by_module)
{
	struct kcm_lenfield lf = { .width = 4, .adjust = 4 };
	int peer, local, kcm;

	kcm_enter_netns();
	kcm = kcm_and_pair(SOCK_DGRAM, &peer, &local);
	if (kcm_test_against_distro())
		ASSERT_ERRNO(attach_lenfield(kcm, local, &lf), ENOTTY);
	else
		ASSERT_OK(attach_lenfield(kcm, local, &lf));
}

/* ---- per-connection addressing -------------------------------------- */

#define NCLIENTS	8
#define NREQ		20

/* A mux with NCLIENTS connections; @client[i] is the peer of psock i. */
struct conn_mux {
	int kcm;
	int client[NCLIENTS];
	int server[NCLIENTS];
};

static void conn_mux_setup(struct conn_mux *m, int type)
{
	int prog = kcm_u_parser_len4(), i;

	ASSERT_GE(prog, 0);
	m->kcm = kcm_socket(type);
	ASSERT_GE(m->kcm, 0);
	kcm_u_set_timeo(m->kcm, SO_RCVTIMEO, 5000);
	for (i = 0; i < NCLIENTS; i++) {
		ASSERT_OK(kcm_u_tcp_pair(&m->client[i], &m->server[i]));
		kcm_u_set_timeo(m->client[i], SO_RCVTIMEO, 10000);
		ASSERT_OK(kcm_u_attach(m->kcm, m->server[i], prog));
	}
	close(prog);
}

/* The ids of the psock- lines of /proc/net/kcm, in order; returns count. */
static int proc_psock_ids(unsigned int *ids, int max)
{
	char line[512];
	int n = 0;
	FILE *f = fopen("/proc/net/kcm", "r");

	ASSERT_TRUE(f);
	while (fgets(line, sizeof(line), f)) {
		const char *s = line + strspn(line, " ");

		if (n < max && sscanf(s, "psock-%u ", &ids[n]) == 1)
			n++;
	}
	fclose(f);
	return n;
}

static int set_recv_conn_id(int fd, int on)
{
	return setsockopt(fd, SOL_KCM, KCM_RECV_CONN_ID, &on, sizeof(on));
}

/* recvmsg() with room for one control message; *@id = -1 without one. */
static ssize_t recv_with_id(int fd, char *buf, size_t len, long long *id)
{
	char ctl[CMSG_SPACE(sizeof(__u32))];
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct msghdr msg = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = ctl, .msg_controllen = sizeof(ctl),
	};
	struct cmsghdr *cmsg;
	ssize_t n = recvmsg(fd, &msg, 0);
	__u32 v;

	*id = -1;
	if (n < 0)
		return n;
	ASSERT_EQ(msg.msg_flags & MSG_CTRUNC, 0);
	for (cmsg = CMSG_FIRSTHDR(&msg); cmsg; cmsg = CMSG_NXTHDR(&msg, cmsg)) {
		ASSERT_EQ(cmsg->cmsg_level, SOL_KCM);
		ASSERT_EQ(cmsg->cmsg_type, KCM_CONN_ID);
		ASSERT_EQ(cmsg->cmsg_len, CMSG_LEN(sizeof(__u32)));
		memcpy(&v, CMSG_DATA(cmsg), sizeof(v));
		*id = v;
	}
	return n;
}

/* sendmsg() of @buf addressed to connection @id (none when @id < 0). */
static ssize_t send_to_id(int fd, const char *buf, size_t len, long long id,
			  int flags)
{
	char ctl[CMSG_SPACE(sizeof(__u32))];
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *cmsg;
	__u32 v = id;

	if (id >= 0) {
		memset(ctl, 0, sizeof(ctl));
		msg.msg_control = ctl;
		msg.msg_controllen = sizeof(ctl);
		cmsg = CMSG_FIRSTHDR(&msg);
		cmsg->cmsg_level = SOL_KCM;
		cmsg->cmsg_type = KCM_CONN_ID;
		cmsg->cmsg_len = CMSG_LEN(sizeof(v));
		memcpy(CMSG_DATA(cmsg), &v, sizeof(v));
	}
	return sendmsg(fd, &msg, flags);
}

TEST_DIFFERS(conn_id_option, NO_CONN)
{
	int fd = kcm_socket(SOCK_DGRAM), a;

	ASSERT_GE(fd, 0);
	ASSERT_EQ(kcm_u_getsockopt_int(fd, SOL_KCM, KCM_RECV_CONN_ID), 0);
	ASSERT_OK(set_recv_conn_id(fd, 5));
	ASSERT_EQ(kcm_u_getsockopt_int(fd, SOL_KCM, KCM_RECV_CONN_ID), 1);
	/* Per socket: a clone starts without it. */
	a = accept(fd, NULL, NULL);
	ASSERT_GE(a, 0);
	ASSERT_EQ(kcm_u_getsockopt_int(a, SOL_KCM, KCM_RECV_CONN_ID), 0);
	ASSERT_OK(set_recv_conn_id(fd, 0));
	ASSERT_EQ(kcm_u_getsockopt_int(fd, SOL_KCM, KCM_RECV_CONN_ID), 0);
	ASSERT_ERRNO(setsockopt(fd, SOL_KCM, KCM_RECV_CONN_ID, &a, 2),
		     EINVAL);
}

/* Every reply reaches exactly the client that sent the request. */
TEST_DIFFERS(conn_id_echo_server, NO_CONN)
{
	unsigned int ids[NCLIENTS + 1];
	char buf[256], want[256];
	struct conn_mux m;
	int i, j;
	long long id;
	ssize_t n;

	kcm_enter_netns();
	conn_mux_setup(&m, SOCK_DGRAM);
	/* The ids are the psock- indexes of /proc, in attach order. */
	ASSERT_EQ(proc_psock_ids(ids, NCLIENTS + 1), NCLIENTS);
	for (i = 0; i < NCLIENTS; i++)
		ASSERT_EQ(ids[i], i);
	ASSERT_OK(set_recv_conn_id(m.kcm, 1));

	/* All clients send before the server reads: requests interleave. */
	for (j = 0; j < NREQ; j++)
		for (i = 0; i < NCLIENTS; i++)
			ASSERT_OK(kcm_send_msgs(m.client[i], i * 1000 + j, 1,
						8 + i * 13 + j));

	for (j = 0; j < NREQ * NCLIENTS; j++) {
		n = recv_with_id(m.kcm, buf, sizeof(buf), &id);
		ASSERT_GE(n, 0);
		ASSERT_GE(id, 0);
		ASSERT_LT(id, NCLIENTS);
		/* It came from the client that the id names. */
		ASSERT_EQ(kcm_u_msg_check(buf, n) / 1000, id);
		ASSERT_EQ(send_to_id(m.kcm, buf, n, id, 0), n);
	}

	for (i = 0; i < NCLIENTS; i++) {
		for (j = 0; j < NREQ; j++) {
			size_t len = kcm_u_msg_build(want, 8 + i * 13 + j,
						     i * 1000 + j);

			ASSERT_OK(kcm_u_read_full(m.client[i], buf, len));
			ASSERT_EQ(memcmp(buf, want, len), 0);
		}
		/* Nothing else arrived on this connection. */
		ASSERT_ERRNO(recv(m.client[i], buf, 1, MSG_DONTWAIT), EAGAIN);
	}
}

TEST_DIFFERS(conn_id_absent_without_option, NO_CONN)
{
	struct conn_mux m;
	char buf[256];
	long long id;

	kcm_enter_netns();
	conn_mux_setup(&m, SOCK_SEQPACKET);
	ASSERT_OK(kcm_send_msgs(m.client[3], 1, 1, 10));
	ASSERT_EQ(recv_with_id(m.kcm, buf, sizeof(buf), &id), KCM_U_HDR + 10);
	ASSERT_EQ(id, -1);
	ASSERT_OK(set_recv_conn_id(m.kcm, 1));
	ASSERT_OK(kcm_send_msgs(m.client[5], 2, 1, 10));
	ASSERT_EQ(recv_with_id(m.kcm, buf, sizeof(buf), &id), KCM_U_HDR + 10);
	ASSERT_EQ(id, 5);
	/* Without room for it the reader is told so. */
	ASSERT_OK(kcm_send_msgs(m.client[5], 3, 1, 10));
	{
		int flags;

		ASSERT_EQ(kcm_recv(m.kcm, buf, sizeof(buf), 0, &flags),
			  KCM_U_HDR + 10);
		ASSERT_TRUE(flags & MSG_CTRUNC);
	}
}

TEST_DIFFERS(conn_id_send_errors, NO_CMSG)
{
	char buf[64], ctl[CMSG_SPACE(8)];
	struct iovec iov = { .iov_base = buf, .iov_len = 0 };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
			      .msg_control = ctl };
	unsigned int ids[NCLIENTS + 2];
	struct cmsghdr *cmsg;
	struct conn_mux m;
	int peer, local, prog;
	size_t len;

	kcm_enter_netns();
	conn_mux_setup(&m, SOCK_DGRAM);
	len = kcm_u_msg_build(buf, 20, 1);
	iov.iov_len = len;

	ASSERT_ERRNO(send_to_id(m.kcm, buf, len, NCLIENTS, 0), ENOENT);
	ASSERT_ERRNO(send_to_id(m.kcm, buf, len, 0xffffffff, 0), ENOENT);

	/* Malformed: a wrong length, an unknown SOL_KCM type. */
	memset(ctl, 0, sizeof(ctl));
	cmsg = (struct cmsghdr *)ctl;
	cmsg->cmsg_level = SOL_KCM;
	cmsg->cmsg_type = KCM_CONN_ID;
	cmsg->cmsg_len = CMSG_LEN(8);
	msg.msg_controllen = CMSG_SPACE(8);
	ASSERT_ERRNO(sendmsg(m.kcm, &msg, 0), EINVAL);
	cmsg->cmsg_type = 77;
	cmsg->cmsg_len = CMSG_LEN(4);
	ASSERT_ERRNO(sendmsg(m.kcm, &msg, 0), EINVAL);

	/* One message, two different addresses. */
	ASSERT_EQ(send_to_id(m.kcm, buf, 10, 1, MSG_MORE), 10);
	ASSERT_ERRNO(send_to_id(m.kcm, buf + 10, len - 10, 2, 0), EINVAL);
	/* The same address again, or none, completes it on connection 1. */
	ASSERT_EQ(send_to_id(m.kcm, buf + 10, len - 10, -1, 0), len - 10);
	{
		char got[64];

		ASSERT_OK(kcm_u_read_full(m.client[1], got, len));
		ASSERT_EQ(memcmp(got, buf, len), 0);
	}

	/* An unattached connection's id is gone and is never reused. */
	ASSERT_OK(kcm_u_unattach(m.kcm, m.server[4]));
	ASSERT_ERRNO(send_to_id(m.kcm, buf, len, 4, 0), ENOENT);
	prog = kcm_u_parser_len4();
	ASSERT_GE(prog, 0);
	ASSERT_OK(kcm_u_tcp_pair(&peer, &local));
	ASSERT_OK(kcm_u_attach(m.kcm, local, prog));
	ASSERT_EQ(proc_psock_ids(ids, NCLIENTS + 2), NCLIENTS);
	ASSERT_EQ(ids[NCLIENTS - 1], NCLIENTS);
	ASSERT_ERRNO(send_to_id(m.kcm, buf, len, 4, 0), ENOENT);
	ASSERT_EQ(send_to_id(m.kcm, buf, len, NCLIENTS, 0), len);
	{
		char got[64];

		kcm_u_set_timeo(peer, SO_RCVTIMEO, 10000);
		ASSERT_OK(kcm_u_read_full(peer, got, len));
		ASSERT_EQ(memcmp(got, buf, len), 0);
	}
}

/* A connection that failed: its messages are not sent elsewhere. */
TEST_DIFFERS(conn_id_stopped_connection,
	     "KCM_CONN_ID is ignored; the send after a reset raises SIGPIPE")
{
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };
	struct conn_mux m;
	char buf[64];
	size_t len;
	int i, err = 0;

	kcm_enter_netns();
	conn_mux_setup(&m, SOCK_DGRAM);
	len = kcm_u_msg_build(buf, 20, 1);
	/* Client 2 resets its connection. */
	ASSERT_OK(setsockopt(m.client[2], SOL_SOCKET, SO_LINGER, &lg,
			     sizeof(lg)));
	close(m.client[2]);
	usleep(100000);

	/* The first write finds out; from then on it is EPIPE. */
	for (i = 0; i < 10 && !err; i++) {
		if (send_to_id(m.kcm, buf, len, 2, 0) < 0)
			err = errno;
		usleep(20000);
	}
	ASSERT_EQ(err, EPIPE);
	ASSERT_ERRNO(send_to_id(m.kcm, buf, len, 2, 0), EPIPE);
	/* No other client got them, and the socket still works. */
	for (i = 0; i < NCLIENTS; i++)
		if (i != 2)
			ASSERT_ERRNO(recv(m.client[i], buf, 1, MSG_DONTWAIT),
				     EAGAIN);
	check_tx(m.kcm, m.client[0], 5);
}

/* Fills @ctl with a KCM_CONN_ID control message for @id and points @msg at it. */
static void set_conn_cmsg(struct msghdr *msg, char *ctl, size_t size, __u32 id)
{
	struct cmsghdr *cmsg;

	memset(ctl, 0, size);
	msg->msg_control = ctl;
	msg->msg_controllen = CMSG_SPACE(sizeof(id));
	cmsg = CMSG_FIRSTHDR(msg);
	cmsg->cmsg_level = SOL_KCM;
	cmsg->cmsg_type = KCM_CONN_ID;
	cmsg->cmsg_len = CMSG_LEN(sizeof(id));
	memcpy(CMSG_DATA(cmsg), &id, sizeof(id));
}

/* A sendmmsg() stopped by an unknown connection: the first two go now. */
TEST_DIFFERS(conn_id_mmsg_cut_short, NO_CMSG)
{
	enum { N = 5 };
	static char bufs[N][64], ctl[N][CMSG_SPACE(sizeof(__u32))];
	struct mmsghdr mm[N];
	struct iovec iov[N];
	struct conn_mux m;
	char got[64];
	int i;

	kcm_enter_netns();
	conn_mux_setup(&m, SOCK_DGRAM);
	memset(mm, 0, sizeof(mm));
	for (i = 0; i < N; i++) {
		iov[i].iov_base = bufs[i];
		iov[i].iov_len = kcm_u_msg_build(bufs[i], 30, i);
		mm[i].msg_hdr.msg_iov = &iov[i];
		mm[i].msg_hdr.msg_iovlen = 1;
		set_conn_cmsg(&mm[i].msg_hdr, ctl[i], sizeof(ctl[i]),
			      i == 2 ? NCLIENTS + 5 : 3);
	}
	ASSERT_EQ(sendmmsg(m.kcm, mm, N, 0), 2);
	kcm_u_set_timeo(m.client[3], SO_RCVTIMEO, 2000);
	for (i = 0; i < 2; i++) {
		ASSERT_OK(kcm_u_read_full(m.client[3], got, iov[i].iov_len));
		ASSERT_EQ(memcmp(got, bufs[i], iov[i].iov_len), 0);
	}
	usleep(100000);
	for (i = 0; i < NCLIENTS; i++)
		ASSERT_ERRNO(recv(m.client[i], got, 1, MSG_DONTWAIT), EAGAIN);
}

/*
 * One round of conn_id_unattach_queued: messages addressed to connection
 * 1, whose peer does not read, fill the socket; connection 1 is
 * unattached after @delay_us.
 */
static void unattach_queued_round(int delay_us)
{
	int sndbuf = 65536, small = 4096, n = 0, i, got = -1;
	struct pollfd pfd[NCLIENTS];
	struct kcm_stats st;
	struct conn_mux m;
	char buf[300], line[1024];
	size_t len;

	kcm_enter_netns();
	conn_mux_setup(&m, SOCK_DGRAM);
	ASSERT_OK(setsockopt(m.kcm, SOL_SOCKET, SO_SNDBUF, &sndbuf,
			     sizeof(sndbuf)));
	ASSERT_OK(setsockopt(m.server[1], SOL_SOCKET, SO_SNDBUF, &small,
			     sizeof(small)));
	ASSERT_OK(setsockopt(m.client[1], SOL_SOCKET, SO_RCVBUF, &small,
			     sizeof(small)));
	len = kcm_u_msg_build(buf, 200, 1);
	while (send_to_id(m.kcm, buf, len, 1, MSG_DONTWAIT) == (ssize_t)len)
		ASSERT_LT(++n, 100000);
	ASSERT_EQ(errno, EAGAIN);
	usleep(delay_us);
	/*
	 * The case under test: messages still queued on the KCM socket.  Its
	 * send buffer is much larger than what the stalled TCP connection
	 * can absorb (the receiver compacting its queue lets a few KB more
	 * through: with an 8 KB buffer a debug kernel once drained it all).
	 */
	ASSERT_OK(kcm_ext_find("kcm", NULL, NULL, line, sizeof(line)));
	ASSERT_GT(kcm_ext_num(line, "send_q"), 0);
	ASSERT_OK(kcm_u_unattach(m.kcm, m.server[1]));

	/* ENOENT, whatever the timing, and only once. */
	ASSERT_EQ(kcm_wait_so_error(m.kcm, 2000), ENOENT);
	usleep(50000);
	ASSERT_EQ(kcm_u_getsockopt_int(m.kcm, SOL_SOCKET, SO_ERROR), 0);
	/* Nothing went to another connection. */
	for (i = 0; i < NCLIENTS; i++)
		if (i != 1)
			ASSERT_ERRNO(recv(m.client[i], buf, 1, MSG_DONTWAIT),
				     EAGAIN);
	/* The next unaddressed message goes out on one that is left. */
	len = kcm_u_msg_build(buf, 100, 777);
	ASSERT_EQ(send_to_id(m.kcm, buf, len, -1, 0), len);
	for (i = 0; i < NCLIENTS; i++)
		pfd[i] = (struct pollfd){ .fd = i == 1 ? -1 : m.client[i],
					  .events = POLLIN };
	ASSERT_EQ(poll(pfd, NCLIENTS, 2000), 1);
	for (i = 0; i < NCLIENTS; i++) {
		if (!(pfd[i].revents & POLLIN))
			continue;
		ASSERT_EQ(kcm_u_read_msg(m.client[i], buf, sizeof(buf)),
			  KCM_U_HDR + 100);
		got = kcm_u_msg_check(buf, KCM_U_HDR + 100);
	}
	ASSERT_EQ(got, 777);
	/* Dropped, not retried. */
	ASSERT_OK(kcm_stats_read(&st));
	ASSERT_EQ(st.mux[KS_TX_RETRIES], 0);
	ASSERT_OK(kcm_ext_find("mux", NULL, NULL, line, sizeof(line)));
	ASSERT_EQ(kcm_ext_num(line, "tx_retries"), 0);
	ASSERT_GE(kcm_ext_num(line, "tx_dropped"), 1);
	close(m.kcm);
	for (i = 0; i < NCLIENTS; i++) {
		close(m.client[i]);
		close(m.server[i]);
	}
}

/*
 * Unattach a connection that addressed messages wait for, at various
 * moments: its messages are dropped with ENOENT, reported once, never
 * sent elsewhere and not counted as retries; the socket carries on.
 */
TEST_DIFFERS(conn_id_unattach_queued, NO_CONN)
{
	int round;

	for (round = 0; round < 12; round++)
		unattach_queued_round((round % 4) * 20000);
}

/* Reads one whole test message from @fd if one is there; its seq or -2. */
static long read_one(int fd, char *buf, size_t cap)
{
	__u32 hdr;

	if (recv(fd, &hdr, KCM_U_HDR, MSG_PEEK | MSG_DONTWAIT) != KCM_U_HDR)
		return -2;
	ASSERT_LT(ntohl(hdr), cap - KCM_U_HDR);
	ASSERT_OK(kcm_u_read_full(fd, buf, KCM_U_HDR + ntohl(hdr)));
	return kcm_u_msg_check(buf, KCM_U_HDR + ntohl(hdr));
}

/*
 * Several KCM sockets send addressed and unaddressed messages at once,
 * crossing each other's reservations: every addressed message reaches
 * its connection, every message arrives whole, nothing hangs.  The
 * senders stay open until everything has arrived (a closing socket drops
 * what it has not started to send).
 */
TEST_DIFFERS(conn_id_concurrent_senders, NO_ACCEPT)
{
	enum { NSEND = 4, NMSG = 300 };
	long got_directed[NCLIENTS] = { 0 }, total = 0, want, seq;
	int s, i, j, quiet, hold[2];
	struct conn_mux m;
	pid_t pid[NSEND];
	char buf[256];

	kcm_enter_netns();
	conn_mux_setup(&m, SOCK_DGRAM);
	ASSERT_OK(pipe(hold));
	for (s = 0; s < NSEND; s++) {
		int fd = accept(m.kcm, NULL, NULL);

		ASSERT_GE(fd, 0);
		pid[s] = fork();
		ASSERT_GE(pid[s], 0);
		if (!pid[s]) {
			close(hold[1]);
			for (j = 0; j < NMSG; j++) {
				/* seq: sender, index, target (9: none) */
				long to = (j % 3) ? (j + s) % NCLIENTS : -1;
				size_t len = kcm_u_msg_build(buf, 16 + j % 50,
					s * 100000 + j * 10 +
					(to < 0 ? 9 : to));

				if (send_to_id(fd, buf, len, to, 0) !=
				    (ssize_t)len)
					_exit(1);
			}
			/* Until the parent closes the pipe. */
			if (read(hold[0], buf, 1) != 0)
				_exit(1);
			_exit(0);
		}
		close(fd);
	}
	close(hold[0]);

	for (quiet = 0; total < NSEND * NMSG && quiet < 200; ) {
		int got = 0;

		for (i = 0; i < NCLIENTS; i++) {
			while ((seq = read_one(m.client[i], buf,
					       sizeof(buf))) != -2) {
				ASSERT_GE(seq, 0);
				if (seq % 10 != 9) {
					ASSERT_EQ(seq % 10, i);
					got_directed[i]++;
				}
				total++;
				got = 1;
			}
		}
		quiet = got ? 0 : quiet + 1;
		if (!got)
			usleep(50000);
	}
	close(hold[1]);
	for (s = 0; s < NSEND; s++)
		ASSERT_EQ(kcm_wait_child(pid[s]), 0);

	ASSERT_EQ(total, NSEND * NMSG);
	for (i = 0; i < NCLIENTS; i++) {
		want = 0;
		for (s = 0; s < NSEND; s++)
			for (j = 0; j < NMSG; j++)
				want += (j % 3) && (j + s) % NCLIENTS == i;
		ASSERT_EQ(got_directed[i], want);
	}
}

KCM_TEST_MAIN
