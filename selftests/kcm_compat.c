// SPDX-License-Identifier: GPL-2.0
/*
 * The 32-bit compat path, from a 32-bit task on a 64-bit kernel (built
 * with -m32 as kcm_compat_32; kcm_basic_32 and kcm_ext_32 are the 64-bit
 * suites built the same way).  What only a 32-bit caller can get wrong,
 * or the kernel for it: struct kcm_attach_ext holds a struct sock_fprog,
 * whose pointer is 4 bytes here and 8 in the kernel, so the compat ioctl
 * must convert it (and zero-extend the pointer); bpf_attr pointers must be
 * passed zero-extended; recvmmsg()/sendmmsg() with KCM_CONN_ID control
 * messages in the 32-bit layout.  Pointers live above 2 GiB, where a
 * sign extension shows.
 *
 * The distro module has no compat ioctl: from a 32-bit task every
 * SIOCKCM* ioctl fails with ENOTTY there (observed; ioctl_result_by_module
 * records it).
 */
#define _GNU_SOURCE
#include <stddef.h>
#include <sys/mman.h>
#include <sys/utsname.h>

#include "kcm_data.h"

#if __SIZEOF_POINTER__ != 4
#error "kcm_compat.c is built with -m32 only (kcm_compat_32)"
#endif

#define NO_COMPAT "no compat ioctl: SIOCKCM* from a 32-bit task fail with ENOTTY"
#define PAGE	4096

/* One page above 2 GiB, followed by an inaccessible one; NULL if none. */
static char *high_page(void)
{
	static const unsigned long where[] = {
		0xe0000000, 0xd0000000, 0xc0000000, 0xb0000000, 0x90000000,
	};
	size_t i;

	for (i = 0; i < ARRAY_SIZE(where); i++) {
		void *p = mmap((void *)where[i], 2 * PAGE,
			       PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
			       -1, 0);

		if (p == MAP_FAILED)
			continue;
		if ((unsigned long)p != where[i] ||
		    mprotect((char *)p + PAGE, PAGE, PROT_NONE)) {
			munmap(p, 2 * PAGE);
			continue;
		}
		return p;
	}
	return NULL;
}

static char *must_high_page(void)
{
	char *p = high_page();

	ASSERT_TRUE(p);
	ASSERT_GE((unsigned long)p, 0x80000000UL);
	return p;
}

/* The documented parser in classic BPF: A = ntohl(word at 0); A += 4. */
static const struct sock_filter cbpf_len4[] = {
	BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 0),
	BPF_STMT(BPF_ALU | BPF_ADD | BPF_K, KCM_U_HDR),
	BPF_STMT(BPF_RET | BPF_A, 0),
};

/* The documented parser in eBPF: return load_word(skb, 0) + 4; */
static const struct bpf_insn ebpf_len4[] = {
	BPF_MOV64_REG(6, 1),
	BPF_LD_ABS_W(0),
	BPF_ADD64_IMM(0, KCM_U_HDR),
	BPF_EXIT_INSN(),
};

/*
 * A struct kcm_attach_ext for a classic program, laid out at @at; the 16
 * bytes of the union after the 32-bit struct sock_fprog are 0xff, where a
 * kernel reading the 64-bit layout would find the filter pointer.
 */
static struct kcm_attach_ext *ext_cbpf_at(void *at, int fd,
					  const struct sock_filter *f,
					  unsigned short len)
{
	struct kcm_attach_ext *att = at;

	memset(att, 0xff, sizeof(*att));
	att->fd = fd;
	att->bpf_type = KCM_BPF_TYPE_PROG;
	att->fprog.len = len;
	att->fprog.filter = (struct sock_filter *)f;
	return att;
}

/* A KCM socket of @type and a TCP pair, nothing attached. */
static int kcm_and_pair(int type, int *peer, int *local)
{
	int kcm = kcm_socket(type);

	ASSERT_GE(kcm, 0);
	ASSERT_OK(kcm_u_tcp_pair(peer, local));
	kcm_u_set_timeo(kcm, SO_RCVTIMEO, 5000);
	kcm_u_set_timeo(*peer, SO_RCVTIMEO, 10000);
	return kcm;
}

