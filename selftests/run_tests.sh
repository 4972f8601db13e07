#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Runs the KCM selftests in order and prints their TAP.  A program that
# dies without reporting (crash, missing binary) gets a "not ok" line of
# its own so that it is counted.  kcm_module.sh unloads and reloads the
# module, so it runs last.  The *_32 programs are 32-bit (the compat path),
# started through kcm_helper so that a kernel without IA32 emulation gives
# a SKIP rather than a shell trying to read them as scripts.

cd "$(dirname "$0")" || exit 1
tests="${KCM_TESTS:-kcm_uapi_compat kcm_basic kcm_ext kcm_lsm kcm_recv kcm_send kcm_stats kcm_extview kcm_batch kcm_races kcm_fuzz kcm_stress kcm_faults kcm_netem kcm_trace kcm_uring kcm_basic_32 kcm_ext_32 kcm_batch_32 kcm_compat_32 kcm_examples.sh kcm_module.sh}"
status=0
for t in $tests; do
	echo "# selftests: kcm: $t"
	case $t in
	*_32)
		# 32-bit programs (the compat path).  The distro module has no
		# compat ioctl at all: kcm_compat_32 records that; the 64-bit
		# suites built as 32-bit would only repeat it.
		if [ "${KCM_MODULE:-}" = distro ] && [ "$t" != kcm_compat_32 ]; then
			echo "ok 1 $t # SKIP distro module: no 32-bit ioctls (kcm_compat_32 records it)"
			continue
		fi
		./kcm_helper exec "./$t"
		;;
	*)
		"./$t"
		;;
	esac
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
