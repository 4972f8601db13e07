// SPDX-License-Identifier: GPL-2.0
/*
 * kcmperf's results: CPU use from /proc/stat over the window (the share
 * of all CPUs busy in user space (usr) and in the kernel, interrupts
 * included (sys), the share idle (idle, iowait included), and the busy
 * time of all CPUs over the messages of the window), the error a
 * connection saw, and the one line of key=value pairs a run prints.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kcmperf.h"

struct results res;
static atomic_int reported;
static char err_saved[32];	/* err_name() before the sockets closed */

void cpu_read(struct cpu *c)
{
	unsigned long long v[8] = { 0 };
	FILE *f = fopen("/proc/stat", "r");
	struct rusage ru;

	memset(c, 0, sizeof(*c));
	if (!getrusage(RUSAGE_SELF, &ru))
		c->self = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
			  ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
	if (!f)
		return;
	if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu",
		   &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) >= 4) {
		c->usr = v[0] + v[1];
		c->sys = v[2] + v[5] + v[6];
		c->idle = v[3] + v[4];
		c->total = v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
	}
	fclose(f);
}

const char *err_name(void)
{
	int err = atomic_load(&sh->first_err);
	static char text[32];
	const char *name;
	int i;

	if (err_saved[0])
		return err_saved;
	/* an error the kernel posted on a connection says more */
	for (i = 0; opt.impl == IMPL_KCM && i < opt.conns; i++) {
		int e = get_int(local[i], SOL_SOCKET, SO_ERROR);

		if (e) {
			err = e;
			break;
		}
	}
	if (!err)
		return "-";
	/* upstream can post a negative errno */
	name = strerrorname_np(err < 0 ? -err : err);
	if (name)
		snprintf(text, sizeof(text), "%s%s", err < 0 ? "-" : "", name);
	else
		snprintf(text, sizeof(text), "%d", err);
	return text;
}

/* What err_name() says now, for a report after the connections closed. */
void err_save(void)
{
	snprintf(err_saved, sizeof(err_saved), "%s", err_name());
}

/* Busy time of all CPUs from @a to @b, in ns. */
double busy_ns(const struct cpu *a, const struct cpu *b)
{
	return (double)(b->usr - a->usr + b->sys - a->sys) * 1e9 /
	       sysconf(_SC_CLK_TCK);
}

void print_cpu(void)
{
	double total = res.c1.total - res.c0.total;

	if (total <= 0)
		total = 1;
	printf(" cpu=%.1f usr=%.1f sys=%.1f idle=%.1f cpus=%d",
	       100.0 * (res.c1.usr - res.c0.usr + res.c1.sys - res.c0.sys) / total,
	       100.0 * (res.c1.usr - res.c0.usr) / total,
	       100.0 * (res.c1.sys - res.c0.sys) / total,
	       100.0 * (res.c1.idle - res.c0.idle) / total, ncpus);
}

void print_common(double secs)
{
	printf("impl=%s mode=%s size=%zu conns=%d kcms=%d rbatch=%d kbatch=%d sbatch=%d",
	       impl_names[opt.impl], modes[opt.mode]->name, opt.size,
	       opt.conns, opt.kcms, opt.rbatch, opt.kbatch, opt.sbatch);
	printf(" rcvbuf=%d tcp_rcvbuf=%d secs=%.2f", eff_rcvbuf, eff_tcp_rcvbuf,
	       secs);
	if (opt.impl == IMPL_KCM)
		printf(" parser=%s", parser_names[opt.parser]);
	if (opt.impl == IMPL_KCM && parser_ns >= 0)
		printf(" parser_ns=%.0f", parser_ns);
	if (opt.ktls)
		printf(" ktls=1");
	printf(" check=%s", opt.full_check ? "full" : "sampled");
}

/* Before another run in the same process (scale). */
void report_reset(void)
{
	memset(&res, 0, sizeof(res));
	err_saved[0] = 0;
	atomic_store(&reported, 0);
}

/*
 * Only one report: the watchdog's or the run's.  A watchdog report closes
 * the window where it is.  False when a report was already printed.
 */
bool report_begin(bool watchdog)
{
	if (atomic_exchange(&reported, 1))
		return false;
	if (watchdog) {
		/* rr clients stop growing their samples */
		atomic_store(&measuring, 0);
		usleep(10000);
		res.t1 = res.t1 ? res.t1 : now();
		if (!res.c1.total)
			cpu_read(&res.c1);
	}
	return true;
}

/*
 * The line of rx and tx: messages, rate, CPU, and whether all arrived;
 * @extra, when set, prints more keys before the counts.
 */
int report_msgs(bool watchdog, void (*extra)(double secs, unsigned long msgs))
{
	double secs = res.t1 - res.t0;
	unsigned long msgs = res.got1 - res.got0, lost;
	bool fail;

	if (watchdog) {
		res.sent = sum_ok(sh->txc, n_tx);
		res.got = sum_ok(rxc, n_rx);
		res.bad = sum_bad(rxc, n_rx);
		msgs = (res.got1 ? res.got1 : res.got) - res.got0;
	}
	lost = res.sent > res.got ? res.sent - res.got : 0;
	fail = res.bad || lost || res.stalled || watchdog;
	print_common(secs);
	printf(" msgs=%lu msgs_per_s=%.0f mb_per_s=%.2f", msgs,
	       secs > 0 ? msgs / secs : 0,
	       secs > 0 ? msgs * (double)opt.size / 1e6 / secs : 0);
	print_cpu();
	printf(" cpu_ns_per_msg=%.0f",
	       msgs ? busy_ns(&res.c0, &res.c1) / msgs : 0);
	/*
	 * The window's messages sent and not read in it, over those read:
	 * above 0 while the receivers fall behind and buffers fill, so the
	 * window does work for messages it does not count.
	 */
	if (!watchdog)
		printf(" fill=%.3f", ((double)(res.sent1 - res.sent0) -
				      (double)msgs) / (msgs ? msgs : 1));
	if (extra)
		extra(secs, msgs);
	printf(" sent=%lu got=%lu bad=%lu lost=%lu stalled=%d err=%s result=%s%s\n",
	       res.sent, res.got, res.bad, lost, res.stalled || watchdog,
	       err_name(), fail ? "FAIL" : "ok",
	       watchdog ? " note=watchdog" : "");
	return fail;
}

int report_stream(bool watchdog)
{
	return report_msgs(watchdog, NULL);
}
