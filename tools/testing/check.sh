#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# make check: the tree exported without .git (tools/testing/tree-check.sh),
# the lint gate (for our module, run in that export), the host-side UAPI
# header check, the kernel choice (kver-check.sh), then one VM boot runs
# the whole selftest suite against a module, then (our module only) make
# install, DKMS and a second boot that shows socket(AF_KCM) autoloading the
# installed module; then the TAP is counted.  Ends with "N passed, N
# failed, N skipped".
#
#   check.sh --module KO [--module-kind ours|distro|path] [--kver VER] [--kdir DIR]
#            [--timeout SECS] [--kernel IMG] [--run CMD] [--stage PATH]...
#            [--extra-modules LIST] [--out DIR] [--vm-only] [--kselftest ARGS]
#
# --kdir: the headers the module was built with (default
# /lib/modules/VER/build): the lint gate builds with them too, so that it
# cannot leave a kcm.ko for another kernel behind.  A VER of the Debian 13
# root (tools/testing/kver.sh root VER) is booted from there, and the lint
# gate and DKMS run inside it.
# --kernel, --extra-modules: passed to vm.sh.  --run: the guest command
# (selftests/run_tests.sh).  --stage: also copied into the guest's /kcm.
# --out: where the payload, check.log and vm/ go (.build).  --vm-only: no
# lint gate, no rig pattern test, no kselftest build but with --kselftest
# ARGS (options of kselftest-check.sh: the tree to build it in).  make
# check-debug uses all of them.
#
# "not ok ... # TODO" lines are behaviours where the module under test
# (the distro's kcm.ko) is recorded to differ from ours: counted as passed
# and listed separately.
set -uo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
build=$top/.build
module=
kind=ours
kver=
kdir=
timeout=900
kernel=
run=selftests/run_tests.sh
extra=()
stage=()
vm_only=
kselftest=()

while [ $# -gt 0 ]; do
	case $1 in
	--module) module=$2; shift 2 ;;
	--module-kind) kind=$2; shift 2 ;;
	--kver) kver=$2; shift 2 ;;
	--kdir) kdir=$2; shift 2 ;;
	--timeout) timeout=$2; shift 2 ;;
	--kernel) kernel=$2; shift 2 ;;
	--run) run=$2; shift 2 ;;
	--extra-modules) extra=(--extra-modules "$2"); shift 2 ;;
	--stage) stage+=("$2"); shift 2 ;;
	--out) build=$2; shift 2 ;;
	--vm-only) vm_only=1; shift ;;
	--kselftest) read -r -a kselftest <<<"$2"; shift 2 ;;
	*) echo "usage: $0 --module KO [--module-kind K] [--kver V] [--timeout S] [--kernel IMG]" \
		"[--run CMD] [--stage PATH]... [--extra-modules LIST] [--out DIR] [--vm-only]" \
		"[--kselftest ARGS]" >&2; exit 2 ;;
	esac
done

summary() {
	echo "$1 passed, $2 failed, $3 skipped"
}

# The root that holds VER (empty: this machine; a --kernel of its own
# has none)
kroot=
if [ -n "$kver" ] && [ -z "$kernel" ]; then
	kroot=$("$top/tools/testing/kver.sh" root "$kver" 2>/dev/null)
fi

if [ ! -f "$module" ]; then
	echo "check: no module at '$module'" >&2
	summary 0 1 0
	exit 1
fi

payload=$build/payload
rm -rf "$payload"
mkdir -p "$payload"
if ! make -s -C "$top/selftests" install INSTALL_PATH="$payload/selftests" >/dev/null ||
   ! cp "$top/tools/kcm_demo" "$top/tools/kcmstat" "$payload/" ||
   ! make -s -C "$top/tools/examples" install INSTALL_PATH="$payload/examples" >/dev/null ||
   { [ "${#stage[@]}" != 0 ] && ! cp -a "${stage[@]}" "$payload/"; }; then
	echo "check: could not stage the selftests" >&2
	summary 0 1 0
	exit 1
fi

log=$build/check.log
: >"$log"

# The suite without git (a release tarball, a cp -r copy): the tree's files
# exported without .git; the lint and DKMS's source copy run from there,
# where git finds no repository (GIT_CEILING_DIRECTORIES).
tree=$top
if [ -z "$vm_only" ]; then
	echo "# tree: the suite without git"
	"$top/tools/testing/tree-check.sh" --out "$build/export" | tee -a "$log"
	[ -x "$build/export/tools/lint.sh" ] && tree=$build/export
