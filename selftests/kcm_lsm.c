// SPDX-License-Identifier: GPL-2.0
/*
 * Linux security modules see KCM clones: a BPF LSM program on the
 * socket_post_create hook counts AF_KCM sockets created by user space and,
 * when told to, refuses them.  Upstream creates clones without these hooks,
 * so there a clone is neither seen nor refused.  A clone made by accept()
 * (not in upstream) goes through the socket_accept hook instead.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>

#include "kcm_lib.h"
#include "kcm_bpf.h"

struct lsm_state {
	__u64 created;	/* AF_KCM sockets (accepts) seen by the hook */
	__u64 deny;		/* non-zero: refuse them with EPERM */
};

static int lsm_map;

/* Loads @prog (its map at @prog[@map_at]) on the LSM hook @hook. */
static int lsm_attach(const char *hook, struct bpf_insn *prog,
		      unsigned int n, unsigned int map_at)
{
	static char log[65536];
	int id, fd, link;

	id = kcm_btf_func_id(hook);
	if (id < 0)
		SKIP(return -1, "no BTF for %s (CONFIG_BPF_LSM?)", hook);
	lsm_map = kcm_bpf_array_map(sizeof(struct lsm_state));
	ASSERT_GE(lsm_map, 0);
	prog[map_at].imm = lsm_map;
	fd = kcm_u_bpf_load(BPF_PROG_TYPE_LSM, BPF_LSM_MAC, id, prog, n, log,
			    sizeof(log));
	if (fd < 0) {
		printf("# verifier: %s\n", log);
		ASSERT_GE(fd, 0);
	}
	link = kcm_bpf_attach_tracing(fd);
	if (link < 0 && errno == EOPNOTSUPP)
		SKIP(return -1, "BPF LSM is not active (lsm= boot option)");
	ASSERT_GE(link, 0);
	return link;
}

/*
 * int socket_post_create(struct socket *sock, int family, int type,
 *			  int protocol, int kern)
 */
static int load_lsm_prog(void)
{
	struct bpf_insn prog[] = {
		BPF_MOV64_REG(BPF_REG_6, BPF_REG_1),
		BPF_LDX_MEM(BPF_DW, BPF_REG_2, BPF_REG_6, 8),	/* family */
		BPF_JMP32_IMM(BPF_JNE, BPF_REG_2, AF_KCM, 15),
		BPF_LDX_MEM(BPF_DW, BPF_REG_2, BPF_REG_6, 32),	/* kern */
		BPF_JMP32_IMM(BPF_JNE, BPF_REG_2, 0, 13),
		BPF_ST_MEM(BPF_W, BPF_REG_10, -4, 0),
		BPF_LD_MAP_FD(BPF_REG_1, lsm_map),
		BPF_MOV64_REG(BPF_REG_2, BPF_REG_10),
		BPF_ADD64_IMM(BPF_REG_2, -4),
		BPF_CALL_HELPER(BPF_FUNC_map_lookup_elem),
		BPF_JMP_IMM(BPF_JEQ, BPF_REG_0, 0, 6),
		BPF_MOV64_IMM(BPF_REG_1, 1),
		BPF_ATOMIC_ADD64(BPF_REG_0, BPF_REG_1, 0),	/* created++ */
		BPF_LDX_MEM(BPF_DW, BPF_REG_1, BPF_REG_0, 8),	/* deny */
		BPF_JMP_IMM(BPF_JEQ, BPF_REG_1, 0, 2),
		BPF_MOV64_IMM(BPF_REG_0, -EPERM),
		BPF_EXIT_INSN(),
		BPF_MOV64_IMM(BPF_REG_0, 0),			/* allow: */
		BPF_EXIT_INSN(),
	};

	return lsm_attach("bpf_lsm_socket_post_create", prog,
			  ARRAY_SIZE(prog), 6);
}

/*
 * int socket_accept(struct socket *sock, struct socket *newsock): counts
 * and maybe refuses every accept (the test makes no other).
 */
