// SPDX-License-Identifier: GPL-2.0
/*
 * kcmstat: what the KCM multiplexors of a network namespace are doing, in
 * the manner of ss and nstat: each mux with its KCM sockets and its
 * attached TCP connections (endpoints, state, queues, counters), then the
 * totals of the namespace (destroyed muxes included).
 *
 *   kcmstat [-j] [-i SECS [-c COUNT]] [-n NETNS]
 *
 *   -j        JSON instead of tables
 *   -i SECS   measure for SECS seconds and add rates (messages and bytes
 *             per second) per mux, KCM socket and connection
 *   -c COUNT  with -i: that many reports (default 1; 0 = forever)
 *   -n NETNS  look at that network namespace: a name under
 *             /var/run/netns (ip netns) or a path such as /proc/PID/ns/net
 *
 * It reads /proc/net/kcm_ext (see Documentation/networking/kcm.rst), which
 * only this implementation of KCM provides, and /proc/net/kcm_stats.  Exit
 * status: 0, 1 on error.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define KCMSTAT_EXT	"/proc/net/kcm_ext"
#define KCMSTAT_STATS	"/proc/net/kcm_stats"
#define MAX_KEYS	48
#define MAX_OBJS	4096
#define MAX_TOTALS	2	/* the MUX and Psock lines of kcm_stats */

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))

/* One line of kcm_ext: "kind key=value ...". */
struct obj {
	char kind[8];
	int nkeys;
	char *key[MAX_KEYS];
	char *val[MAX_KEYS];
	char *line;
};

/*
 * /proc/net/kcm_stats: pairs of lines, a header ("MUX RX-Msgs ...") and
 * its values.  Each pair is an obj of kind "MUX" or "Psock" whose keys
 * are the kcm_ext names of the columns (RX-Msgs is rx_msgs); @col keeps
 * the column names for the table, @head the line they point into.
 */
struct totals {
	int n;
	struct obj obj[MAX_TOTALS];
	char *col[MAX_TOTALS][MAX_KEYS];
	char *head[MAX_TOTALS];
};

struct snap {
	int n;
	struct obj obj[MAX_OBJS];
	struct totals tot;
	struct timespec when;
};

static const char *obj_get(const struct obj *o, const char *key)
{
	int i;

	for (i = 0; i < o->nkeys; i++)
		if (!strcmp(o->key[i], key))
			return o->val[i];
	return NULL;
}

static unsigned long long obj_num(const struct obj *o, const char *key)
{
	const char *v = obj_get(o, key);

	return v ? strtoull(v, NULL, 10) : 0;
}

static const char *obj_str(const struct obj *o, const char *key)
{
	const char *v = obj_get(o, key);

	return v ? v : "?";
}

/* Splits @line (kept by @o) into words and key=value pairs. */
static void obj_parse(struct obj *o, char *line)
{
	char *save, *w;

	memset(o, 0, sizeof(*o));
	o->line = line;
	line[strcspn(line, "\n")] = 0;
	w = strtok_r(line, " ", &save);
	snprintf(o->kind, sizeof(o->kind), "%s", w ? w : "");
	while ((w = strtok_r(NULL, " ", &save)) && o->nkeys < MAX_KEYS) {
		char *eq = strchr(w, '=');

		if (!eq)
			continue;
		*eq = 0;
		o->key[o->nkeys] = w;
		o->val[o->nkeys] = eq + 1;
		o->nkeys++;
	}
}

static void snap_free(struct snap *s)
{
	int i;

	for (i = 0; i < s->n; i++)
		free(s->obj[i].line);
	s->n = 0;
	for (i = 0; i < s->tot.n; i++) {
		free(s->tot.obj[i].line);
		free(s->tot.head[i]);
	}
	s->tot.n = 0;
}

