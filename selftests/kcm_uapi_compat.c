// SPDX-License-Identifier: GPL-2.0
/*
 * This tree's <linux/kcm.h> against the one the C library ships: every
 * shared constant, structure size and member offset must agree.  The
 * checks are static assertions, so a mismatch fails the build; the
 * program reports the result in TAP so that it is counted.
 * tools/testing/uapi-check.sh (host side, in make check) also compiles
 * this file as C++, compiles the header alone as C89..C11 and C++98..20,
 * and compares every item the system header defines, found by name.
 */
#include <assert.h>
#include <stddef.h>
#include <stdio.h>
#include <linux/sockios.h>	/* the system header does not include it */

/* The system header first, its names moved out of the way. */
#define kcm_attach sys_kcm_attach
#define kcm_unattach sys_kcm_unattach
#define kcm_clone sys_kcm_clone
#include SYSTEM_KCM_H
#undef kcm_attach
#undef kcm_unattach
#undef kcm_clone

enum {
	SYS_SIOCKCMATTACH = SIOCKCMATTACH,
	SYS_SIOCKCMUNATTACH = SIOCKCMUNATTACH,
	SYS_SIOCKCMCLONE = SIOCKCMCLONE,
	SYS_KCMPROTO_CONNECTED = KCMPROTO_CONNECTED,
	SYS_KCM_RECV_DISABLE = KCM_RECV_DISABLE,
};

#undef SIOCKCMATTACH
#undef SIOCKCMUNATTACH
#undef SIOCKCMCLONE
#undef KCMPROTO_CONNECTED
#undef KCM_RECV_DISABLE

#include OUR_KCM_H

#define SAME(a, b) static_assert((a) == (b), #a " != " #b)

SAME(SIOCKCMATTACH, SYS_SIOCKCMATTACH);
SAME(SIOCKCMUNATTACH, SYS_SIOCKCMUNATTACH);
SAME(SIOCKCMCLONE, SYS_SIOCKCMCLONE);
SAME(SIOCKCMATTACH, 0x89E0);
SAME(SIOCKCMUNATTACH, 0x89E1);
SAME(SIOCKCMCLONE, 0x89E2);
SAME(KCMPROTO_CONNECTED, SYS_KCMPROTO_CONNECTED);
SAME(KCM_RECV_DISABLE, SYS_KCM_RECV_DISABLE);

SAME(sizeof(struct kcm_attach), sizeof(struct sys_kcm_attach));
SAME(sizeof(struct kcm_attach), 8);
SAME(offsetof(struct kcm_attach, fd), offsetof(struct sys_kcm_attach, fd));
SAME(offsetof(struct kcm_attach, bpf_fd), offsetof(struct sys_kcm_attach, bpf_fd));
SAME(sizeof(struct kcm_unattach), sizeof(struct sys_kcm_unattach));
SAME(offsetof(struct kcm_unattach, fd), offsetof(struct sys_kcm_unattach, fd));
SAME(sizeof(struct kcm_clone), sizeof(struct sys_kcm_clone));
SAME(offsetof(struct kcm_clone, fd), offsetof(struct sys_kcm_clone, fd));

int main(void)
{
	printf("TAP version 13\n1..1\n");
	printf("ok 1 uapi_matches_system_header # %s\n", SYSTEM_KCM_H);
	return 0;
}
