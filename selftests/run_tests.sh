#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Runs the KCM selftests in order and prints their TAP.  A program that
# dies without reporting (crash, missing binary) gets a "not ok" line of
# its own so that it is counted.  kcm_module.sh unloads and reloads the
# module, so it runs last.

cd "$(dirname "$0")" || exit 1
tests="${KCM_TESTS:-kcm_uapi_compat kcm_basic kcm_ext kcm_lsm kcm_recv kcm_send kcm_stats kcm_extview kcm_races kcm_fuzz kcm_stress kcm_faults kcm_netem kcm_examples.sh kcm_module.sh}"
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