/* The kcm_ext key of kcm_stats column @col, in @buf if made there. */
static const char *total_key(const char *col, char *buf, size_t size)
{
	static const char *const map[][2] = {
		{ "UnattchRsvd", "unattach_rsvd" },
		{ "RX-RdyDrops", "rx_ready_drops" },
		{ "RX-MemFail", "rx_mem_fail" },
		{ "RX-NeedMor", "rx_need_more" },
		{ "RX-BadLen", "rx_bad_len" },
		{ "RX-TooBig", "rx_too_big" },
		{ "RX-Timeout", "rx_timeouts" },
	};
	size_t i;

	for (i = 0; i < ARRAY_SIZE(map); i++)
		if (!strcmp(col, map[i][0]))
			return map[i][1];
	/* The others: lower case, '-' as '_' (RX-Msgs is rx_msgs) */
	for (i = 0; col[i] && i + 1 < size; i++) {
		if (col[i] == '-')
			buf[i] = '_';
		else if (col[i] >= 'A' && col[i] <= 'Z')
			buf[i] = col[i] - 'A' + 'a';
		else
			buf[i] = col[i];
	}
	buf[i] = 0;
	return buf;
}

/*
 * Header line @head of kcm_stats (kept) and its @values into @t.
 * Returns 0, or -1 when they do not pair up.
 */
static int totals_add(struct totals *t, char *head, char *values)
{
	char *hsave, *vsave, *w, *v, key[32], *line = NULL;
	char **col = t->col[t->n];
	size_t len = 0;
	int n = 0;
	FILE *f;

	head[strcspn(head, "\n")] = 0;
	values[strcspn(values, "\n")] = 0;
	w = strtok_r(head, " ", &hsave);
	if (!w)
		return -1;
	/* "kind key=value ...", as kcm_ext has it, for obj_parse() */
	f = open_memstream(&line, &len);
	if (!f)
		return -1;
	fprintf(f, "%s", w);
	v = strtok_r(values, " ", &vsave);
	while ((w = strtok_r(NULL, " ", &hsave)) && v && n < MAX_KEYS - 1) {
		col[n++] = w;
		fprintf(f, " %s=%s", total_key(w, key, sizeof(key)), v);
		v = strtok_r(NULL, " ", &vsave);
	}
	col[n] = NULL;
	fclose(f);
	if (w || v || !n) {
		free(line);
		return -1;
	}
	obj_parse(&t->obj[t->n], line);
	t->head[t->n++] = head;
	return 0;
}

static int totals_read(struct totals *t)
{
	char *head = NULL, *values = NULL;
	size_t cap = 0, vcap = 0;
	int ret = 0;
	FILE *f;

	f = fopen(KCMSTAT_STATS, "r");
	if (!f) {
		fprintf(stderr, "kcmstat: %s: %s\n", KCMSTAT_STATS,
			strerror(errno));
		return -1;
	}
	while (getline(&head, &cap, f) > 0) {
		if (t->n == MAX_TOTALS || getline(&values, &vcap, f) <= 0 ||
		    totals_add(t, head, values)) {
			fprintf(stderr, "kcmstat: %s: not the format known\n",
				KCMSTAT_STATS);
			ret = -1;
			break;
		}
		head = NULL;
		cap = 0;
	}
	free(head);
	free(values);
	fclose(f);
	return ret;
}

static int snap_read(struct snap *s)
{
	char *line = NULL;
	size_t cap = 0;
	FILE *f;

	snap_free(s);
	f = fopen(KCMSTAT_EXT, "r");
	if (!f) {
		fprintf(stderr, "kcmstat: %s: %s%s\n", KCMSTAT_EXT, strerror(errno),
			errno == ENOENT ? " (is our kcm.ko loaded?)" : "");
		return -1;
	}
	clock_gettime(CLOCK_MONOTONIC, &s->when);
	while (getline(&line, &cap, f) > 0) {
		if (line[0] == '#')
			continue;
		if (s->n == MAX_OBJS) {
			fprintf(stderr, "kcmstat: over %d objects, the rest not shown\n",
				MAX_OBJS);
			break;
		}
		obj_parse(&s->obj[s->n++], line);
		line = NULL;
		cap = 0;
	}
	free(line);
	fclose(f);
	return totals_read(&s->tot);
}

/*
 * The same object in an earlier snapshot: kind, mux id and index agree
 * (the totals, "MUX" and "Psock", have neither).
 */
