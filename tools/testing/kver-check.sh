#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The kernel choice of tools/testing/kver.sh and of the Makefile's rig
# goals, on made-up machines (no VM, no root): fake /lib/modules and /boot
# trees through KCM_MODROOT, KCM_BOOT and KCM_UNAME.  The last tests are
# 'make -n run' and 'make -n check' on a machine with no kernel at all, as
# on a fresh machine before 'make deps': they must stop with what to
# install, never call the rig with an empty --kver.  A Debian 13 root
# (KCM_ROOTS) is made-up the same way: its kernels' build links are
# relative, their images in /lib/modules/VER/vmlinuz, as Debian 13's
# packages install them.  Prints TAP.
#
#   kver-check.sh
set -uo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
kver=$top/tools/testing/kver.sh
work=$(mktemp -d)
# The Makefile as a user runs it: nothing of an outer make (make check
# KVER=... runs this) may leak in.
unset KVER KDIR KROOT MAKEFLAGS MFLAGS MAKELEVEL MAKEOVERRIDES
# No root but the made-up ones
export KCM_ROOTS=
trap 'rm -rf "$work"' EXIT
n=0
failed=0

ok() {
	n=$((n + 1))
	echo "ok $n - $1"
}

not_ok() {
	n=$((n + 1))
	failed=$((failed + 1))
	echo "not ok $n - $1"
	shift
	printf '#   %s\n' "$@"
}

# A machine: $1 its name, then VER:ih items (i: image, h: headers).
machine() {
	local root=$work/$1 item v what
	shift
	mkdir -p "$root/modules" "$root/boot"
	for item in "$@"; do
		v=${item%%:*}
		what=${item#*:}
		mkdir -p "$root/modules/$v"
		case $what in *h*)
			mkdir -p "$root/modules/$v/build"
			: >"$root/modules/$v/build/Makefile" ;;
		esac
		case $what in *i*) : >"$root/boot/vmlinuz-$v" ;; esac
	done
}

# A Debian 13 root: $1 its name, then VER:ih items.
debroot() {
	local root=$work/$1 item v what
	shift
	mkdir -p "$root/usr/lib/modules" "$root/usr/src"
	ln -s usr/lib "$root/lib"
	for item in "$@"; do
		v=${item%%:*}
		what=${item#*:}
		mkdir -p "$root/lib/modules/$v"
		case $what in *h*)
			mkdir -p "$root/usr/src/linux-headers-$v"
			: >"$root/usr/src/linux-headers-$v/Makefile"
			ln -s "../../../src/linux-headers-$v" "$root/lib/modules/$v/build" ;;
		esac
		case $what in *i*) : >"$root/lib/modules/$v/vmlinuz" ;; esac
	done
}

# expect NAME MACHINE RUNNING WANT MODE [KVER]: WANT is a version, or
# "fail:TEXT" for an exit 1 whose message holds TEXT.  $roots: the
# made-up roots this machine has.
roots=
expect() {
	local name=$1 root=$work/$2 running=$3 want=$4 got err rc
	shift 4
	got=$(KCM_MODROOT=$root/modules KCM_BOOT=$root/boot KCM_UNAME=$running \
	      KCM_ROOTS=$roots "$kver" "$@" 2>"$work/err")
	rc=$?
	err=$(cat "$work/err")
	case $want in
	fail:*)
		if [ $rc = 1 ] && [ -z "$got" ] && [[ $err == *"${want#fail:}"* ]]; then
			ok "$name"
		else
			not_ok "$name" "exit $rc, stdout '$got', stderr '$err'" \
				"want exit 1 and '${want#fail:}'"
		fi ;;
	*)
		if [ $rc = 0 ] && [ "$got" = "$want" ] && [[ $err == "kcm: kernel $want ("* ]]; then
			ok "$name"
		else
			not_ok "$name" "exit $rc, stdout '$got', stderr '$err'" "want $want"
		fi ;;
	esac
}

machine both 6.1.0-9-amd64:ih 6.1.0-57-amd64:ih 6.12.118+deb12-amd64:ih \
	6.12.118+deb12-rt-amd64:ih
machine hdrs 6.1.0-57-amd64:h 6.12.118+deb12-amd64:h
machine imgs 6.1.0-57-amd64:i 6.12.118+deb12-rt-amd64:ih
machine two 6.1.0-57-amd64:ih 6.1.0-9-amd64:ih
machine none
machine stale 6.1.0-57-amd64:
debroot deb13 7.3.4+deb13-amd64:ih 7.3.4+deb13-rt-amd64:ih 7.2.12+deb13-amd64:h

echo "TAP version 13"
echo "1..24"

# A build: the running kernel's headers first, then the newest.
expect "build: the running kernel's headers" both 6.1.0-57-amd64 6.1.0-57-amd64 build
expect "build: running kernel has no headers, the newest (version order)" \
	hdrs 6.1.0-9-amd64 6.12.118+deb12-amd64 build
expect "build: the generic flavour before -rt at one version" \
	both 5.10.0-1-amd64 6.12.118+deb12-amd64 build
expect "build: KVER given" both 6.1.0-57-amd64 6.12.118+deb12-rt-amd64 build \
	6.12.118+deb12-rt-amd64
expect "build: KVER without headers fails with the package" hdrs 6.1.0-57-amd64 \
	"fail:apt-get install linux-headers-6.1.0-99-amd64" build 6.1.0-99-amd64
expect "build: no headers at all names the package" none 6.1.0-57-amd64 \
	"fail:apt-get install linux-headers-amd64" build
