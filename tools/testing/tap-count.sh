#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Count the TAP results of a check log: prints "PASS FAIL SKIP TODO".
#
#   tap-count.sh LOG
#
# "ok", "ok ... # SKIP", "not ok ... # TODO" (a recorded difference of the
# distro module), "not ok".  vm.sh starts each boot with "# vm: boot N"; a
# boot it had to repeat (the emulator killed the guest) is void, so the
# results from "# vm: boot 1" on are dropped at "# vm: boot 2" and later.
set -euo pipefail

[ $# = 1 ] || { echo "usage: $0 LOG" >&2; exit 2; }
awk '
	/^# vm: boot 1$/ { sp = pass; sf = fail; ss = skip; st = todo; next }
	/^# vm: boot [0-9]+$/ { pass = sp; fail = sf; skip = ss; todo = st; next }
	/^ok / && / # SKIP/ { skip++; next }
	/^ok / { pass++; next }
	/^not ok / && / # TODO/ { todo++; next }
	/^not ok / { fail++ }
	END { printf "%d %d %d %d\n", pass, fail, skip, todo }' "$1"
