/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A small TAP 13 test harness for the KCM selftests.
 *
 * It follows the kernel's kselftest_harness.h (tools/testing/selftests):
 * the same macro names and arguments, the same TAP, the same ksft exit
 * codes, so that a test reads as any kernel selftest does.  TEST(name)
 * { ... } registers a test.  FIXTURE(f) { fields }, FIXTURE_SETUP(f),
 * FIXTURE_TEARDOWN(f), FIXTURE_VARIANT(f) { fields } and
 * FIXTURE_VARIANT_ADD(f, v) { initialisers } declare a fixture and its
 * variants; TEST_F(f, name) then runs once per variant as "f.v.name", with
 * self (the fixture's data, set up before and torn down after) and variant.
 * Every test runs in a child process of its own (a crash or a hang fails
 * that test only, and the sockets it leaves behind are closed before the
 * next one starts).  ASSERT_* end the test on failure (the child exits:
 * unlike the kernel's harness, the teardown does not run, exit closes
 * what it would), EXPECT_* record the failure and go on.
 * SKIP(statement, "why") ends it as "ok N name # SKIP why".
 *
 * TEST_DIFFERS(name, "why") marks a test of a behaviour where this module
 * deliberately differs from the kernel's own kcm.ko.  When the suite runs
 * against that module (KCM_MODULE=distro in the environment), the test is
 * expected to fail: the failure is reported as "not ok ... # TODO upstream:
 * why" (recorded, not counted as a failure); a pass is a real failure,
 * since the recorded difference is then wrong.  TEST_DIFFERS_MOSTLY()
 * marks one that timing decides there: its pass is reported, not failed.
 */
#ifndef KCM_TEST_H
#define KCM_TEST_H

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

/*
 * The exit codes: the kernel's own kselftest.h where the suite is a
 * kselftest target (tools/testing/selftests/net/kcm), the same values
 * standalone.
 */
#if __has_include("../../kselftest.h")
#include "../../kselftest.h"
#else
#define KSFT_PASS	0
#define KSFT_FAIL	1
#define KSFT_SKIP	4
#endif

#ifndef ARRAY_SIZE
#define ARRAY_SIZE(a)		(sizeof(a) / sizeof((a)[0]))
#endif

#define KCM_TEST_MAX		256
#define KCM_TEST_TIMEOUT	60
#define KCM_SKIP_REASON_MAX	4096	/* one page, shared */

#define KCM_FIXTURE_VARIANTS	8

/* A fixture: the size of its data, its set-up and teardown, its variants */
struct kcm_fixture {
	const char *name;
	size_t size;
	void (*setup)(void *self, const void *variant);
	void (*teardown)(void *self, const void *variant);
	const char *vnames[KCM_FIXTURE_VARIANTS];
	const void *variants[KCM_FIXTURE_VARIANTS];
	int nvariants;
};

struct kcm_test {
	const char *name;
	void (*fn)(void);
	const char *differs;	/* reason, for TEST_DIFFERS() */
	int mostly;		/* TEST_DIFFERS_MOSTLY() */
	/* TEST_F(): run once per variant of the fixture */
	struct kcm_fixture *fixture;
	void (*fn_f)(void *self, const void *variant);
};

extern struct kcm_test kcm_tests[KCM_TEST_MAX];
extern int kcm_ntests;
extern int kcm_test_failed;	/* set by EXPECT_* in the child */
extern char *kcm_skip_reason;	/* SKIP()'s reason, shared with the child */

/* The harness's globals: one definition in each program. */
#define KCM_TEST_GLOBALS						\
	struct kcm_test kcm_tests[KCM_TEST_MAX];			\
	int kcm_ntests;							\
	int kcm_test_failed;						\
	char *kcm_skip_reason

static inline void kcm_test_register(const char *name, void (*fn)(void),
				     const char *differs, int mostly)
{
	if (kcm_ntests == KCM_TEST_MAX) {
		fprintf(stderr, "too many tests\n");
		exit(KSFT_FAIL);
	}
	kcm_tests[kcm_ntests].name = name;
	kcm_tests[kcm_ntests].fn = fn;
	kcm_tests[kcm_ntests].differs = differs;
	kcm_tests[kcm_ntests].mostly = mostly;
	kcm_ntests++;
}

#define __TEST(name, differs, mostly)					\
	static void test_##name(void);					\
	static void __attribute__((constructor)) reg_##name(void)	\
	{								\
		kcm_test_register(#name, test_##name, differs, mostly);	\
	}								\
	static void test_##name(void)

#define TEST(name)			__TEST(name, NULL, 0)
#define TEST_DIFFERS(name, why)		__TEST(name, why, 0)
/*
 * A difference that the distro module shows in most runs, not all: which
 * way it goes there depends on timing (a reset racing a sender's wait).
 * Its pass there is "ok ... # distro passed this time", not a failure.
 */
#define TEST_DIFFERS_MOSTLY(name, why)	__TEST(name, why, 1)

static inline void kcm_fixture_variant(struct kcm_fixture *f, const char *name,
				       const void *variant)
{
	if (f->nvariants == KCM_FIXTURE_VARIANTS) {
		fprintf(stderr, "%s: too many variants\n", f->name);
		exit(KSFT_FAIL);
	}
	f->vnames[f->nvariants] = name;
	f->variants[f->nvariants++] = variant;
}

static inline void kcm_test_register_f(struct kcm_fixture *f, const char *name,
				       void (*fn)(void *, const void *),
				       const char *differs)
{
	kcm_test_register(name, NULL, differs, 0);
	kcm_tests[kcm_ntests - 1].fixture = f;
	kcm_tests[kcm_ntests - 1].fn_f = fn;
}

/* FIXTURE(f) { fields }: the data of each test of f ("self") */
#define FIXTURE_DATA(f)		struct _fixture_data_##f
#define FIXTURE(f)							\
	FIXTURE_DATA(f);						\
	FIXTURE_VARIANT(f);						\
	static void _fixture_setup_##f(struct _fixture_data_##f *,	\
				       const struct _fixture_variant_##f *); \
	static void _fixture_teardown_##f(struct _fixture_data_##f *,	\
					  const struct _fixture_variant_##f *); \
	static struct kcm_fixture _fixture_##f = {			\
		.name = #f,						\
		.setup = (void (*)(void *, const void *))_fixture_setup_##f, \
		.teardown = (void (*)(void *, const void *))		\
			_fixture_teardown_##f,				\
	};								\
	FIXTURE_DATA(f)

/* Its data is complete here: its size is known */
#define FIXTURE_SETUP(f)						\
	static void __attribute__((constructor)) _fixture_size_##f(void) \
	{								\
		_fixture_##f.size = sizeof(FIXTURE_DATA(f));		\
	}								\
	static void _fixture_setup_##f(struct _fixture_data_##f *self,	\
				       const struct _fixture_variant_##f *variant)

#define FIXTURE_TEARDOWN(f)						\
	static void _fixture_teardown_##f(struct _fixture_data_##f *self, \
					  const struct _fixture_variant_##f *variant \
					  __attribute__((unused)))