static const struct obj *snap_find(const struct snap *s, const struct obj *o)
{
	const char *mux = !strcmp(o->kind, "mux") ? "id" : "mux";
	int i;

	for (i = 0; i < s->tot.n; i++)
		if (!strcmp(s->tot.obj[i].kind, o->kind))
			return &s->tot.obj[i];
	for (i = 0; i < s->n; i++) {
		const struct obj *p = &s->obj[i];

		if (strcmp(p->kind, o->kind) ||
		    obj_num(p, mux) != obj_num(o, mux) ||
		    obj_num(p, "index") != obj_num(o, "index"))
			continue;
		return p;
	}
	return NULL;
}

struct rates {
	double rx_msgs, rx_bytes, tx_msgs, tx_bytes;
};

/* Rates of @o since @prev (NULL: no rates), over @secs seconds. */
static int obj_rates(const struct obj *o, const struct snap *prev,
		     double secs, struct rates *r)
{
	const struct obj *p = prev ? snap_find(prev, o) : NULL;

	memset(r, 0, sizeof(*r));
	if (!prev || secs <= 0)
		return 0;
	if (!p)
		p = o;	/* appeared meanwhile: no rate to speak of */
	r->rx_msgs = (obj_num(o, "rx_msgs") - obj_num(p, "rx_msgs")) / secs;
	r->rx_bytes = (obj_num(o, "rx_bytes") - obj_num(p, "rx_bytes")) / secs;
	r->tx_msgs = (obj_num(o, "tx_msgs") - obj_num(p, "tx_msgs")) / secs;
	r->tx_bytes = (obj_num(o, "tx_bytes") - obj_num(p, "tx_bytes")) / secs;
	return 1;
}

static int is_number(const char *v)
{
	if (!*v)
		return 0;
	for (; *v; v++)
		if (*v < '0' || *v > '9')
			return 0;
	return 1;
}

/* The members of one object as JSON (no braces): every key but @skip. */
static void json_fields(const struct obj *o, const struct snap *prev,
			double secs, const char *skip)
{
	const char *sep = "";
	struct rates r;
	int i;

	for (i = 0; i < o->nkeys; i++) {
		const char *v = o->val[i];

		if (skip && !strcmp(o->key[i], skip))
			continue;
		printf("%s\"%s\":", sep, o->key[i]);
		sep = ",";
		if (is_number(v))
			printf("%s", v);
		else if (!strcmp(v, "-"))
			printf("null");
		else
			printf("\"%s\"", v);
	}
	if (!obj_rates(o, prev, secs, &r))
		return;
	printf("%s\"rates\":{\"rx_msgs_per_s\":%.3f,\"rx_bytes_per_s\":%.3f,",
	       sep, r.rx_msgs, r.rx_bytes);
	printf("\"tx_msgs_per_s\":%.3f,\"tx_bytes_per_s\":%.3f}", r.tx_msgs,
	       r.tx_bytes);
}

/* The KCM sockets or psocks (@kind) of mux @id as a JSON array @name. */
static void json_members(const struct snap *s, const struct snap *prev,
			 double secs, unsigned long long id, const char *kind,
			 const char *name)
{
	const char *sep = "";
	int i;

	printf(",\"%s\":[", name);
	for (i = 0; i < s->n; i++) {
		const struct obj *o = &s->obj[i];

		if (strcmp(o->kind, kind) || obj_num(o, "mux") != id)
			continue;
		printf("%s{", sep);
		sep = ",";
		json_fields(o, prev, secs, "mux");
		putchar('}');
	}
	putchar(']');
}

static void print_json(const struct snap *s, const struct snap *prev,
		       double secs, const char *netns)
{
	const char *sep = "";
	int i;

	printf("{\"netns\":\"%s\",", netns ? netns : "");
	if (prev)
		printf("\"interval_s\":%.6f,", secs);
	printf("\"muxes\":[");
	for (i = 0; i < s->n; i++) {
		const struct obj *o = &s->obj[i];
		unsigned long long id;

		if (strcmp(o->kind, "mux"))
			continue;
		id = obj_num(o, "id");
		printf("%s{", sep);
		sep = ",";
		json_fields(o, prev, secs, NULL);
		json_members(s, prev, secs, id, "kcm", "sockets");
		json_members(s, prev, secs, id, "psock", "connections");
		putchar('}');
	}
	printf("]");
	for (i = 0; i < s->n; i++)
		if (!strcmp(s->obj[i].kind, "mem"))
			printf(",\"mem_pages\":%llu",
			       obj_num(&s->obj[i], "pages"));
	/* "totals": {"mux": {...}, "psock": {...}} */
	printf(",\"totals\":{");
	for (i = 0; i < s->tot.n; i++) {
		const struct obj *o = &s->tot.obj[i];
		size_t j;

		printf("%s\"", i ? "," : "");
		for (j = 0; o->kind[j]; j++)
			putchar(o->kind[j] >= 'A' && o->kind[j] <= 'Z' ?
				o->kind[j] - 'A' + 'a' : o->kind[j]);
		printf("\":{");
		json_fields(o, prev, secs, NULL);
		putchar('}');
	}
	printf("}}\n");
}

