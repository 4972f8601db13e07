// SPDX-License-Identifier: GPL-2.0
/*
 * Fault injection (failslab, fail_page_alloc): allocations in the calling
 * task fail at random while it creates, clones, attaches, sends and
 * receives.  Each call succeeds or fails cleanly; a message whose send
 * succeeded arrives whole; nothing is left behind (kmemleak checks that
 * on the debug kernel).  Needs CONFIG_FAILSLAB and CONFIG_FAIL_PAGE_ALLOC
 * with debugfs: without them the test is skipped.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include "kcm_data.h"

#define DBG	"/sys/kernel/debug"

/* Faults for tasks that ask for them, @percent of the time. */
static int faults_setup(const char *attr, int percent)
{
	char path[128], val[16];
	static const char *const knobs[][2] = {
		{ "interval", "1" }, { "times", "-1" }, { "space", "0" },
		{ "verbose", "0" }, { "task-filter", "Y" },
		{ "ignore-gfp-wait", "N" },
	};
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(knobs); i++) {
		snprintf(path, sizeof(path), DBG "/%s/%s", attr, knobs[i][0]);
		if (kcm_write_str(path, knobs[i][1]) && i < 5)
			return -1;
	}
	snprintf(path, sizeof(path), DBG "/%s/probability", attr);
	snprintf(val, sizeof(val), "%d", percent);
	return kcm_write_str(path, val);
}

/*
 * Turning faults off opens and writes a file, which may itself meet an
 * injected failure: it is retried until it takes, or the rest of the test
 * (its checks of /proc included) would run with faults still on.
 */
static void faults_on(int on)
{
	int i;

	for (i = 0; i < 1000; i++)
		if (!kcm_write_str("/proc/thread-self/make-it-fail", on ? "1" : "0") ||
		    on)
			return;
	TH_LOG("could not turn fault injection off");
	ASSERT_TRUE(0);
}

static int clean_errno(int e)
{
	return e == ENOMEM || e == ENOBUFS || e == EAGAIN || e == EFAULT ||
	       e == EMFILE || e == ENFILE;
}

TEST(allocations_fail)
{
	int round, sent = 0, failed = 0, prog;
	char msg[3000], in[3000];
	struct kcm_proc p;

	kcm_enter_netns();
	if (access(DBG "/failslab", F_OK))
		mount("debugfs", DBG, "debugfs", 0, NULL);
	if (access(DBG "/failslab", F_OK) ||
	    access("/proc/thread-self/make-it-fail", F_OK))
		SKIP(return, "no failslab in this kernel (CONFIG_FAILSLAB)");
	ASSERT_OK(faults_setup("failslab", 10));
	if (!access(DBG "/fail_page_alloc", F_OK))
		ASSERT_OK(faults_setup("fail_page_alloc", 10));
	prog = kcm_u_parser_len4();
	ASSERT_GE(prog, 0);

	for (round = 0; round < 300; round++) {
		int kcm, c = -1, peer, local, k, e;

		if (kcm_u_tcp_pair(&peer, &local))
			continue;
		kcm_u_set_timeo(peer, SO_RCVTIMEO, 5000);
		faults_on(1);
		kcm = kcm_socket(round & 1 ? SOCK_DGRAM : SOCK_SEQPACKET);
		if (kcm < 0) {
			e = errno;
			faults_on(0);
			ASSERT_TRUE(clean_errno(e));
			failed++;
			goto next;
		}
		c = kcm_u_clone(kcm);
		e = errno;
		if (c < 0 && !clean_errno(e)) {
			faults_on(0);
			ASSERT_EQ(e, ENOMEM);
		}
		if (kcm_u_attach(kcm, local, prog)) {
			e = errno;
			faults_on(0);
			ASSERT_TRUE(clean_errno(e));
			failed++;
			goto close_kcm;
		}
		for (k = 0; k < 5; k++) {
			size_t len = kcm_u_msg_build(msg, 100 + round * 9 % 2800,
						     round * 10 + k);
			ssize_t n = send(kcm, msg, len,
					 MSG_DONTWAIT | MSG_EOR);

			if (n < 0) {
				e = errno;
				faults_on(0);
				ASSERT_TRUE(clean_errno(e));
				failed++;
				faults_on(1);
				continue;
			}
			ASSERT_EQ(n, len);
			/* Acknowledged: it must arrive, whole. */
			faults_on(0);
			ASSERT_OK(kcm_u_read_full(peer, in, len));
			ASSERT_EQ(memcmp(in, msg, len), 0);
			sent++;
			faults_on(1);
		}
		/* And the other way. */
		kcm_send_msgs(peer, round, 2, 50);
		recv(c >= 0 ? c : kcm, in, sizeof(in), MSG_DONTWAIT);
		faults_on(0);
close_kcm:
		faults_on(0);
		if (c >= 0)
			close(c);
		close(kcm);
next:
		close(peer);
		close(local);
	}
	faults_on(0);
	kcm_write_str(DBG "/failslab/probability", "0");
	kcm_write_str(DBG "/fail_page_alloc/probability", "0");
	printf("# faults: %d messages acknowledged and delivered, %d calls failed cleanly\n",
	       sent, failed);
	ASSERT_GE(sent, 1);
	ASSERT_GE(failed, 1);
	ASSERT_EQ(kcm_proc_read(&p), 0);
	ASSERT_EQ(p.muxes, 0);
}

KCM_TEST_MAIN