/* FIXTURE_VARIANT(f) { fields }: what tells the variants apart */
#define FIXTURE_VARIANT(f)	struct _fixture_variant_##f

/* FIXTURE_VARIANT_ADD(f, v) { initialisers }: one variant, named v */
#define FIXTURE_VARIANT_ADD(f, v)					\
	static const FIXTURE_VARIANT(f) _variant_##f##_##v;		\
	static void __attribute__((constructor)) _reg_variant_##f##_##v(void) \
	{								\
		kcm_fixture_variant(&_fixture_##f, #v, &_variant_##f##_##v); \
	}								\
	static const FIXTURE_VARIANT(f) _variant_##f##_##v =

#define __TEST_F(f, name, differs)					\
	static void test_##f##_##name(struct _fixture_data_##f *,	\
				      const struct _fixture_variant_##f *); \
	static void __attribute__((constructor)) reg_##f##_##name(void)	\
	{								\
		kcm_test_register_f(&_fixture_##f, #name,		\
				    (void (*)(void *, const void *))	\
				    test_##f##_##name, differs);	\
	}								\
	static void test_##f##_##name(struct _fixture_data_##f *self	\
				      __attribute__((unused)),		\
				      const struct _fixture_variant_##f *variant \
				      __attribute__((unused)))

#define TEST_F(f, name)			__TEST_F(f, name, NULL)
#define TEST_F_DIFFERS(f, name, why)	__TEST_F(f, name, why)

#define TH_LOG(fmt, ...)						\
	printf("# %s:%d: " fmt "\n", __FILE__, __LINE__, ##__VA_ARGS__)

/*
 * In a test the reason goes on its "ok" line, elsewhere on a line of its
 * own.  The test's process ends here: @statement (return, as the kernel's
 * harness wants it) is for the reader and the compiler.
 */
#define SKIP(statement, fmt, ...) do {					\
	if (kcm_skip_reason)						\
		snprintf(kcm_skip_reason, KCM_SKIP_REASON_MAX, fmt,	\
			 ##__VA_ARGS__);				\
	else								\
		printf("# SKIP " fmt "\n", ##__VA_ARGS__);		\
	fflush(stdout);							\
	_exit(KSFT_SKIP);						\
	statement;							\
} while (0)

#define __CHECK(cond, fatal, fmt, ...) do {				\
	if (!(cond)) {							\
		TH_LOG("%s failed: " fmt, #cond, ##__VA_ARGS__);	\
		kcm_test_failed = 1;					\
		if (fatal) {						\
			fflush(stdout);					\
			_exit(KSFT_FAIL);				\
		}							\
	}								\
} while (0)

#define __CMP(a, op, b, fatal) do {					\
	long long __a = (long long)(a), __b = (long long)(b);		\
	__CHECK(__a op __b, fatal, "%lld %s %lld", __a, #op, __b);	\
} while (0)

#define ASSERT_EQ(a, b)		__CMP(a, ==, b, 1)
#define ASSERT_NE(a, b)		__CMP(a, !=, b, 1)
#define ASSERT_GE(a, b)		__CMP(a, >=, b, 1)
#define ASSERT_LT(a, b)		__CMP(a, <, b, 1)
#define ASSERT_LE(a, b)		__CMP(a, <=, b, 1)
#define ASSERT_GT(a, b)		__CMP(a, >, b, 1)
#define ASSERT_TRUE(c)		__CHECK(c, 1, "%s", "")
#define EXPECT_EQ(a, b)		__CMP(a, ==, b, 0)
#define EXPECT_NE(a, b)		__CMP(a, !=, b, 0)
#define EXPECT_GE(a, b)		__CMP(a, >=, b, 0)
#define EXPECT_GT(a, b)		__CMP(a, >, b, 0)
#define EXPECT_LE(a, b)		__CMP(a, <=, b, 0)
#define EXPECT_LT(a, b)		__CMP(a, <, b, 0)
#define EXPECT_TRUE(c)		__CHECK(c, 0, "%s", "")

/* A call that must fail with @err: checks both the -1 and errno. */
#define ASSERT_ERRNO(call, err) do {					\
	errno = 0;							\
	long long __r = (long long)(call);				\
	int __e = errno;						\
	__CHECK(__r == -1 && __e == (err), 1,				\
		"returned %lld errno %d (%s), want -1 errno %d (%s)",	\
		__r, __e, strerror(__e), (int)(err), strerror(err));	\
} while (0)

/* A call that must succeed (return >= 0). */
#define ASSERT_OK(call) do {						\
	long long __r = (long long)(call);				\
	__CHECK(__r >= 0, 1, "returned %lld errno %d (%s)", __r,	\
		errno, strerror(errno));				\
} while (0)

#define KCM_TEST_MAIN							\
	KCM_TEST_GLOBALS;						\
	int main(int argc, char **argv)					\
	{								\
		return kcm_test_main(argc, argv);			\
	}

/* The body of a test in its child: TEST() or a fixture's variant @v */
static inline void kcm_test_body(const struct kcm_test *t, int v)
{
	const struct kcm_fixture *f = t->fixture;
	const void *variant;
	void *self;

	if (!f) {
		t->fn();
		return;
	}
	variant = f->nvariants ? f->variants[v] : NULL;
	self = calloc(1, f->size ? f->size : 1);
	if (!self) {
		TH_LOG("%s: no memory for the fixture", f->name);
		_exit(KSFT_FAIL);
	}
	f->setup(self, variant);
	t->fn_f(self, variant);
	f->teardown(self, variant);
	free(self);
}

static inline int kcm_test_run_one(const struct kcm_test *t, int v,
				   const char *name)
{
	int status;
	pid_t pid;

	fflush(stdout);
	if (kcm_skip_reason)
		kcm_skip_reason[0] = 0;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		alarm(KCM_TEST_TIMEOUT);
		kcm_test_body(t, v);
		fflush(stdout);
		_exit(kcm_test_failed ? KSFT_FAIL : KSFT_PASS);
	}
	if (waitpid(pid, &status, 0) < 0)
		return -1;
	if (WIFSIGNALED(status)) {
		printf("# %s: killed by signal %d%s\n", name,
		       WTERMSIG(status),
		       WTERMSIG(status) == SIGALRM ? " (timeout)" : "");
		return KSFT_FAIL;
	}
	return WEXITSTATUS(status);
}