/* A rate column pair, or nothing without -i. */
static void table_rates(const struct obj *o, const struct snap *prev,
			double secs)
{
	struct rates r;

	if (obj_rates(o, prev, secs, &r))
		printf(" %10.1f %12.1f %10.1f %12.1f", r.rx_msgs, r.rx_bytes,
		       r.tx_msgs, r.tx_bytes);
}

static void table_rate_header(const struct snap *prev)
{
	if (prev)
		printf(" %10s %12s %10s %12s", "rx-msg/s", "rx-B/s",
		       "tx-msg/s", "tx-B/s");
}

/* Names of the 0/1 keys of @o that are 1, comma-separated, or "-". */
static void flags_of(const struct obj *o, const char *const *keys,
		     const char *const *names, char *out, size_t size)
{
	size_t n = 0;
	int i;

	out[0] = 0;
	for (i = 0; keys[i]; i++)
		if (obj_num(o, keys[i]) && n < size)
			n += snprintf(out + n, size - n, "%s%s", n ? "," : "",
				      names[i]);
	if (!n)
		snprintf(out, size, "-");
}

/* Appends ",<name>-<value>" to the flags @out (replacing a lone "-"). */
static void flags_add(char *out, size_t size, const char *name,
		      const char *value)
{
	size_t n = strcmp(out, "-") ? strlen(out) : 0;

	snprintf(out + n, size - n, "%s%s-%s", n ? "," : "", name, value);
}

/*
 * The flags of a KCM socket; with steering by key, Keys-N (the key slots
 * it owns) and Held-N (messages of its keys waiting for it).
 */
static void flags_kcm(const struct obj *o, char *out, size_t size)
{
	static const char *const keys[] = {
		"rx_ready", "rx_disabled", "tx_waiting", "mem_short", NULL };
	static const char *const names[] = {
		"RxReady", "RxDisabled", "TxWait", "MemShort" };

	flags_of(o, keys, names, out, size);
	if (obj_num(o, "steer_slots"))
		flags_add(out, size, "Keys", obj_str(o, "steer_slots"));
	if (obj_num(o, "steer_held"))
		flags_add(out, size, "Held", obj_str(o, "steer_held"));
}

/*
 * The flags of a connection; Wait-K when it stopped reading because its
 * messages wait for KCM socket K (Wait-any: for any socket).
 */
static void flags_psock(const struct obj *o, char *out, size_t size)
{
	static const char *const keys[] = {
		"rx_stopped", "rx_paused", "tx_stopped", "mem_short", NULL };
	static const char *const names[] = {
		"RxStop", "RxPause", "TxStop", "MemShort" };
	const char *wait = obj_get(o, "rx_wait");

	flags_of(o, keys, names, out, size);
	if (wait && strcmp(wait, "-"))
		flags_add(out, size, "Wait", wait);
}

static void table_kcm(const struct obj *o, const struct snap *prev,
		      double secs)
{
	char flags[64];

	flags_kcm(o, flags, sizeof(flags));
	printf("  kcm-%-4llu %-10s %-9s %10llu %12llu %10llu %12llu %6llu %6llu %9llu %-5s",
	       obj_num(o, "index"), obj_str(o, "ino"), obj_str(o, "type"),
	       obj_num(o, "rx_msgs"), obj_num(o, "rx_bytes"),
	       obj_num(o, "tx_msgs"), obj_num(o, "tx_bytes"),
	       obj_num(o, "recv_q"), obj_num(o, "send_q"),
	       obj_num(o, "rmem") + obj_num(o, "smem"), obj_str(o, "psock"));
	table_rates(o, prev, secs);
	printf(" %s\n", flags);
}