/* Messages of several sizes in one write arrive whole, one by one. */
static void check_framing(int peer, int kcm, uint32_t first)
{
	static const size_t sizes[] = { 0, 4, 31, 1000, 3000, 70000, 5 };
	static char buf[80000];
	size_t i;

	for (i = 0; i < ARRAY_SIZE(sizes); i++)
		ASSERT_OK(kcm_send_msgs(peer, first + i, 1, sizes[i]));
	for (i = 0; i < ARRAY_SIZE(sizes); i++)
		ASSERT_EQ(kcm_recv_check(kcm, buf, sizeof(buf)),
			  sizes[i] >= 4 ? (long)(first + i) : 0);
}

/* A message sent on @kcm reaches @peer byte for byte. */
static void check_tx(int kcm, int peer, uint32_t seq)
{
	char buf[256], got[256];
	size_t len = kcm_u_msg_build(buf, 40, seq);

	ASSERT_EQ(send(kcm, buf, len, MSG_EOR), len);
	ASSERT_OK(kcm_u_read_full(peer, got, len));
	ASSERT_EQ(memcmp(buf, got, len), 0);
}

/* The layouts a 32-bit task passes, and that the kernel is 64-bit. */
TEST(abi_32bit_layout)
{
	struct utsname u;

	ASSERT_EQ(sizeof(void *), 4);
	ASSERT_EQ(sizeof(long), 4);
	ASSERT_OK(uname(&u));
	if (strcmp(u.machine, "x86_64"))
		SKIP(return, "kernel is %s, not x86_64: no compat path", u.machine);
	/* Only the fprog differs from the 64-bit layout (8 + 8 there). */
	ASSERT_EQ(sizeof(struct sock_fprog), 8);
	ASSERT_EQ(offsetof(struct sock_fprog, filter), 4);
	ASSERT_EQ(offsetof(struct kcm_attach_ext, fprog), 8);
	ASSERT_EQ(offsetof(struct kcm_attach_ext, lenfield), 8);
	ASSERT_EQ(sizeof(struct kcm_lenfield), 24);
	ASSERT_EQ(sizeof(struct kcm_attach_ext), 32);
	ASSERT_EQ(offsetof(struct kcm_recv_key, fprog), 8);
	ASSERT_EQ(sizeof(struct kcm_recv_key), 24);
	ASSERT_EQ(sizeof(struct kcm_attach), 8);
	ASSERT_EQ(sizeof(struct kcm_unattach), 4);
	ASSERT_EQ(sizeof(struct kcm_clone), 4);
}

/* Ours converts every ioctl; the distro module converts none. */
TEST(ioctl_result_by_module)
{
	int fd = kcm_socket(SOCK_DGRAM);

	ASSERT_GE(fd, 0);
	if (kcm_test_against_distro())
		ASSERT_ERRNO(kcm_u_clone(fd), ENOTTY);
	else
		ASSERT_GE(kcm_u_clone(fd), 0);
}

/*
 * Classic BPF inline: the program and the argument above 2 GiB, the
 * argument in the last 32 bytes before an inaccessible page (a kernel
 * that read more than the 32-bit struct would fault).
 */
TEST_DIFFERS(cbpf_from_high_address, NO_COMPAT)
{
	char *page = must_high_page();
	struct sock_filter *f = (void *)page;
	struct kcm_attach_ext *att;
	int peer, local, kcm;

	kcm_enter_netns();
	memcpy(f, cbpf_len4, sizeof(cbpf_len4));
	kcm = kcm_and_pair(SOCK_DGRAM, &peer, &local);
	att = ext_cbpf_at(page + PAGE - sizeof(*att), local, f,
			  ARRAY_SIZE(cbpf_len4));
	ASSERT_OK(ioctl(kcm, SIOCKCMATTACHEXT, att));
	check_framing(peer, kcm, 100);
	check_tx(kcm, peer, 7);
	/* The kernel holds its own copy: the user's may go. */
	memset(f, 0, sizeof(cbpf_len4));
	check_framing(peer, kcm, 200);
	ASSERT_OK(kcm_u_unattach(kcm, local));
	ASSERT_ERRNO(kcm_u_unattach(kcm, local), ENOENT);
}

/*
 * KCM_RECV_KEY with a classic key function: its struct kcm_recv_key in
 * the last bytes before an inaccessible page, its program above 2 GiB.
 * The key is bit 0 of each message's number: every message of a key at
 * one of two sockets.
 */