static inline int kcm_test_against_distro(void)
{
	const char *m = getenv("KCM_MODULE");

	return m && !strcmp(m, "distro");
}

/* How many results @t gives: one, or one per variant of its fixture */
static inline int kcm_test_runs(const struct kcm_test *t)
{
	if (!t->fixture || !t->fixture->nvariants)
		return 1;
	return t->fixture->nvariants;
}

/* The TAP name: "name", "fixture.name" or "fixture.variant.name" */
static inline void kcm_test_name(const struct kcm_test *t, int v, char *buf,
				 size_t size)
{
	const struct kcm_fixture *f = t->fixture;

	if (!f)
		snprintf(buf, size, "%s", t->name);
	else if (!f->nvariants)
		snprintf(buf, size, "%s.%s", f->name, t->name);
	else
		snprintf(buf, size, "%s.%s.%s", f->name, f->vnames[v], t->name);
}

struct kcm_test_totals {
	int pass, fail, skip, xfail;
};

/* One TAP line for result @rc of test number @n */
static inline void kcm_test_report(const struct kcm_test *t, int n,
				   const char *name, int rc, int distro,
				   struct kcm_test_totals *tot)
{
	if (rc == KSFT_SKIP) {
		printf("ok %d %s # SKIP %s\n", n, name,
		       kcm_skip_reason ? kcm_skip_reason : "");
		tot->skip++;
	} else if (distro && t->differs && rc != KSFT_PASS) {
		printf("not ok %d %s # TODO upstream: %s\n", n, name,
		       t->differs);
		tot->xfail++;
	} else if (distro && t->differs && t->mostly) {
		printf("ok %d %s # distro passed this time; in most runs: %s\n",
		       n, name, t->differs);
		tot->pass++;
	} else if (distro && t->differs) {
		printf("not ok %d %s # %s: %s\n", n, name,
		       "passed on the distro module, recorded to differ",
		       t->differs);
		tot->fail++;
	} else if (rc == KSFT_PASS) {
		printf("ok %d %s\n", n, name);
		tot->pass++;
	} else {
		printf("not ok %d %s\n", n, name);
		tot->fail++;
	}
}

