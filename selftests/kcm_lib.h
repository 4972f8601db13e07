/* SPDX-License-Identifier: GPL-2.0 */
/* Helpers shared by the KCM selftests: sockets, clones, /proc/net/kcm. */
#ifndef KCM_LIB_H
#define KCM_LIB_H

#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <linux/kcm.h>	/* this tree's include/uapi first (see Makefile) */

#include "kcm_test.h"
#include "kcm_util.h"

#define KCM_TRACEFS	"/sys/kernel/tracing"
#define KCM_PROC_MAX_MUX 1024
#define KCM_CMD_WORDS	32	/* of a kcm_cmd() command line */

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

/* The counters of one "kcm-" or "psock-" line of /proc/net/kcm. */
struct kcm_proc_obj {
	long long rx_msgs, rx_bytes, tx_msgs, tx_bytes, recv_q, rmem;
};

/* Reads the kcm- and psock- lines; returns how many, or -1. */
static inline int kcm_proc_objs(struct kcm_proc_obj *o, int max)
{
	char line[512];
	int n = 0;
	FILE *f = fopen("/proc/net/kcm", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		const char *s = line + strspn(line, " ");

		if (strncmp(s, "kcm-", 4) && strncmp(s, "psock-", 6))
			continue;
		if (n == max ||
		    sscanf(s, "%*s %lld %lld %lld %lld %lld %lld",
			   &o[n].rx_msgs, &o[n].rx_bytes, &o[n].tx_msgs,
			   &o[n].tx_bytes, &o[n].recv_q, &o[n].rmem) != 6) {
			n = -1;
			break;
		}
		n++;
	}
	fclose(f);
	return n;
}

/* What /proc/net/kcm_stats says: the two value lines. */
struct kcm_stats {
	unsigned long long mux[9];	/* RX-Msgs .. RX-RdyDrops */
	unsigned long long psock[15];	/* RX-Msgs .. TX-Aborts */
};

enum {
	KS_RX_MSGS, KS_RX_BYTES, KS_TX_MSGS, KS_TX_BYTES, KS_TX_RETRIES,
	KS_ATTACH, KS_UNATTACH, KS_UNATTACH_RSVD, KS_RX_RDY_DROPS,
};

enum {
	KP_RX_MSGS, KP_RX_BYTES, KP_TX_MSGS, KP_TX_BYTES, KP_RESERVED,
	KP_UNRESERVED, KP_RX_ABORTS, KP_RX_INTR, KP_RX_UNRECOV,
	KP_RX_MEM_FAIL, KP_RX_NEED_MORE, KP_RX_BAD_LEN, KP_RX_TOO_BIG,
	KP_RX_TIMEOUT, KP_TX_ABORTS,
};

static inline int kcm_stats_values(const char *line, unsigned long long *v,
				   int n)
{
	int i, used;

	for (i = 0; i < n; i++) {
		if (sscanf(line, "%llu%n", &v[i], &used) != 1)
			return -1;
		line += used;
	}
	return 0;
}

/* Parses /proc/net/kcm_stats; returns 0, or -1. */
static inline int kcm_stats_read(struct kcm_stats *st)
{
	char line[4][512];
	FILE *f = fopen("/proc/net/kcm_stats", "r");
	int i, ok = 1;

	if (!f)
		return -1;
	for (i = 0; i < 4; i++)
		if (!fgets(line[i], sizeof(line[i]), f))
			ok = 0;
	fclose(f);
	if (!ok || strncmp(line[0], "MUX ", 4) || strncmp(line[2], "Psock ", 6))
		return -1;
	if (kcm_stats_values(line[1], st->mux, 9) ||
	    kcm_stats_values(line[3], st->psock, 15))
		return -1;
	return 0;
}

/*
 * /proc/net/kcm_ext: copies to @line the first line of @kind ("mux", "kcm"
 * or "psock") whose @key is @val (any line of @kind when @key is NULL).
 * Returns 0, or -1 when there is no such line.
 */
static inline int kcm_ext_find(const char *kind, const char *key,
			       const char *val, char *line, size_t size)
{
	size_t klen = strlen(kind);
	char want[128];
	FILE *f = fopen("/proc/net/kcm_ext", "r");
	int ret = -1;

	if (!f)
		return -1;
	snprintf(want, sizeof(want), " %s=%s ", key ? key : "", val ? val : "");
	while (fgets(line, size, f)) {
		if (strncmp(line, kind, klen) || line[klen] != ' ')
			continue;
		line[strcspn(line, "\n")] = ' ';
		if (!key || strstr(line, want)) {
			ret = 0;
			break;
		}
	}
	fclose(f);
	return ret;
}

/* The value of @key in a kcm_ext line, copied to @val; -1 if absent. */
static inline int kcm_ext_str(const char *line, const char *key, char *val,
			      size_t size)
{
	char want[64];
	const char *p;
	size_t n;

	snprintf(want, sizeof(want), " %s=", key);
	p = strstr(line, want);
	if (!p)
		return -1;
	p += strlen(want);
	n = strcspn(p, "\n ");
	if (n >= size)
		return -1;
	memcpy(val, p, n);
	val[n] = 0;
	return 0;
}

/* The numeric value of @key in a kcm_ext line, or -1. */
static inline long long kcm_ext_num(const char *line, const char *key)
{
	char val[32];

	if (kcm_ext_str(line, key, val, sizeof(val)))
		return -1;
	return strtoll(val, NULL, 10);
}

