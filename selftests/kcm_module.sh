#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Module life cycle: unload refused while a KCM socket is open, allowed
# once all are closed (also with another network namespace alive), and
# the family is gone after unload and back after reload.
#
# Needs root and the module loaded; KCM_MODULE_PATH names the .ko to
# reload.

set -u
cd "$(dirname "$0")" || exit 1
n=0
failed=0
helper_pid=

ok() {
	n=$((n + 1))
	echo "ok $n $1"
}

not_ok() {
	n=$((n + 1))
	failed=$((failed + 1))
	echo "not ok $n $1"
}

check() {
	name=$1
	shift
	if "$@"; then ok "$name"; else not_ok "$name"; fi
}

loaded() {
	grep -q '^kcm ' /proc/modules
}

not_loaded() {
	! loaded
}

# rmmod once the last socket is really gone: a closed socket may still be
# freed after an RCU grace period or from a work item (the distro module
# on 6.1 was seen busy right after close), so EAGAIN is retried for 5 s.
rmmod_when_free() {
	for i in $(seq 50); do
		rmmod kcm 2>/dev/null && return 0
		[ "$i" = 50 ] || sleep 0.1
	done
	rmmod kcm
}

# Starts "kcm_helper $1" in the background and waits for its "ready".
start_helper() {
	fifo=$(mktemp -u)
	mkfifo "$fifo"
	./kcm_helper "$1" >"$fifo" &
	helper_pid=$!
	read -r line <"$fifo"
	rm -f "$fifo"
	[ "$line" = ready ]
}

stop_helper() {
	kill "$helper_pid" 2>/dev/null
	wait "$helper_pid" 2>/dev/null
	helper_pid=
}

cleanup() {
	[ -n "$helper_pid" ] && stop_helper
	loaded || insmod "$KCM_MODULE_PATH" 2>/dev/null
}
trap cleanup EXIT

if [ "$(id -u)" != 0 ] || [ -z "${KCM_MODULE_PATH:-}" ]; then
	echo "1..0 # SKIP needs root and KCM_MODULE_PATH"
	exit 4
fi

echo "TAP version 13"
echo "1..10"

check module_loaded loaded

check hold_sockets start_helper hold
if rmmod kcm 2>/dev/null; then
	not_ok unload_refused_while_open
	insmod "$KCM_MODULE_PATH"
else
	ok unload_refused_while_open
fi
check still_loaded loaded
stop_helper

check netns_alive start_helper netns-hold
check unload_after_close rmmod_when_free
check gone_from_modules not_loaded
check proc_file_gone test ! -e /proc/net/kcm
stop_helper

# No module: socket(AF_KCM) fails (the autoload finds nothing here).
if out=$(./kcm_helper probe) || [ "$out" != "errno 97 (Address family not supported by protocol)" ]; then
	echo "# probe said: $out"
	not_ok family_gone_after_unload
else
	ok family_gone_after_unload
fi

# Reload must leave a usable family (the rest of the suite runs after us).
if insmod "$KCM_MODULE_PATH" && ./kcm_helper probe; then
	ok reload_works
else
	not_ok reload_works
fi
echo "# Totals: pass:$((n - failed)) fail:$failed"
[ "$failed" = 0 ]