TEST_DIFFERS(recv_key_cbpf_from_high_address,
	     "KCM_RECV_KEY fails with ENOPROTOOPT")
{
	static const struct sock_filter odd[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, KCM_U_HDR),
		BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 1),
		BPF_STMT(BPF_RET | BPF_A, 0),
	};
	char *page = must_high_page(), buf[256];
	struct sock_filter *f = (void *)page;
	int peer, local, kcm[2], owner[2] = { -1, -1 }, i, w, got = 0;
	struct kcm_recv_key *k, back;
	socklen_t len = sizeof(back);
	long seq;

	kcm_enter_netns();
	memcpy(f, odd, sizeof(odd));
	k = (void *)(page + PAGE - sizeof(*k));
	memset(k, 0xff, sizeof(*k));
	k->key_type = KCM_BPF_TYPE_PROG;
	k->reserved = 0;
	k->fprog.len = ARRAY_SIZE(odd);
	k->fprog.filter = f;
	kcm[0] = kcm_with_tcp(SOCK_DGRAM, &peer, &local);
	kcm[1] = kcm_u_clone(kcm[0]);
	ASSERT_GE(kcm[1], 0);
	ASSERT_OK(setsockopt(kcm[1], SOL_KCM, KCM_RECV_KEY, k, sizeof(*k)));
	ASSERT_OK(getsockopt(kcm[0], SOL_KCM, KCM_RECV_KEY, &back, &len));
	ASSERT_EQ(back.key_type, KCM_BPF_TYPE_PROG);
	/* A program in the inaccessible page cannot be read. */
	k->fprog.filter = (void *)(page + PAGE);
	ASSERT_ERRNO(setsockopt(kcm[1], SOL_KCM, KCM_RECV_KEY, k, sizeof(*k)),
		     EFAULT);

	ASSERT_OK(kcm_send_msgs(peer, 0, 20, 40));
	for (i = 0; i < 2000 && got < 20; i++) {
		for (w = 0; w < 2; w++) {
			ssize_t n = recv(kcm[w], buf, sizeof(buf), MSG_DONTWAIT);

			if (n < 0)
				continue;
			seq = kcm_u_msg_check(buf, n);
			ASSERT_TRUE(seq >= 0 && seq < 20);
			if (owner[seq & 1] < 0)
				owner[seq & 1] = w;
			ASSERT_EQ(owner[seq & 1], w);
			got++;
		}
		usleep(1000);
	}
	ASSERT_EQ(got, 20);
}

/* Bad input gets the errors the 64-bit tests get (kcm_ext). */
TEST_DIFFERS(cbpf_bad_input, NO_COMPAT)
{
	char *page = must_high_page();
	struct sock_filter *f = (void *)page;
	struct sock_filter junk[] = {
		{ .code = 0xffff },
		BPF_STMT(BPF_RET | BPF_K, 0),
	};
	struct kcm_attach_ext *att;
	struct kcm_attach_ext arg;
	int peer, local, kcm;

	kcm_enter_netns();
	memcpy(f, cbpf_len4, sizeof(cbpf_len4));
	kcm = kcm_and_pair(SOCK_DGRAM, &peer, &local);

	/* EFAULT: no argument, one cut by the inaccessible page, a program
	 * that cannot be read (in that page, at a low address).
	 */
	ASSERT_ERRNO(ioctl(kcm, SIOCKCMATTACHEXT, NULL), EFAULT);
	ext_cbpf_at(&arg, local, f, 3);
	memcpy(page + PAGE - (sizeof(arg) - 1), &arg, sizeof(arg) - 1);
	ASSERT_ERRNO(ioctl(kcm, SIOCKCMATTACHEXT,
			   page + PAGE - (sizeof(arg) - 1)), EFAULT);
	att = ext_cbpf_at(&arg, local, (void *)(page + PAGE), 3);
	ASSERT_ERRNO(ioctl(kcm, SIOCKCMATTACHEXT, att), EFAULT);
	att = ext_cbpf_at(&arg, local, (void *)8, 3);
	ASSERT_ERRNO(ioctl(kcm, SIOCKCMATTACHEXT, att), EFAULT);

	/* EINVAL: no program (NULL, as for SO_ATTACH_FILTER), empty,
	 * unterminated, a bad opcode, an unknown type.
	 */
	att = ext_cbpf_at(&arg, local, NULL, 3);
	ASSERT_ERRNO(ioctl(kcm, SIOCKCMATTACHEXT, att), EINVAL);
	att = ext_cbpf_at(&arg, local, f, 0);
	ASSERT_ERRNO(ioctl(kcm, SIOCKCMATTACHEXT, att), EINVAL);
	att = ext_cbpf_at(&arg, local, f, 2);
	ASSERT_ERRNO(ioctl(kcm, SIOCKCMATTACHEXT, att), EINVAL);
	att = ext_cbpf_at(&arg, local, junk, 2);
	ASSERT_ERRNO(ioctl(kcm, SIOCKCMATTACHEXT, att), EINVAL);
	att = ext_cbpf_at(&arg, local, f, 3);
	att->bpf_type = 99;
	ASSERT_ERRNO(ioctl(kcm, SIOCKCMATTACHEXT, att), EINVAL);

	/* ENOENT for no TCP socket, EBADF for no eBPF program. */
	att = ext_cbpf_at(&arg, -1, f, 3);
	ASSERT_ERRNO(ioctl(kcm, SIOCKCMATTACHEXT, att), ENOENT);
	memset(&arg, 0, sizeof(arg));
	att->fd = local;
	att->bpf_type = KCM_BPF_TYPE_FD;
	att->bpf_fd = -1;
	ASSERT_ERRNO(ioctl(kcm, SIOCKCMATTACHEXT, att), EBADF);

	/* None of it stuck: the socket attaches and frames. */
	att = ext_cbpf_at(&arg, local, f, 3);
	ASSERT_OK(ioctl(kcm, SIOCKCMATTACHEXT, att));
	check_framing(peer, kcm, 300);
}

