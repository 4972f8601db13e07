#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# make profile: where the CPU goes in one kcmperf workload, seen by perf
# inside the VM.  The host's perf binary (Debian's linux-perf) and the
# shared libraries it needs are copied into the guest and run through the
# dynamic loader, so the busybox initramfs needs no C library of its own.
# Samples are cpu-clock (TCG has no hardware counters), system wide, taken
# while the workload runs; kernel symbols come from /proc/kallsyms, ours
# included.
#
#   profile.sh --module KO [--kver VER] [--out DIR] [--secs S] [--graph]
#              [--lines N] [-- KCMPERF-ARGS...]
#
# KCMPERF-ARGS default to the 64-byte receive of make bench:
# -i kcm -m rx -s 64 -c 2 -k 2.  Prints kcmperf's line, the hottest
# symbols per command, the inclusive (children) view and the share of
# each command; with --graph also the call graphs of the hottest symbols.
# kcmperf names its threads by role, so that each is a command of its
# own: kp-send-N (rx's forked senders), kp-kcm-N (KCM readers), kp-io
# and kp-work-N (the user-space framer), kp-tcp-N (raw TCP readers);
# swapper is the idle CPU.
# --lines N shows N rows of the self and inclusive views (40 and 50): the
# kernel's small items, each under 1%, add up to what a workload costs.
# The whole report is kept in OUT/report.txt.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
module=
kver=
out=$top/.build/profile
secs=3
graph=0
lines=
usage() {
	cat >&2 <<'EOF'
usage: profile.sh --module KO [--kver VER] [--out DIR] [--secs S (3)]
                  [--graph] [--lines N] [-- KCMPERF-ARGS...]
EOF
	exit 2
}
while [ $# -gt 0 ]; do
	case $1 in
	--module) module=$2; shift 2 ;;
	--kver) kver=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--secs) secs=$2; shift 2 ;;
	--graph) graph=1; shift ;;
	--lines) lines=$2; shift 2 ;;
	--) shift; break ;;
	*) usage ;;
	esac
done
die() {
	echo "profile: $*" >&2
	exit 1
}
[ -n "$module" ] || usage
[ -f "$module" ] || die "module not found: $module"
[ -x "$top/tools/kcmperf" ] || die "tools/kcmperf not built: make tools"
[[ $secs =~ ^[1-9][0-9]*$ ]] || die "--secs wants whole seconds"
[[ -z $lines || $lines =~ ^[1-9][0-9]*$ ]] || die "--lines wants a count"
if [ $# = 0 ]; then
	set -- -i kcm -m rx -s 64 -c 2 -k 2
fi
if [ -z "$kver" ]; then
	kver=$(modinfo -F vermagic "$module" | awk '{ print $1 }')
fi

perf=$(command -v perf || true)
if [ -z "$perf" ]; then
	[ "$(id -u)" = 0 ] || die "perf not found: apt-get install linux-perf"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
		--no-install-recommends linux-perf >/dev/null
	perf=$(command -v perf) || die "perf still not found"
fi

payload=$out/payload
rm -rf "$payload"
mkdir -p "$payload/lib"
cp "$perf" "$payload/perf"
# Every library perf links, and the loader that runs it.
ldd "$perf" | awk '/=> \// { print $3 } /^\t\/.*ld-linux/ { print $1 }' |
	while read -r lib; do
		cp -L "$lib" "$payload/lib/"
	done
[ -f "$payload/lib/ld-linux-x86-64.so.2" ] || die "no dynamic loader found for $perf"
cp "$top/tools/kcmperf" "$payload/"
cp "$module" "$payload/kcm.ko"

# The guest runs the workload for warm-up + secs + slack and samples the
# middle of it.
{
	echo '#!/bin/sh'
	printf 'secs=%s graph=%s self=%s incl=%s\n' "$secs" "$graph" \
		"${lines:-40}" "${lines:-50}"
	printf 'set -- %s\n' "$*"
	cat <<'GUEST'
PERF="./lib/ld-linux-x86-64.so.2 --library-path ./lib ./perf"
insmod ./kcm.ko || exit 1
echo 0 >/proc/sys/kernel/kptr_restrict
echo -1 >/proc/sys/kernel/perf_event_paranoid
echo 33554432 >/proc/sys/net/core/rmem_max
# as make bench: -m scale's 1000 connections must not put TCP under
# memory pressure (4x a 1 GB guest's default; awk reads /proc whole)
mem=$(awk '{ printf "%d %d %d", $1 * 4, $2 * 4, $3 * 4 }' /proc/sys/net/ipv4/tcp_mem)
echo "$mem" >/proc/sys/net/ipv4/tcp_mem
./kcmperf -t $((secs + 3)) -W 3 "$@" >/tmp/kcmperf.out 2>&1 &
sleep 2
g=
[ "$graph" = 1 ] && g=-g
# shellcheck disable=SC2086 # empty or -g
$PERF record -a $g -e cpu-clock -F 2000 -o /tmp/perf.data -- sleep "$secs" \
	>/dev/null 2>&1
wait
echo "== kcmperf"
cat /tmp/kcmperf.out
report() {
	$PERF report -i /tmp/perf.data --stdio "$@" 2>/dev/null |
		grep -v '^#' | grep -v '^$'
}
echo "== self, by command and symbol"
report --no-children --sort comm,sym -g none | head -"$self"
echo "== children (inclusive), by symbol"
report --children --sort sym -g none | head -"$incl"
echo "== by command"
report --sort comm -g none | head -10
if [ "$graph" = 1 ]; then
	echo "== call graphs of the hottest symbols"
	report --no-children --sort sym --percent-limit 3 \
		-g caller,0.5,callee,function,percent | head -300
fi
GUEST
} >"$payload/profile-guest.sh"

# Both vCPUs run at once (multi-threaded TCG): the workloads are parallel.
KCM_VM_TCG_THREAD=${KCM_VM_TCG_THREAD:-multi} \
"$top/tools/testing/vm/vm.sh" --module "$module" --no-module \
	--kernel-version "$kver" --extra-modules '' --payload "$payload" \
	--timeout 600 --out "$out/vm" --run 'sh ./profile-guest.sh' |
	tee "$out/report.txt"