static void table_psock(const struct obj *o, const struct snap *prev,
			double secs)
{
	char flags[64];

	flags_psock(o, flags, sizeof(flags));
	printf("  psock-%-2llu %-22s %-22s %-11s", obj_num(o, "index"),
	       obj_str(o, "local"), obj_str(o, "remote"),
	       obj_str(o, "tcp_state"));
	printf(" %10llu %12llu %10llu %12llu %6llu %6llu %9llu %-5s",
	       obj_num(o, "rx_msgs"), obj_num(o, "rx_bytes"),
	       obj_num(o, "tx_msgs"),
	       obj_num(o, "tx_bytes"), obj_num(o, "recv_q"),
	       obj_num(o, "send_q"), obj_num(o, "mem_charged"),
	       obj_str(o, "kcm"));
	table_rates(o, prev, secs);
	printf(" %s\n", flags);
}

/*
 * Bytes the mux @id holds, charged to its KCM sockets (their queues)
 * and to its connections' TCP sockets (framing, messages on the mux).
 */
static unsigned long long mux_mem(const struct snap *s, unsigned long long id)
{
	unsigned long long sum = 0;
	int i;

	for (i = 0; i < s->n; i++) {
		const struct obj *o = &s->obj[i];

		if (obj_num(o, "mux") != id)
			continue;
		if (!strcmp(o->kind, "kcm"))
			sum += obj_num(o, "rmem") + obj_num(o, "smem");
		else if (!strcmp(o->kind, "psock"))
			sum += obj_num(o, "mem_charged");
	}
	return sum;
}

static void table_mux(const struct snap *s, const struct obj *m,
		      const struct snap *prev, double secs)
{
	unsigned long long id = obj_num(m, "id");
	const char *steer;
	int i;

	printf("mux %llu: %llu KCM sockets, %llu connections; ", id,
	       obj_num(m, "kcms"), obj_num(m, "psocks"));
	printf("rx %llu msgs %llu B, tx %llu msgs %llu B; held %llu; ",
	       obj_num(m, "rx_msgs"), obj_num(m, "rx_bytes"),
	       obj_num(m, "tx_msgs"), obj_num(m, "tx_bytes"),
	       obj_num(m, "rx_hold"));
	printf("retries %llu, dropped %llu, attach %llu, unattach %llu; mem %llu B",
	       obj_num(m, "tx_retries"), obj_num(m, "tx_dropped"),
	       obj_num(m, "attach"), obj_num(m, "unattach"), mux_mem(s, id));
	steer = obj_get(m, "steer");
	if (steer && strcmp(steer, "off"))
		printf("; steer %s: steered %llu, no key %llu, moved %llu",
		       steer, obj_num(m, "steered"),
		       obj_num(m, "steer_nokey"), obj_num(m, "steer_moved"));
	table_rates(m, prev, secs);
	printf("\n  %-9s %-10s %-9s %10s %12s %10s %12s %6s %6s %9s %-5s", "KCM",
	       "inode", "type", "rx-msgs", "rx-bytes", "tx-msgs", "tx-bytes",
	       "recv-q", "send-q", "mem", "psock");
	table_rate_header(prev);
	printf(" flags\n");
	for (i = 0; i < s->n; i++)
		if (!strcmp(s->obj[i].kind, "kcm") &&
		    obj_num(&s->obj[i], "mux") == id)
			table_kcm(&s->obj[i], prev, secs);
	printf("  %-8s %-22s %-22s %-11s %10s %12s %10s %12s %6s %6s %9s %-5s",
	       "PSOCK", "local", "remote", "state", "rx-msgs", "rx-bytes",
	       "tx-msgs", "tx-bytes", "recv-q", "send-q", "mem", "kcm");
	table_rate_header(prev);
	printf(" flags\n");
	for (i = 0; i < s->n; i++)
		if (!strcmp(s->obj[i].kind, "psock") &&
		    obj_num(&s->obj[i], "mux") == id)
			table_psock(&s->obj[i], prev, secs);
}

/*
 * The totals of kcm_stats: its header and value lines, each column as
 * wide as its name or its value, then the rates with -i.
 */