/*
 * The length field parser: its argument, the same 32 bytes in both
 * layouts, in the last 32 before an inaccessible page; the compat ioctl
 * converts it field by field.  Bad parameters get kcm_ext's EINVAL, a
 * cut argument EFAULT.
 */
TEST_DIFFERS(lenfield_from_high_address, NO_COMPAT)
{
	char *page = must_high_page();
	struct kcm_attach_ext *att = (void *)(page + PAGE - sizeof(*att));
	static const struct kcm_lenfield bad[] = {
		{ .width = 3, .adjust = 4 },
		{ .width = 4, .byte_order = 2, .adjust = 4 },
		{ .width = 4, .adjust = 4, .reserved = 1 },
	};
	int peer, local, kcm;
	size_t i;

	kcm_enter_netns();
	kcm = kcm_and_pair(SOCK_SEQPACKET, &peer, &local);
	for (i = 0; i < ARRAY_SIZE(bad); i++) {
		memset(att, 0xff, sizeof(*att));
		att->fd = local;
		att->bpf_type = KCM_PARSER_LENFIELD;
		att->lenfield = bad[i];
		ASSERT_ERRNO(ioctl(kcm, SIOCKCMATTACHEXT, att), EINVAL);
	}
	ASSERT_ERRNO(ioctl(kcm, SIOCKCMATTACHEXT, (char *)att + 1), EFAULT);

	memset(att, 0, sizeof(*att));
	att->fd = local;
	att->bpf_type = KCM_PARSER_LENFIELD;
	att->lenfield.width = 4;
	att->lenfield.byte_order = KCM_LENFIELD_BE;
	att->lenfield.adjust = KCM_U_HDR;
	ASSERT_OK(ioctl(kcm, SIOCKCMATTACHEXT, att));
	ASSERT_ERRNO(ioctl(kcm, SIOCKCMATTACHEXT, att), EALREADY);
	check_framing(peer, kcm, 500);
	check_tx(kcm, peer, 9);
	ASSERT_OK(kcm_u_unattach(kcm, local));
	ASSERT_ERRNO(kcm_u_unattach(kcm, local), ENOENT);
}

static int load_len4_at(void *at, int zero_extend)
{
	struct bpf_insn *insns = at;
	union bpf_attr attr;

	memcpy(insns, ebpf_len4, sizeof(ebpf_len4));
	memset(&attr, 0, sizeof(attr));
	attr.prog_type = BPF_PROG_TYPE_SOCKET_FILTER;
	attr.insn_cnt = ARRAY_SIZE(ebpf_len4);
	attr.license = (uintptr_t)"GPL";
	if (zero_extend)
		attr.insns = (unsigned long)insns;
	else
		attr.insns = (long)insns;	/* sign-extended: wrong */
	return kcm_u_bpf(BPF_PROG_LOAD, &attr);
}

/*
 * bpf(2) from 32-bit code: a pointer in union bpf_attr is a __u64 and
 * must be the zero-extended address; (long) sign-extends one above 2 GiB
 * into an address that is not the caller's.
 */