static inline int kcm_test_main(int argc, char **argv)
{
	struct kcm_test_totals tot = { 0 };
	int distro = kcm_test_against_distro();
	int i, v, n = 0, plan = 0;
	char name[256];

	setvbuf(stdout, NULL, _IOLBF, 0);
	kcm_skip_reason = mmap(NULL, KCM_SKIP_REASON_MAX,
			       PROT_READ | PROT_WRITE,
			       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (kcm_skip_reason == MAP_FAILED)
		kcm_skip_reason = NULL;
	for (i = 0; i < kcm_ntests; i++)
		plan += kcm_test_runs(&kcm_tests[i]);
	printf("TAP version 13\n1..%d\n", plan);
	for (i = 0; i < kcm_ntests; i++) {
		const struct kcm_test *t = &kcm_tests[i];

		for (v = 0; v < kcm_test_runs(t); v++) {
			kcm_test_name(t, v, name, sizeof(name));
			kcm_test_report(t, ++n, name,
					kcm_test_run_one(t, v, name), distro,
					&tot);
		}
	}
	printf("# Totals: pass:%d fail:%d xfail:%d xpass:0 skip:%d error:0\n",
	       tot.pass, tot.fail, tot.xfail, tot.skip);
	(void)argc;
	(void)argv;
	if (tot.fail)
		return KSFT_FAIL;
	return tot.pass || tot.xfail ? KSFT_PASS : KSFT_SKIP;
}

#endif /* KCM_TEST_H */
