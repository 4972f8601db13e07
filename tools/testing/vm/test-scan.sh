#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# Unit test of vm.sh's kernel-log scan (no VM needed): each sample line is
# wrapped in a minimal console log (CRLF, as the serial port writes it) and
# judged with 'vm.sh --scan-log'.  Prints TAP; exit 0 when all pass.

set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# want|line
samples=$(cat <<'EOF'
clean|[    0.262652] Spectre V2 : Mitigation: Retpolines
clean|[    0.836039] PCI: Using host bridge windows from ACPI; if necessary, use "pci=nocrs" and report a bug
clean|[    1.118465] AMD-Vi: AMD IOMMUv2 functionality not available on this system - This is not a bug.
clean|[    0.245760] tsc: Marking TSC unstable due to TSCs unsynchronized
clean|[    0.100000] kmemleak: Kernel memory leak detector initialized (mem pool available: 15693)
clean|[    0.100000] kmemleak: Automatic memory scanning thread started
clean|kcm-vm: exit 0, tainted 4096
bad|[    1.902573] WARNING: CPU: 1 PID: 109 at net/kcm/kcmsock.c:9 kcm_sendmsg+0xe/0x100 [kcm]
bad|[    1.905815] BUG: kernel NULL pointer dereference, address: 0000000000000000
bad|[    1.906493] Oops: 0002 [#1] PREEMPT SMP NOPTI
bad|[    1.907245] Kernel panic - not syncing: Fatal exception
bad|[    1.000000] general protection fault, probably for non-canonical address 0xdead000000000100: 0000 [#1] PREEMPT SMP
bad|[    1.000000] BUG: KASAN: use-after-free in kcm_rcv_strparser+0x1/0x2 [kcm]
bad|[    1.000000] UBSAN: shift-out-of-bounds in net/kcm/kcmsock.c:12:3
bad|[    1.000000] BUG: KFENCE: out-of-bounds read in kcm_recvmsg+0x1/0x2
bad|[    1.000000] WARNING: possible recursive locking detected
bad|[    1.000000] WARNING: possible circular locking dependency detected
bad|[    1.000000] WARNING: suspicious RCU usage
bad|[    1.000000] INFO: task kworker/0:1:12 blocked for more than 120 seconds.
bad|[    1.000000] kmemleak: 2 new suspected memory leaks (see /sys/kernel/debug/kmemleak)
bad|[    1.000000] unreferenced object 0xffff888004f1c000 (size 256):
bad|[    1.000000] Call Trace:
bad|[    1.000000] rcu: INFO: rcu_preempt self-detected stall on CPU
bad|[    1.000000] rcu: INFO: rcu_sched detected stalls on CPUs/tasks:
bad|[    1.000000] INFO: rcu_tasks detected stalls on tasks:
bad|[    1.000000] BUG kcm_mux_cache (Tainted: G           O     ): Objects remaining in kcm_mux_cache on __kmem_cache_shutdown()
bad|[    1.000000] BUG kmalloc-64 (Not tainted): Poison overwritten
bad|[    1.000000] watchdog: BUG: soft lockup - CPU#0 stuck for 22s! [kcm:100]
bad|[    1.000000] NMI watchdog: Watchdog detected hard LOCKUP on cpu 1
EOF
)

n=0
fail=0
echo "1..$(wc -l <<<"$samples")"
while IFS='|' read -r want line; do
	n=$((n + 1))
	printf '%s\r\n' "[    0.000000] Linux version 6.1.0" "$line" \
		"[    2.000000] reboot: Restarting system" >"$tmp/console.log"
	rc=0
	verdict=$("$here/vm.sh" --scan-log "$tmp/console.log") || rc=$?
	if [[ $want == clean && $rc == 0 ]] ||
		[[ $want == bad && $rc == 2 && $verdict == *"$line" ]]; then
		echo "ok $n - $want: $line"
	else
		echo "not ok $n - $want: $line (rc $rc: $verdict)"
		fail=$((fail + 1))
	fi
done <<<"$samples"
((fail == 0))