TEST(bpf_attr_pointers_zero_extended)
{
	char *page = must_high_page();
	int prog;

	ASSERT_ERRNO(load_len4_at(page, 0), EFAULT);
	prog = load_len4_at(page, 1);
	ASSERT_GE(prog, 0);
	close(prog);
}

/*
 * eBPF by descriptor, through SIOCKCMATTACH and SIOCKCMATTACHEXT on one
 * mux; a clone receives with the original's KCM_RECV_DISABLE set; unattach
 * gives both connections back.
 */
TEST_DIFFERS(ebpf_attach_clone_unattach, NO_COMPAT)
{
	char *page = must_high_page();
	struct kcm_attach_ext *ext = (void *)(page + PAGE - sizeof(*ext));
	int peer[2], local[2], kcm, clone, prog, off = 1;
	char c;

	kcm_enter_netns();
	prog = load_len4_at(page, 1);
	ASSERT_GE(prog, 0);
	kcm = kcm_and_pair(SOCK_SEQPACKET, &peer[0], &local[0]);
	ASSERT_OK(kcm_u_tcp_pair(&peer[1], &local[1]));
	kcm_u_set_timeo(peer[1], SO_RCVTIMEO, 10000);

	ASSERT_ERRNO(ioctl(kcm, SIOCKCMATTACH, (void *)(page + PAGE - 4)),
		     EFAULT);
	ASSERT_OK(kcm_u_attach(kcm, local[0], prog));
	ASSERT_ERRNO(kcm_u_attach(kcm, local[0], prog), EALREADY);
	memset(ext, 0xff, sizeof(*ext));
	ext->fd = local[1];
	ext->bpf_type = KCM_BPF_TYPE_FD;
	ext->bpf_fd = prog;
	ASSERT_OK(ioctl(kcm, SIOCKCMATTACHEXT, ext));
	close(prog);
	check_framing(peer[0], kcm, 10);
	check_framing(peer[1], kcm, 20);

	ASSERT_ERRNO(ioctl(kcm, SIOCKCMCLONE, (void *)(page + PAGE)), EFAULT);
	clone = kcm_u_clone(kcm);
	ASSERT_GE(clone, 0);
	EXPECT_EQ(kcm_u_getsockopt_int(clone, SOL_SOCKET, SO_TYPE),
		  SOCK_SEQPACKET);
	kcm_u_set_timeo(clone, SO_RCVTIMEO, 5000);
	ASSERT_OK(setsockopt(kcm, SOL_KCM, KCM_RECV_DISABLE, &off,
			     sizeof(off)));
	ASSERT_EQ(kcm_u_getsockopt_int(kcm, SOL_KCM, KCM_RECV_DISABLE), 1);
	check_framing(peer[1], clone, 30);
	check_tx(clone, peer[0], 40);

	ASSERT_ERRNO(ioctl(kcm, SIOCKCMUNATTACH, (void *)(page + PAGE)),
		     EFAULT);
	ASSERT_OK(kcm_u_unattach(clone, local[0]));
	ASSERT_OK(kcm_u_unattach(kcm, local[1]));
	ASSERT_ERRNO(kcm_u_unattach(kcm, local[1]), ENOENT);
	/* Plain TCP again: bytes go to the socket, not to the mux. */
	ASSERT_EQ(write(peer[1], "x", 1), 1);
	ASSERT_EQ(read(local[1], &c, 1), 1);
	ASSERT_EQ(c, 'x');
}

#define NCONN	4
#define NMSG	(2 * NCONN)

/* One control message with connection id @id at @ctl (CMSG_SPACE(4)). */
static void put_conn_id(struct msghdr *m, char *ctl, __u32 id)
{
	struct cmsghdr *cmsg;

	memset(ctl, 0, CMSG_SPACE(sizeof(id)));
	m->msg_control = ctl;
	m->msg_controllen = CMSG_SPACE(sizeof(id));
	cmsg = CMSG_FIRSTHDR(m);
	cmsg->cmsg_level = SOL_KCM;
	cmsg->cmsg_type = KCM_CONN_ID;
	cmsg->cmsg_len = CMSG_LEN(sizeof(id));
	memcpy(CMSG_DATA(cmsg), &id, sizeof(id));
}

/*
 * recvmmsg() of messages from four connections, each with its KCM_CONN_ID
 * (the 32-bit struct mmsghdr and cmsghdr); sendmmsg() of the replies, each
 * addressed back with KCM_CONN_ID: every client gets exactly its own.
 */
