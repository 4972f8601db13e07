// SPDX-License-Identifier: GPL-2.0
/*
 * Helper for the shell selftests.
 *
 *   kcm_helper probe        socket(AF_KCM): exit 0, or print the errno and
 *                           exit 1
 *   kcm_helper hold         make a mux with a clone, print "ready", then
 *                           wait for a signal with both sockets open
 *   kcm_helper netns-hold   in a new network namespace, make and close a
 *                           mux, print "ready", then wait for a signal
 *   kcm_helper exec PROG    run PROG (a test program) without a shell: a
 *                           kernel that cannot run it (ENOEXEC: a 32-bit
 *                           program without IA32 emulation) gets one TAP
 *                           SKIP line and exit status 4
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "kcm_lib.h"

KCM_TEST_GLOBALS;

static int probe(void)
{
	int fd = kcm_socket(SOCK_DGRAM);

	if (fd < 0) {
		printf("errno %d (%s)\n", errno, strerror(errno));
		return 1;
	}
	close(fd);
	return 0;
}

static int hold(int netns)
{
	int fd, c;

	if (netns && unshare(CLONE_NEWNET) < 0) {
		perror("unshare");
		return 1;
	}
	fd = kcm_socket(SOCK_DGRAM);
	if (fd < 0) {
		perror("socket");
		return 1;
	}
	c = kcm_u_clone(fd);
	if (c < 0) {
		perror("clone");
		return 1;
	}
	if (netns) {
		close(c);
		close(fd);
	}
	printf("ready\n");
	fflush(stdout);
	pause();
	return 0;
}

static int exec_test(char **argv)
{
	const char *prog = argv[0];
	const char *name = strrchr(prog, '/') ? strrchr(prog, '/') + 1 : prog;

	execv(prog, argv);
	if (errno == ENOEXEC) {
		/* A kernel without CONFIG_IA32_EMULATION */
		printf("ok 1 %s # SKIP this kernel cannot run it (%s)\n",
		       name, strerror(errno));
		return KSFT_SKIP;
	}
	printf("not ok 1 %s: exec: %s\n", name, strerror(errno));
	return KSFT_FAIL;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "exec"))
		return exec_test(argv + 2);
	if (argc == 2 && !strcmp(argv[1], "probe"))
		return probe();
	if (argc == 2 && !strcmp(argv[1], "hold"))
		return hold(0);
	if (argc == 2 && !strcmp(argv[1], "netns-hold"))
		return hold(1);
	fprintf(stderr, "usage: %s probe|hold|netns-hold|exec PROG\n", argv[0]);
	return 2;
}