/* Writes @val to the knob @path (procfs, debugfs, tracefs): 0 or -1. */
static inline int kcm_write_str(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = write(fd, val, strlen(val));
	close(fd);
	return n == (ssize_t)strlen(val) ? 0 : -1;
}

/* Mounts tracefs on KCM_TRACEFS unless it is there: 0, or -1 (errno). */
static inline int kcm_tracefs_mount(void)
{
	if (!access(KCM_TRACEFS "/trace", F_OK))
		return 0;
	return mount("tracefs", KCM_TRACEFS, "tracefs", 0, NULL);
}

/* Is the running kernel @major.@minor or later? */
static inline int kcm_kernel_at_least(int major, int minor)
{
	struct utsname u;
	int ma = 0, mi = 0;

	if (uname(&u) || sscanf(u.release, "%d.%d", &ma, &mi) != 2)
		return 0;
	return ma > major || (ma == major && mi >= minor);
}

/*
 * Does KCM go through kTLS on the running kernel?  From 6.6, where kTLS
 * hands decrypted records to read_sock; before, KCM refuses it.
 */
static inline int kcm_tls_carried(void)
{
	return kcm_kernel_at_least(6, 6);
}

/* Writes 1 to kernel.unprivileged_bpf_disabled (it cannot be undone). */
static inline void kcm_disable_unprivileged_bpf(void)
{
	ASSERT_OK(kcm_write_str("/proc/sys/kernel/unprivileged_bpf_disabled",
				"1"));
}

/* Become nobody with no capabilities left at all. */
static inline void kcm_drop_privileges(void)
{
	ASSERT_OK(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0));
	ASSERT_OK(setgroups(0, NULL));
	ASSERT_OK(setgid(65534));
	ASSERT_OK(setuid(65534));
	ASSERT_EQ(geteuid(), 65534);
	/* setuid() from root to another user clears every capability set. */
	ASSERT_ERRNO(setuid(0), EPERM);
}

/* Runs the rest of the test in a network namespace of its own. */
static inline void kcm_enter_netns(void)
{
	if (unshare(CLONE_NEWNET) < 0)
		SKIP(return, "unshare(CLONE_NEWNET): %s", strerror(errno));
}

/* In the child of kcm_cmd(): runs @argv with stdout and stderr to @fd. */
static inline void __attribute__((noreturn))
kcm_cmd_exec(char *const argv[], int fd)
{
	dup2(fd, STDOUT_FILENO);
	dup2(fd, STDERR_FILENO);
	execvp(argv[0], argv);
	printf("%s: %s\n", argv[0], strerror(errno));
	fflush(stdout);
	_exit(127);
}

/* Reads @fd to its end into @out, cut to @size; what does not fit goes. */
static inline void kcm_cmd_read(int fd, char *out, size_t size)
{
	char rest[256], *dst;
	size_t len = 0, room;
	ssize_t n;

	for (;;) {
		dst = len < size - 1 ? out + len : rest;
		room = len < size - 1 ? size - 1 - len : sizeof(rest);
		n = read(fd, dst, room);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (dst != rest)
			len += n;
	}
	out[len] = 0;
}

/*
 * Runs the command line @fmt, ... (an ip(8), a tc(8), a tool of this
 * tree) with its stdout and stderr in @out, cut to @size.  The words are
 * split at spaces and the program found in PATH without a shell: busybox
 * sh would run its own ip and tc applets instead.  Returns the exit
 * status (127: not found), or -1 if it could not be run or was killed.
 */
static inline int __attribute__((format(printf, 3, 4)))
kcm_cmd(char *out, size_t size, const char *fmt, ...)
{
	char line[512], *argv[KCM_CMD_WORDS + 1], *save;
	int argc = 0, pfd[2], status, n;
	va_list ap;
	pid_t pid;

	out[0] = 0;
	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n < 0 || n >= (int)sizeof(line))
		return -1;
	argv[0] = strtok_r(line, " ", &save);
	while (argv[argc]) {
		if (++argc == KCM_CMD_WORDS)
			return -1;
		argv[argc] = strtok_r(NULL, " ", &save);
	}
	if (!argc || pipe2(pfd, O_CLOEXEC))
		return -1;
	fflush(stdout);
	pid = fork();
	if (!pid)
		kcm_cmd_exec(argv, pfd[1]);
	close(pfd[1]);
	kcm_cmd_read(pfd[0], out, size);
	close(pfd[0]);
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

/*
 * The kcmstat to run: $KCMSTAT, or tools/kcmstat as make check stages it
 * (../kcmstat).  The kselftest copy of the suite in a kernel tree has no
 * tools/: there the kcmstat tests skip, saying so.
 */
static inline const char *kcm_kcmstat_bin(void)
{
	const char *bin = getenv("KCMSTAT") ? getenv("KCMSTAT") : "../kcmstat";

	if (access(bin, X_OK))
		SKIP(return NULL, "no kcmstat at %s (tools/kcmstat: set KCMSTAT)",
		     bin);
	return bin;
}

/* SKIP unless @tool in PATH is iproute2's (busybox has an ip and a tc). */
static inline void kcm_need_iproute2(const char *tool)
{
	char out[512];
	int rc = kcm_cmd(out, sizeof(out), "%s -V", tool);

	if (rc == 127)
		SKIP(return, "%s(8) not found in PATH: install iproute2", tool);
	out[strcspn(out, "\n")] = 0;
	if (rc || !strstr(out, "iproute2"))
		SKIP(return, "%s in PATH is not iproute2's: %s -V: exit %d: %s", tool,
		     tool, rc, out);
}

#endif /* KCM_LIB_H */
