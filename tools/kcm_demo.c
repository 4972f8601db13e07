// SPDX-License-Identifier: GPL-2.0
/*
 * kcm_demo: what an application does with KCM, step by step.
 *
 * Creates a multiplexor, clones it for a pool of workers, shows the result
 * in /proc/net/kcm and closes everything.  Attaching TCP connections and
 * sending and receiving messages join the demo with the data path.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <linux/kcm.h>

#ifndef AF_KCM
#define AF_KCM 41
#endif

#define WORKERS 4

static void show_proc(const char *when)
{
	char line[256];
	FILE *f;

	printf("--- /proc/net/kcm %s ---\n", when);
	f = fopen("/proc/net/kcm", "r");
	if (!f) {
		printf("(cannot open: %s)\n", strerror(errno));
		return;
	}
	while (fgets(line, sizeof(line), f))
		fputs(line, stdout);
	fclose(f);
}

int main(void)
{
	int fds[WORKERS];
	int i;

	fds[0] = socket(AF_KCM, SOCK_SEQPACKET, KCMPROTO_CONNECTED);
	if (fds[0] < 0) {
		perror("socket(AF_KCM)");
		return 1;
	}
	printf("socket(AF_KCM, SOCK_SEQPACKET, KCMPROTO_CONNECTED) = %d: a new mux\n",
	       fds[0]);

	for (i = 1; i < WORKERS; i++) {
		struct kcm_clone info;

		if (ioctl(fds[0], SIOCKCMCLONE, &info) < 0) {
			perror("ioctl(SIOCKCMCLONE)");
			return 1;
		}
		fds[i] = info.fd;
		printf("ioctl(%d, SIOCKCMCLONE) = fd %d: worker %d joins the mux\n",
		       fds[0], fds[i], i);
	}
	show_proc("with one mux and 4 KCM sockets");

	for (i = 0; i < WORKERS; i++)
		close(fds[i]);
	printf("closed all %d sockets: the mux is gone\n", WORKERS);
	show_proc("after close");
	return 0;
}
