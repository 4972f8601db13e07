#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# The 32-bit compat path: kcm_basic, kcm_ext and kcm_batch built again as
# 32-bit programs, and kcm_compat_32 (what only a 32-bit caller has).  Each
# is started through kcm_helper, so that a kernel without IA32 emulation
# gives a SKIP rather than a shell trying to read it as a script.  The TAP
# of each program is printed as it comes, after a "# selftests:" line;
# the exit status is the worst of theirs (1 fail, 4 all skipped).
#
# On the distro module (KCM_MODULE=distro) there are no 32-bit ioctls at
# all: kcm_compat_32 records that, the other three would only repeat it.

cd "$(dirname "$0")" || exit 1
progs=${KCM_COMPAT32_TESTS:-kcm_basic_32 kcm_ext_32 kcm_batch_32 kcm_compat_32}
status=4
for t in $progs; do
	echo "# selftests: kcm: $t"
	if [ "${KCM_MODULE:-}" = distro ] && [ "$t" != kcm_compat_32 ]; then
		echo "ok 1 $t # SKIP distro module: no 32-bit ioctls (kcm_compat_32 records it)"
		continue
	fi
	./kcm_helper exec "./$t"
	rc=$?
	case $rc in
	0) [ "$status" = 4 ] && status=0 ;;
	4) ;;
	1) status=1 ;;
	*)
		echo "not ok - $t: exited with status $rc (crashed or did not run)"
		status=1
		;;
	esac
done
exit $status