TEST_DIFFERS(mmsg_with_conn_id, NO_COMPAT)
{
	static char data[NMSG][128];
	char ctl[NMSG][CMSG_SPACE(sizeof(__u32))];
	int peer[NCONN], local[NCONN], kcm, prog, i, one = 1;
	struct mmsghdr mm[NMSG];
	struct iovec iov[NMSG];
	__u32 id[NMSG];

	kcm_enter_netns();
	kcm = kcm_socket(SOCK_DGRAM);
	ASSERT_GE(kcm, 0);
	kcm_u_set_timeo(kcm, SO_RCVTIMEO, 5000);
	prog = kcm_u_parser_len4();
	ASSERT_GE(prog, 0);
	for (i = 0; i < NCONN; i++) {
		ASSERT_OK(kcm_u_tcp_pair(&peer[i], &local[i]));
		kcm_u_set_timeo(peer[i], SO_RCVTIMEO, 10000);
		ASSERT_OK(kcm_u_attach(kcm, local[i], prog));
	}
	close(prog);
	ASSERT_OK(setsockopt(kcm, SOL_KCM, KCM_RECV_CONN_ID, &one,
			     sizeof(one)));
	/* Message 1000 * i + j from client i, two each. */
	for (i = 0; i < NMSG; i++)
		ASSERT_OK(kcm_send_msgs(peer[i % NCONN],
					1000 * (i % NCONN) + i / NCONN, 1,
					16 + i));

	memset(mm, 0, sizeof(mm));
	for (i = 0; i < NMSG; i++) {
		iov[i].iov_base = data[i];
		iov[i].iov_len = sizeof(data[i]);
		mm[i].msg_hdr.msg_iov = &iov[i];
		mm[i].msg_hdr.msg_iovlen = 1;
		mm[i].msg_hdr.msg_control = ctl[i];
		mm[i].msg_hdr.msg_controllen = sizeof(ctl[i]);
	}
	ASSERT_EQ(recvmmsg(kcm, mm, NMSG, MSG_WAITFORONE, NULL) > 0, 1);
	/* MSG_WAITFORONE may return fewer; read the rest one by one. */
	for (i = 0; i < NMSG; i++) {
		struct cmsghdr *cmsg;
		long seq;

		if (!mm[i].msg_len)
			ASSERT_EQ(recvmmsg(kcm, &mm[i], 1, 0, NULL), 1);
		seq = kcm_u_msg_check(data[i], mm[i].msg_len);
		ASSERT_GE(seq, 0);
		ASSERT_EQ(mm[i].msg_hdr.msg_flags & (MSG_CTRUNC | MSG_TRUNC), 0);
		cmsg = CMSG_FIRSTHDR(&mm[i].msg_hdr);
		ASSERT_TRUE(cmsg);
		ASSERT_EQ(cmsg->cmsg_level, SOL_KCM);
		ASSERT_EQ(cmsg->cmsg_type, KCM_CONN_ID);
		ASSERT_EQ(cmsg->cmsg_len, CMSG_LEN(sizeof(__u32)));
		memcpy(&id[i], CMSG_DATA(cmsg), sizeof(id[i]));
		ASSERT_EQ(id[i], seq / 1000);
		ASSERT_TRUE(!CMSG_NXTHDR(&mm[i].msg_hdr, cmsg));
	}

	/* Echo all back in one sendmmsg(), each to where it came from. */
	for (i = 0; i < NMSG; i++) {
		iov[i].iov_len = mm[i].msg_len;
		mm[i].msg_len = 0;
		mm[i].msg_hdr.msg_flags = 0;
		put_conn_id(&mm[i].msg_hdr, ctl[i], id[i]);
	}
	ASSERT_EQ(sendmmsg(kcm, mm, NMSG, 0), NMSG);
	for (i = 0; i < NMSG; i++)
		EXPECT_EQ(mm[i].msg_len, iov[i].iov_len);
	for (i = 0; i < NCONN; i++) {
		char got[128];
		int j;

		for (j = 0; j < 2; j++) {
			long n = kcm_u_read_msg(peer[i], got, sizeof(got));

			ASSERT_GE(n, 0);
			ASSERT_EQ(kcm_u_msg_check(got, n), 1000 * i + j);
		}
		ASSERT_ERRNO(recv(peer[i], got, 1, MSG_DONTWAIT), EAGAIN);
	}
}

KCM_TEST_MAIN