static int load_accept_prog(void)
{
	struct bpf_insn prog[] = {
		BPF_ST_MEM(BPF_W, BPF_REG_10, -4, 0),
		BPF_LD_MAP_FD(BPF_REG_1, lsm_map),
		BPF_MOV64_REG(BPF_REG_2, BPF_REG_10),
		BPF_ADD64_IMM(BPF_REG_2, -4),
		BPF_CALL_HELPER(BPF_FUNC_map_lookup_elem),
		BPF_JMP_IMM(BPF_JEQ, BPF_REG_0, 0, 6),
		BPF_MOV64_IMM(BPF_REG_1, 1),
		BPF_ATOMIC_ADD64(BPF_REG_0, BPF_REG_1, 0),	/* created++ */
		BPF_LDX_MEM(BPF_DW, BPF_REG_1, BPF_REG_0, 8),	/* deny */
		BPF_JMP_IMM(BPF_JEQ, BPF_REG_1, 0, 2),
		BPF_MOV64_IMM(BPF_REG_0, -EPERM),
		BPF_EXIT_INSN(),
		BPF_MOV64_IMM(BPF_REG_0, 0),			/* allow: */
		BPF_EXIT_INSN(),
	};

	return lsm_attach("bpf_lsm_socket_accept", prog, ARRAY_SIZE(prog), 1);
}

static struct lsm_state lsm_read(void)
{
	struct lsm_state st;

	ASSERT_EQ(kcm_bpf_map_rw(BPF_MAP_LOOKUP_ELEM, lsm_map, &st), 0);
	return st;
}

static void lsm_deny(int deny)
{
	struct lsm_state st = lsm_read();

	st.deny = deny;
	ASSERT_EQ(kcm_bpf_map_rw(BPF_MAP_UPDATE_ELEM, lsm_map, &st), 0);
}

TEST_DIFFERS(lsm_sees_clones,
	     "clones are created without the LSM socket hooks")
{
	int fd, c;

	load_lsm_prog();
	ASSERT_EQ(lsm_read().created, 0);
	fd = kcm_socket(SOCK_DGRAM);
	ASSERT_GE(fd, 0);
	ASSERT_EQ(lsm_read().created, 1);
	c = kcm_u_clone(fd);
	ASSERT_GE(c, 0);
	ASSERT_EQ(lsm_read().created, 2);
	ASSERT_GE(kcm_u_clone(c), 0);
	ASSERT_EQ(lsm_read().created, 3);
}

TEST_DIFFERS(lsm_refuses_clones,
	     "clones are created without the LSM socket hooks")
{
	struct kcm_proc p;
	int fd;

	kcm_enter_netns();
	load_lsm_prog();
	fd = kcm_socket(SOCK_SEQPACKET);
	ASSERT_GE(fd, 0);

	lsm_deny(1);
	ASSERT_ERRNO(socket(AF_KCM, SOCK_DGRAM, 0), EPERM);
	ASSERT_ERRNO(kcm_u_clone(fd), EPERM);
	/* The refused clone left no descriptor and no socket. */
	ASSERT_EQ(fcntl(fd + 1, F_GETFD), -1);
	ASSERT_EQ(kcm_proc_read(&p), 0);
	ASSERT_EQ(p.muxes, 1);
	ASSERT_EQ(p.kcms[0], 1);

	lsm_deny(0);
	ASSERT_GE(kcm_u_clone(fd), 0);
	ASSERT_EQ(kcm_proc_read(&p), 0);
	ASSERT_EQ(p.muxes, 1);
	ASSERT_EQ(p.kcms[0], 2);
}

/* accept() (an extension) goes through the LSM accept hook. */
TEST_DIFFERS(lsm_refuses_accept,
	     "accept() on a KCM socket fails with EOPNOTSUPP")
{
	struct kcm_proc p;
	int fd;

	kcm_enter_netns();
	load_accept_prog();
	fd = kcm_socket(SOCK_DGRAM);
	ASSERT_GE(fd, 0);

	lsm_deny(1);
	ASSERT_ERRNO(accept(fd, NULL, NULL), EPERM);
	ASSERT_EQ(lsm_read().created, 1);
	/* The refused accept left no descriptor and no socket. */
	ASSERT_EQ(fcntl(fd + 1, F_GETFD), -1);
	ASSERT_EQ(kcm_proc_read(&p), 0);
	ASSERT_EQ(p.kcms[0], 1);

	lsm_deny(0);
	ASSERT_GE(accept4(fd, NULL, NULL, SOCK_CLOEXEC), 0);
	ASSERT_EQ(lsm_read().created, 2);
	ASSERT_EQ(kcm_proc_read(&p), 0);
	ASSERT_EQ(p.muxes, 1);
	ASSERT_EQ(p.kcms[0], 2);
}

KCM_TEST_MAIN
