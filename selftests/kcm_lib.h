/* SPDX-License-Identifier: GPL-2.0 */
/* Helpers shared by the KCM selftests: sockets, clones, /proc/net/kcm. */
#ifndef KCM_LIB_H
#define KCM_LIB_H

#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <linux/kcm.h>	/* this tree's include/uapi first (see Makefile) */

#include "kcm_test.h"

#ifndef AF_KCM
#define AF_KCM 41
#endif
#ifndef SOL_KCM
#define SOL_KCM 281
#endif

#define KCM_PROC_MAX_MUX 1024

/* What /proc/net/kcm says about the caller's network namespace. */
struct kcm_proc {
	int title_muxes;		/* the N of "(N MUX)" */
	int muxes;			/* "mux" lines */
	int socks;			/* "kcm-<index>" lines */
	int rxwait;			/* ... of those with status RxWait */
	int kcms[KCM_PROC_MAX_MUX];	/* "KCMs: n" of each mux line */
	int psocks[KCM_PROC_MAX_MUX];	/* "Psocks m" of each mux line */
};

static inline int kcm_socket(int type)
{
	return socket(AF_KCM, type, KCMPROTO_CONNECTED);
}

/* SIOCKCMCLONE: returns the new fd or -1 with errno set. */
static inline int kcm_clone_fd(int fd)
{
	struct kcm_clone info = { .fd = -1 };

	if (ioctl(fd, SIOCKCMCLONE, &info) < 0)
		return -1;
	return info.fd;
}

static inline int kcm_sockopt_int(int fd, int level, int name)
{
	socklen_t len = sizeof(int);
	int val = -1;

	if (getsockopt(fd, level, name, &val, &len) < 0)
		return -1;
	return val;
}

/* Parses /proc/net/kcm; returns 0, or -1 if it cannot be read or parsed. */
static inline int kcm_proc_read(struct kcm_proc *p)
{
	char line[512];
	FILE *f;

	memset(p, 0, sizeof(*p));
	p->title_muxes = -1;
	f = fopen("/proc/net/kcm", "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		const char *s = line + strspn(line, " ");
		const char *k;

		if (!strncmp(s, "*** KCM statistics", 18)) {
			if (sscanf(s, "*** KCM statistics (%d MUX)",
				   &p->title_muxes) != 1) {
				fclose(f);
				return -1;
			}
		} else if (!strncmp(s, "mux ", 4)) {
			if (p->muxes < KCM_PROC_MAX_MUX) {
				k = strstr(s, "KCMs: ");
				if (!k || sscanf(k, "KCMs: %d, Psocks %d",
						 &p->kcms[p->muxes],
						 &p->psocks[p->muxes]) != 2) {
					fclose(f);
					return -1;
				}
			}
			p->muxes++;
		} else if (!strncmp(s, "kcm-", 4)) {
			p->socks++;
			if (strstr(s, " RxWait"))
				p->rxwait++;
		}
	}
	fclose(f);
	return p->title_muxes < 0 ? -1 : 0;
}

/* Runs the rest of the test in a network namespace of its own. */
static inline void kcm_enter_netns(void)
{
	if (unshare(CLONE_NEWNET) < 0)
		SKIP("unshare(CLONE_NEWNET): %s", strerror(errno));
}

#endif /* KCM_LIB_H */