static void table_totals(const struct snap *s, const struct snap *prev,
			 double secs)
{
	int i, j;

	printf("namespace totals (/proc/net/kcm_stats, destroyed muxes included)\n");
	for (i = 0; i < s->tot.n; i++) {
		const struct obj *o = &s->tot.obj[i];
		char *const *col = s->tot.col[i];
		int width[MAX_KEYS];

		printf("  %-8s", o->kind);
		for (j = 0; col[j]; j++) {
			width[j] = strlen(col[j]);
			if ((int)strlen(o->val[j]) > width[j])
				width[j] = strlen(o->val[j]);
			printf(" %*s", width[j], col[j]);
		}
		table_rate_header(prev);
		printf("\n  %-8s", "");
		for (j = 0; col[j]; j++)
			printf(" %*s", width[j], o->val[j]);
		table_rates(o, prev, secs);
		putchar('\n');
	}
}

/* What KCM sockets hold in all, from the "mem" line of kcm_ext. */
static void table_mem(const struct snap *s)
{
	int i;

	for (i = 0; i < s->n; i++)
		if (!strcmp(s->obj[i].kind, "mem"))
			printf("memory: KCM sockets hold %llu pages (net.kcm.mem)\n\n",
			       obj_num(&s->obj[i], "pages"));
}

static void print_table(const struct snap *s, const struct snap *prev,
			double secs)
{
	int i, n = 0;

	for (i = 0; i < s->n; i++) {
		if (strcmp(s->obj[i].kind, "mux"))
			continue;
		if (n++)
			putchar('\n');
		table_mux(s, &s->obj[i], prev, secs);
	}
	if (!n)
		printf("no KCM multiplexors\n");
	putchar('\n');
	table_mem(s);
	table_totals(s, prev, secs);
}

/* Enters network namespace @name: a path, or a name under /var/run/netns. */
static int enter_netns(const char *name)
{
	char path[4096];
	int fd;

	if (strchr(name, '/'))
		snprintf(path, sizeof(path), "%s", name);
	else
		snprintf(path, sizeof(path), "/var/run/netns/%s", name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "kcmstat: %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (setns(fd, CLONE_NEWNET) < 0) {
		fprintf(stderr, "kcmstat: setns %s: %s\n", path, strerror(errno));
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

static void help(FILE *f)
{
	fprintf(f, "usage: kcmstat [-j] [-i SECS [-c COUNT]] [-n NETNS]\n");
}

static struct snap snaps[2];

int main(int argc, char **argv)
{
	int opt, json = 0, count = 1, i;
	const char *netns = NULL;
	double interval = 0;
	struct snap *cur = &snaps[0], *prev = &snaps[1], *t;

	while ((opt = getopt(argc, argv, "ji:c:n:h")) != -1) {
		switch (opt) {
		case 'j':
			json = 1;
			break;
		case 'i':
			interval = strtod(optarg, NULL);
			if (interval <= 0) {
				fprintf(stderr, "kcmstat: -i wants a positive number of seconds\n");
				return 1;
			}
			break;
		case 'c':
			count = atoi(optarg);
			break;
		case 'n':
			netns = optarg;
			break;
		case 'h':
			help(stdout);
			return 0;
		default:
			help(stderr);
			return 1;
		}
	}
	if (optind != argc) {
		help(stderr);
		return 1;
	}
	if (netns && enter_netns(netns))
		return 1;
	if (snap_read(cur))
		return 1;
	if (!interval) {
		if (json)
			print_json(cur, NULL, 0, netns);
		else
			print_table(cur, NULL, 0);
		return 0;
	}
	for (i = 0; !count || i < count; i++) {
		struct timespec ts = { .tv_sec = (time_t)interval };
		double secs;

		ts.tv_nsec = (long)((interval - ts.tv_sec) * 1e9);
		t = prev;
		prev = cur;
		cur = t;
		nanosleep(&ts, NULL);
		if (snap_read(cur))
			return 1;
		secs = (cur->when.tv_sec - prev->when.tv_sec) +
		       (cur->when.tv_nsec - prev->when.tv_nsec) / 1e9;
		if (json) {
			print_json(cur, prev, secs, netns);
		} else {
			if (i)
				putchar('\n');
			printf("-- %.3f s --\n", secs);
			print_table(cur, prev, secs);
		}
		fflush(stdout);
	}
	return 0;
}