expect "build: a modules dir without build/ is no headers" stale 6.1.0-57-amd64 \
	"fail:apt-get install linux-headers-amd64" build

# The rig: a kernel with image and headers.
expect "rig: the running kernel when it has both" both 6.1.0-57-amd64 6.1.0-57-amd64 rig
expect "rig: 6.1.0-57 is newer than 6.1.0-9" two 5.10.0-1-amd64 6.1.0-57-amd64 rig
expect "rig: running kernel without image, the newest with both" imgs \
	6.1.0-57-amd64 6.12.118+deb12-rt-amd64 rig
expect "rig: headers without images is no rig kernel" hdrs 6.1.0-57-amd64 \
	"fail:apt-get install linux-image-amd64 linux-headers-amd64" rig
expect "rig: KVER without image fails" imgs 6.1.0-57-amd64 \
	"fail:linux-image-6.1.0-57-amd64 and linux-headers-6.1.0-57-amd64" rig 6.1.0-57-amd64
expect "rig: KVER -rt given" both 6.1.0-57-amd64 6.12.118+deb12-rt-amd64 rig \
	6.12.118+deb12-rt-amd64

# A Debian 13 root beside the machine: its kernels when named, or when
# the machine has none; the machine's own first.
roots=$work/deb13
expect "root: the machine's kernel before a root's newer one" both 6.1.0-57-amd64 \
	6.1.0-57-amd64 rig
expect "root: a root's kernel when named (relative build link, image in /lib/modules)" \
	both 6.1.0-57-amd64 7.3.4+deb13-rt-amd64 rig 7.3.4+deb13-rt-amd64
expect "root: the machine has no kernel, the root's newest generic" none 6.1.0-57-amd64 \
	7.3.4+deb13-amd64 rig
expect "root: headers only are a build kernel, not a rig kernel" none 6.1.0-57-amd64 \
	"fail:linux-image-7.2.12+deb13-amd64" rig 7.2.12+deb13-amd64
expect "root: a build for a root's headers" none 6.1.0-57-amd64 7.2.12+deb13-amd64 build \
	7.2.12+deb13-amd64
got=$(KCM_MODROOT=$work/both/modules KCM_ROOTS=$roots "$kver" root 7.3.4+deb13-amd64)/$(
	KCM_MODROOT=$work/both/modules KCM_ROOTS=$roots "$kver" root 6.1.0-57-amd64)
if [ "$got" = "$roots/" ]; then
	ok "root VER: the root of a root's kernel, nothing for the machine's"
else
	not_ok "root VER: the root of a root's kernel, nothing for the machine's" "got '$got'"
fi
got=$(KCM_MODROOT=$work/none/modules KCM_BOOT=$work/none/boot KCM_ROOTS=$roots "$kver" list | cut -f 1,2,3)
want=$(printf '7.2.12+deb13-amd64\timage=no\theaders=yes\n7.3.4+deb13-rt-amd64\timage=yes\theaders=yes\n7.3.4+deb13-amd64\timage=yes\theaders=yes')
if [ "$got" = "$want" ]; then
	ok "list: a root's kernels, image and headers"
else
	not_ok "list: a root's kernels, image and headers" "got: $got"
fi
roots=

# list
got=$(KCM_MODROOT=$work/imgs/modules KCM_BOOT=$work/imgs/boot "$kver" list)
want=$(printf '6.1.0-57-amd64\timage=yes\theaders=no\n6.12.118+deb12-rt-amd64\timage=yes\theaders=yes')
if [ "$got" = "$want" ]; then
	ok "list: every kernel, image and headers"
else
	not_ok "list: every kernel, image and headers" "got: $got"
fi

# The Makefile on a machine with no kernel: make -n runs only the '+'
# recipe that chooses the kernel (deps-check is printed, not run); the
# rig itself (run-demo.sh, check.sh) must not be reached.
dry_run() {
	local goal=$1 out
	out=$(cd "$top" && KCM_MODROOT=$work/none/modules KCM_BOOT=$work/none/boot \
	      make -n --no-print-directory "$goal" 2>&1)
	if [[ $out == *"no kernel with both image and headers installed"* ]] &&
	   [[ $out == *"0 passed, 1 failed"* ]] && [[ $out != *"--kver ''"* ]] &&
	   [[ $out != *"--kver  "* ]] && [[ $out != *"run-demo.sh"* ]] && [[ $out != *"check.sh --kver"* ]]; then
		ok "make -n $goal, no kernel installed: says what to install, no empty --kver"
	else
		not_ok "make -n $goal, no kernel installed: says what to install, no empty --kver" \
			"${out//$'\n'/ | }"
	fi
}
dry_run run
dry_run check

# And the plain build's choice, made when the Makefile is read.  make -n
# still runs the \$(MAKE) lines: MAKE=: keeps the real kbuild of the chosen
# headers (they are installed here) off this tree, whose kcm.ko it would
# remove.
out=$(cd "$top" && KCM_MODROOT=$work/hdrs/modules KCM_BOOT=$work/hdrs/boot \
      KCM_UNAME=6.1.0-9-amd64 make -n --no-print-directory MAKE=: modules 2>&1)
if [[ $out == *"kcm: kernel 6.12.118+deb12-amd64 (newest installed headers"* ]] &&
   [[ $out == *"/lib/modules/6.12.118+deb12-amd64/build"* ]]; then
	ok "make -n modules: the newest headers, the choice printed"
else
	not_ok "make -n modules: the newest headers, the choice printed" "${out//$'\n'/ | }"
fi

[ "$failed" = 0 ]
