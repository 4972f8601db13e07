/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A small TAP 13 test harness for the KCM selftests.
 *
 * TEST(name) { ... } registers a test.  Every test runs in a child process
 * of its own (a crash or a hang fails that test only, and the sockets it
 * leaves behind are closed before the next one starts).  ASSERT_* end the
 * test on failure, EXPECT_* record the failure and go on.  SKIP("why")
 * ends it as "ok N name # SKIP why".
 *
 * TEST_DIFFERS(name, "why") marks a test of a behaviour where this module
 * deliberately differs from the kernel's own kcm.ko.  When the suite runs
 * against that module (KCM_MODULE=distro in the environment), the test is
 * expected to fail: the failure is reported as "not ok ... # TODO upstream:
 * why" (recorded, not counted as a failure); a pass is a real failure,
 * since the recorded difference is then wrong.
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

#define KSFT_PASS	0
#define KSFT_FAIL	1
#define KSFT_SKIP	4

#ifndef ARRAY_SIZE
#define ARRAY_SIZE(a)		(sizeof(a) / sizeof((a)[0]))
#endif

#define KCM_TEST_MAX		256
#define KCM_TEST_TIMEOUT	60
#define KCM_SKIP_REASON_MAX	4096	/* one page, shared */

struct kcm_test {
	const char *name;
	void (*fn)(void);
	const char *differs;	/* reason, for TEST_DIFFERS() */
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
				     const char *differs)
{
	if (kcm_ntests == KCM_TEST_MAX) {
		fprintf(stderr, "too many tests\n");
		exit(KSFT_FAIL);
	}
	kcm_tests[kcm_ntests].name = name;
	kcm_tests[kcm_ntests].fn = fn;
	kcm_tests[kcm_ntests].differs = differs;
	kcm_ntests++;
}

#define __TEST(name, differs)						\
	static void test_##name(void);					\
	static void __attribute__((constructor)) reg_##name(void)	\
	{								\
		kcm_test_register(#name, test_##name, differs);		\
	}								\
	static void test_##name(void)

#define TEST(name)			__TEST(name, NULL)
#define TEST_DIFFERS(name, why)		__TEST(name, why)

#define TH_LOG(fmt, ...)						\
	printf("# %s:%d: " fmt "\n", __FILE__, __LINE__, ##__VA_ARGS__)

/* In a test the reason goes on its "ok" line, elsewhere on a line of its own. */
#define SKIP(fmt, ...) do {						\
	if (kcm_skip_reason)						\
		snprintf(kcm_skip_reason, KCM_SKIP_REASON_MAX, fmt,	\
			 ##__VA_ARGS__);				\
	else								\
		printf("# SKIP " fmt "\n", ##__VA_ARGS__);		\
	fflush(stdout);							\
	_exit(KSFT_SKIP);						\
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
#define EXPECT_GE(a, b)		__CMP(a, >=, b, 0)
#define EXPECT_LE(a, b)		__CMP(a, <=, b, 0)
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

static inline int kcm_test_run_one(const struct kcm_test *t)
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
		t->fn();
		fflush(stdout);
		_exit(kcm_test_failed ? KSFT_FAIL : KSFT_PASS);
	}
	if (waitpid(pid, &status, 0) < 0)
		return -1;
	if (WIFSIGNALED(status)) {
		printf("# %s: killed by signal %d%s\n", t->name,
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

static inline int kcm_test_main(int argc, char **argv)
{
	int pass = 0, fail = 0, skip = 0, xfail = 0;
	int distro = kcm_test_against_distro();
	int i;

	setvbuf(stdout, NULL, _IOLBF, 0);
	kcm_skip_reason = mmap(NULL, KCM_SKIP_REASON_MAX,
			       PROT_READ | PROT_WRITE,
			       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (kcm_skip_reason == MAP_FAILED)
		kcm_skip_reason = NULL;
	printf("TAP version 13\n1..%d\n", kcm_ntests);
	for (i = 0; i < kcm_ntests; i++) {
		const struct kcm_test *t = &kcm_tests[i];
		int rc = kcm_test_run_one(t);

		if (rc == KSFT_SKIP) {
			printf("ok %d %s # SKIP %s\n", i + 1, t->name,
			       kcm_skip_reason ? kcm_skip_reason : "");
			skip++;
		} else if (distro && t->differs && rc != KSFT_PASS) {
			printf("not ok %d %s # TODO upstream: %s\n", i + 1,
			       t->name, t->differs);
			xfail++;
		} else if (distro && t->differs) {
			printf("not ok %d %s # %s: %s\n", i + 1, t->name,
			       "passed on the distro module, recorded to differ",
			       t->differs);
			fail++;
		} else if (rc == KSFT_PASS) {
			printf("ok %d %s\n", i + 1, t->name);
			pass++;
		} else {
			printf("not ok %d %s\n", i + 1, t->name);
			fail++;
		}
	}
	printf("# Totals: pass:%d fail:%d xfail:%d xpass:0 skip:%d error:0\n",
	       pass, fail, xfail, skip);
	(void)argc;
	(void)argv;
	if (fail)
		return KSFT_FAIL;
	return pass || xfail ? KSFT_PASS : KSFT_SKIP;
}

#endif /* KCM_TEST_H */
