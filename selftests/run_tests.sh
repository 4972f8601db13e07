#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Runs the KCM selftests in the VM (make check) and prints their TAP: the
# programs of tests.list ("make emit_tests", the Makefile's lists, in the
# kselftest runner's order), or those of KCM_TESTS.  A program that dies
# without reporting (crash, missing binary) gets a "not ok" line of its
# own so that it is counted.  In a kernel tree the same suite runs under
# the kselftest runner instead (Makefile).

cd "$(dirname "$0")" || exit 1
tests=${KCM_TESTS:-$(sed 's/^[^:]*://' tests.list)}
if [ -z "$tests" ]; then
	echo "not ok - run_tests: no tests.list (make -C selftests install)"
	exit 1
fi
status=0
for t in $tests; do
	echo "# selftests: kcm: $t"
	"./$t"
	rc=$?
	case $rc in
	0 | 4) ;;
	1) status=1 ;;
	*)
		echo "not ok - $t: exited with status $rc (crashed or did not run)"
		status=1
		;;
	esac
done
exit $status
