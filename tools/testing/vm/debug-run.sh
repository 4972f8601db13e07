#!/bin/sh
# shellcheck shell=sh
# SPDX-License-Identifier: GPL-2.0-only
#
# Guest side of 'make check-debug': run by vm.sh in /kcm on the debug
# kernel (tools/testing/debug-kernel.sh), after guest-init loaded kcm.ko.
#
#   sh debug-run.sh [TEST...]      (TEST...: KCM_TESTS for run_tests.sh)
#
#   1. the detectors are on (KASAN, lockdep, kmemleak), kcm.ko is in-tree
#   2. kmemleak baseline: two scans, boot-time suspects listed and cleared
#      (one allocated by kcm.ko, at load or by its KUnit suites, fails)
#   3. KUnit: every kunit/*.ko is loaded and each suite's results become
#      "ok - kunit: SUITE: CASE" lines (suites built into kcm.ko too)
#   4. the selftests: selftests/run_tests.sh
#   5. kmemleak: two scans, any suspect fails
#   6. rmmod kcm, then kmemleak again
#   7. lockdep did not turn itself off
# Reports in the kernel log (KASAN, lockdep, WARN, hung task, RCU stall,
# kmemleak) are judged by vm.sh on the console log.  Prints TAP; exits 1
# if a check or a selftest failed.

cd "$(dirname "$0")" || exit 1
kl=/sys/kernel/debug/kmemleak
failed=0

ok() {
	echo "ok - debug: $*"
}

not_ok() {
	echo "not ok - debug: $*"
	failed=1
}

# The first $2 (60) lines of file $1 as TAP comments.
show() {
	head -n "${2:-60}" "$1" | sed 's/^/#   /'
}

# kmemleak reports an object once it is older than 5 s and unchanged
# between two scans.
kmemleak_scan() {
	sleep 5
	echo scan >"$kl"
	sleep 5
	echo scan >"$kl"
}

suspects() {
	grep -c '^unreferenced object' "$kl"
}

# $1: what just happened.  Any suspect fails.
kmemleak_check() {
	kmemleak_scan
	n=$(suspects)
	if [ "$n" = 0 ]; then
		ok "kmemleak: no suspects $1"
	else
		not_ok "kmemleak: $n suspect(s) $1"
		show "$kl" 200
	fi
}

# ------------------------------------------------------------ 1. detectors
[ -d /sys/kernel/debug/kunit ] || mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
missing=
[ -w "$kl" ] || missing="$missing kmemleak"
[ -r /proc/lockdep_stats ] || missing="$missing lockdep"
dmesg | grep -q 'KernelAddressSanitizer initialized' || missing="$missing KASAN"
if [ -z "$missing" ]; then
	ok "detectors on: KASAN, lockdep, kmemleak"
else
	not_ok "detectors missing:$missing"
fi

if ! grep -q '^kcm ' /proc/modules; then
	not_ok "kcm.ko is not loaded"
elif [ -n "$(cat /sys/module/kcm/taint 2>/dev/null)" ]; then
	not_ok "kcm.ko taints the kernel ($(cat /sys/module/kcm/taint)): not the in-tree build"
else
	ok "kcm.ko is the in-tree build (no taint)"
fi

# ------------------------------------------------------------ 2. baseline
if [ -w "$kl" ]; then
	# Boot-time suspects are not ours: keep kmemleak's "N new suspected
	# memory leaks" line for them off the console (vm.sh would fail the
	# run); warnings and errors still get through.
	read -r level _ </proc/sys/kernel/printk
	echo 5 >/proc/sys/kernel/printk
	kmemleak_scan
	echo "$level" >/proc/sys/kernel/printk
	n=$(suspects)
	if grep -q '\[kcm\]' "$kl"; then
		not_ok "kmemleak baseline: suspects allocated by kcm.ko (its init or built-in KUnit suites)"
		show "$kl" 200
	else
		ok "kmemleak baseline: $n boot-time suspect(s), cleared"
		[ "$n" = 0 ] || show "$kl" 40
	fi
	echo clear >"$kl"
fi

# ------------------------------------------------------------ 3. KUnit
kunit_mods=
for ko in kunit/*.ko; do
	[ -e "$ko" ] || continue
	if msg=$(insmod "$ko" 2>&1); then
		kunit_mods="$(basename "$ko" .ko) $kunit_mods"
	else
		not_ok "kunit: insmod $ko: $msg"
	fi
done
suites=0
for results in /sys/kernel/debug/kunit/*/results; do
	[ -r "$results" ] || continue
	suites=$((suites + 1))
	suite=$(basename "$(dirname "$results")")
	# Test cases are the lines indented once: "    ok 1 name [# SKIP why]".
	sed -n -E "s/^    (not ok|ok) [0-9]+ (.*)/\\1 - kunit: $suite: \\2/p" "$results"
	grep -q '^    not ok ' "$results" && failed=1
done
[ "$suites" = 0 ] && echo "# kunit: no KUnit suite (none built in net/kcm)"
for m in $kunit_mods; do
	msg=$(rmmod "$m" 2>&1) || not_ok "kunit: rmmod $m: $msg"
done

# ------------------------------------------------------------ 4. selftests
[ $# -gt 0 ] && KCM_TESTS="$*" && export KCM_TESTS
./selftests/run_tests.sh || failed=1

# ------------------------------------------------------------ 5, 6. leaks
if [ -w "$kl" ]; then
	kmemleak_check "after the selftests"
fi
if ! grep -q '^kcm ' /proc/modules; then
	echo "ok - debug: rmmod kcm # SKIP kcm is not loaded"
elif msg=$(rmmod kcm 2>&1); then
	ok "rmmod kcm"
	[ -w "$kl" ] && kmemleak_check "after rmmod kcm"
else
	not_ok "rmmod kcm: $msg"
fi

# ------------------------------------------------------------ 7. lockdep
if grep -qE 'debug_locks: +1$' /proc/lockdep_stats 2>/dev/null; then
	ok "lockdep still on"
else
	not_ok "lockdep turned itself off (a report or an overflow: see the console log)"
fi
grep -E 'lock-classes|direct dependencies|dependency chains:' /proc/lockdep_stats 2>/dev/null |
	sed 's/^ */# lockdep: /'

exit "$failed"