fi
export GIT_CEILING_DIRECTORIES=$build

# The lint gate is part of the check of our own module.
if [ "$kind" = ours ] && [ -z "${KCM_SKIP_LINT:-}" ] && [ -z "$vm_only" ]; then
	if [ "$tree" = "$top" ]; then
		echo "# lint"
	else
		echo "# lint (in ${tree#"$top"/}, without git)"
	fi
	[ -n "$kdir" ] || kdir=${kver:+/lib/modules/$kver/build}
	"$tree/tools/lint.sh" ${kdir:+--kdir "$kdir"} ${kroot:+--root "$kroot"} | tee -a "$log"
fi

# UAPI hygiene of our header (host side).
if [ -z "$vm_only" ]; then
	echo "# uapi: include/uapi/linux/kcm.h"
	"$top/tools/testing/uapi-check.sh" | tee -a "$log"
fi

# The VM rig's own kernel-log patterns, on sample lines (host side).
if [ -z "$vm_only" ]; then
	echo "# vm rig: kernel log patterns"
	"$top/tools/testing/vm/test-scan.sh" | tee -a "$log"
fi

# The suite as a kselftest target in a kernel tree (our module only; with
# --vm-only when --kselftest names the tree): built there by lib.mk and
# installed with run_kselftest.sh, which the guest runs for kcm_basic
# before the suite.
if [ "$kind" = ours ] && { [ -z "$vm_only" ] || [ "${#kselftest[@]}" != 0 ]; } &&
   [ -z "${KCM_SKIP_KSELFTEST:-}" ]; then
	echo "# kselftest: TARGETS=net/kcm in a kernel tree"
	"$top/tools/testing/kselftest-check.sh" --out "$build/kselftest" "${kselftest[@]}" |
		tee -a "$log"
	if [ -x "$build/kselftest/install/run_kselftest.sh" ]; then
		cp -a "$build/kselftest/install" "$payload/kselftest"
		run="kselftest/run_kselftest.sh -t net/kcm:kcm_basic; $run"
	fi
fi

# The kernel choice (kver.sh, the rig goals) on made-up machines.
if [ -z "$vm_only" ]; then
	echo "# kernel choice: tools/testing/kver.sh and make -n"
	"$top/tools/testing/kver-check.sh" | tee -a "$log"
fi

vm_args=(--module "$module" --payload "$payload" --timeout "$timeout"
	 --run "$run" --env "KCM_MODULE=$kind"
	 --out "$build/vm" "${extra[@]}")
[ -n "$kver" ] && vm_args+=(--kernel-version "$kver")
[ -n "$kernel" ] && vm_args+=(--kernel "$kernel")
[ -n "$kroot" ] && vm_args+=(--root "$kroot")

echo "# kcm check: module $kind ($module)${kver:+, kernel $kver}${kernel:+ ($kernel)}${kroot:+ of $kroot}"
"$top/tools/testing/vm/vm.sh" "${vm_args[@]}" | tee -a "$log"
rc=${PIPESTATUS[0]}

# make install and DKMS, then one more boot: socket(AF_KCM) autoloads the
# DKMS-installed module (our module only; needs root and dkms).
if [ "$kind" = ours ] && [ -z "$vm_only" ] && [ -z "${KCM_SKIP_DKMS:-}" ]; then
	echo "# install: make install, DKMS, autoload in the VM"
	"$top/tools/testing/dkms-check.sh" --kver "${kver:-$(uname -r)}" --out "$build" \
		--src "$tree" --timeout 300 ${kroot:+--root "$kroot"} | tee -a "$log"
	[ "${PIPESTATUS[0]}" = 0 ] || rc=1
fi

# Count TAP results ("ok", "ok # SKIP", "not ok # TODO", "not ok"; a boot
# vm.sh repeated counts once).
read -r pass fail skip todo < <("$top/tools/testing/tap-count.sh" "$log")

if [ "$rc" != 0 ] && [ "$fail" = 0 ]; then
	echo "# the VM run failed (exit $rc) without a failing test line"
	fail=1
fi
if [ $((pass + todo)) = 0 ]; then
	echo "# no test ran"
	fail=$((fail + 1))
fi
if [ "$todo" != 0 ]; then
	echo "# $todo result(s) are recorded differences of the $kind module (TODO lines above), counted as passed"
fi
summary $((pass + todo)) "$fail" "$skip"
[ "$fail" = 0 ]
