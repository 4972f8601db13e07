#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# Unit test of vm.sh's kernel-log scan (no VM needed): each sample line is
# wrapped in a minimal console log (CRLF, as the serial port writes it) and
# judged with 'vm.sh --scan-log'; oops reports judged with 'vm.sh
# --emulator-fault'; and tap-count.sh on logs with repeated boots.  Prints
# TAP; exit 0 when all pass.

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

# The next TAP line: "ok N - $2" when $1 is 0, else "not ok N - $2 ($3)".
result() {
	n=$((n + 1))
	if [[ $1 == 0 ]]; then
		echo "ok $n - $2"
	else
		echo "not ok $n - $2 ($3)"
		fail=$((fail + 1))
	fi
}

echo "1..$(($(wc -l <<<"$samples") + 9))"
while IFS='|' read -r want line; do
	printf '%s\r\n' "[    0.000000] Linux version 6.1.0" "$line" \
		"[    2.000000] reboot: Restarting system" >"$tmp/console.log"
	rc=0
	verdict=$("$here/vm.sh" --scan-log "$tmp/console.log") || rc=$?
	bad=1
	if [[ $want == clean && $rc == 0 ]] ||
		[[ $want == bad && $rc == 2 && $verdict == *"$line" ]]; then
		bad=0
	fi
	result "$bad" "$want: $line" "rc $rc: $verdict"
done <<<"$samples"

# An oops report: "Oops: $1", its RIP, and a "Code:" line with $2 just
# before the byte at RIP.
oops_log() {
	printf '%s\r\n' "[    0.000000] Linux version 6.12.118" \
		"[    3.438699] sched_clock: Marking stable (3376143776, 60284115)" \
		"[    3.441579] Oops: $1 [#1] PREEMPT SMP NOPTI" \
		"[    3.442285] RIP: 0010:sched_clock_cpu+0x9/0x190" \
		"[    3.442591] Code: 90 90 f3 0f 1e fa 41 54 55 53 $2 <90> e8 71 ad f0 ff 48 03" \
		"[    3.442936] Call Trace:" "[    3.445102] Kernel panic - not syncing: Fatal exception"
}

# want (0 emulator fault, 1 not)|oops|byte before RIP|what
while IFS='|' read -r want oops byte what; do
	oops_log "$oops" "$byte" >"$tmp/console.log"
	rc=0
	"$here/vm.sh" --emulator-fault "$tmp/console.log" >/dev/null || rc=$?
	bad=0
	[[ $rc == "$want" ]] || bad=1
	result "$bad" "emulator fault: $what" "exit $rc, want $want"
done <<'EOF2'
0|int3: 0000|66|a stale int3 (the patched byte is back in memory) is the emulator's
1|int3: 0000|cc|an int3 still in memory is a real trap
1|0002|66|any other oops is the kernel's
EOF2

# tap-count.sh: a boot vm.sh repeated counts once.
# want|the log, lines split at ";"
while IFS='|' read -r want what lines; do
	tr ';' '\n' <<<"$lines" >"$tmp/check.log"
	got=$("$here/../tap-count.sh" "$tmp/check.log")
	bad=0
	[[ $got == "$want" ]] || bad=1
	result "$bad" "tap-count: $what" "got '$got', want '$want'"
done <<'EOF2'
2 1 1 1|one boot: pass, fail, skip, todo|ok - a;# vm: boot 1;ok 1 b;not ok 2 c;ok 3 d # SKIP e;not ok 4 f # TODO g
2 0 0 0|a void boot is dropped|ok - a;# vm: boot 1;not ok 1 b;ok 2 c;# vm: boot 2;ok 1 b
3 0 0 0|each run of vm.sh starts afresh|ok - a;# vm: boot 1;ok 1 b;# vm: boot 1;ok 1 c
2 0 0 0|two void boots|# vm: boot 1;not ok 1 b;# vm: boot 2;ok 1 b # SKIP x;# vm: boot 3;ok 1 b;ok 2 c
EOF2
# vm.sh with a stand-in for qemu whose first boot dies of an emulator
# fault: booted again, and the void boot's results are not counted; with
# KCM_VM_REBOOTS=0 the fault is the run's failure.
cat >"$tmp/qemu" <<EOF2
#!/bin/bash
for a; do
	case \$a in
	file,id=con,path=*) con=\${a#*path=} ;;
	file,id=out,path=*) out=\${a#*path=} ;;
	esac
done
boots=\$(cat "$tmp/boots" 2>/dev/null || echo 0)
echo \$((boots + 1)) >"$tmp/boots"
if [ "\$boots" = 0 ]; then
	cp "$tmp/oops.log" "\$con"
	printf 'ok 1 first\\r\\n' >"\$out"
else
	printf 'ok 1 first\\r\\nok 2 second\\r\\nKCM-VM-EXIT=0\\r\\n' >"\$out"
fi
EOF2
chmod +x "$tmp/qemu"
oops_log "int3: 0000" 66 >"$tmp/oops.log"
: >"$tmp/vmlinuz"
for reboots in 2 0; do
	rm -f "$tmp/boots"
	rc=0
	KCM_VM_ACCEL=tcg KCM_VM_QEMU=$tmp/qemu KCM_VM_REBOOTS=$reboots \
		"$here/vm.sh" --no-module --kernel "$tmp/vmlinuz" --kernel-version none \
		--extra-modules '' --out "$tmp/vm" --timeout 30 >"$tmp/vm.out" 2>/dev/null || rc=$?
	got="exit $rc, $(cat "$tmp/boots") boots, counts $("$here/../tap-count.sh" "$tmp/vm.out")"
	if [[ $reboots == 2 ]]; then
		want="exit 0, 2 boots, counts 3 0 0 0"
	else
		want="exit 2, 1 boots, counts 1 1 0 0"
	fi
	bad=0
	[[ $got == "$want" ]] || bad=1
	result "$bad" "vm.sh, KCM_VM_REBOOTS=$reboots, first boot killed by the emulator: $got" \
		"want $want"
	[[ $bad == 0 ]] || sed 's/^/# /' "$tmp/vm.out"
done
((fail == 0))
