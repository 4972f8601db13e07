#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The suite as a kselftest target (host side of make check and make
# check-debug): a kernel tree gets the suite by 'make kselftest-tree',
# builds it with its own lib.mk, installs it with run_kselftest.sh, and
# runs kcm_uapi_compat there.  The installed copy is left in OUT/install
# for the VM, where check.sh runs a program of it against the module.
# TAP lines "ok - ..." / "not ok - ...".
#
#   kselftest-check.sh --out DIR [--line 6.1|6.12] [--ksrc DIR [--kbuild DIR]]
#
# The tree: --ksrc, else the distro's linux-source-LINE (6.1, or on a
# machine without it such as Debian 13 the newest one installed) unpacked
# once into the cache (make check), where make headers and the selftests' own
# Makefile build it in place.  With --kbuild, the configured O= build of
# --ksrc (make check-debug's kernel): the kernel's top-level
# 'make O=DIR kselftest-install TARGETS=net/kcm' does it all.
#
# Environment: KCM_KSRC (as --ksrc), KCM_CACHE.
set -uo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
out=$top/.build/kselftest
line=
ksrc=${KCM_KSRC:-}
kbuild=
while [ $# -gt 0 ]; do
	case $1 in
	--out) out=$2; shift 2 ;;
	--line) line=$2; shift 2 ;;
	--ksrc) ksrc=$2; shift 2 ;;
	--kbuild) kbuild=$2; shift 2 ;;
	*) echo "usage: $0 --out DIR [--line 6.1|6.12] [--ksrc DIR [--kbuild DIR]]" >&2; exit 2 ;;
	esac
done

failed=0
ok() { echo "ok - kselftest: $1"; }
not_ok() { echo "not ok - kselftest: $1"; failed=1; }
# Runs "$@" quietly; its output goes to the log, and its tail on failure.
quiet() {
	"$@" >"$out/step.log" 2>&1 && return 0
	tail -n 20 "$out/step.log" | sed 's/^/# /'
	return 1
}

mkdir -p "$out"
if [ -z "$line" ]; then
	line=6.1
	if [ ! -f /usr/src/linux-source-$line.tar.xz ]; then
		t=$(find /usr/src -maxdepth 1 -name 'linux-source-*.tar.xz' | sort -V | tail -n 1)
		[ -z "$t" ] || { t=${t##*/linux-source-}; line=${t%.tar.xz}; }
	fi
fi
if [ -z "$ksrc" ]; then
	tarball=/usr/src/linux-source-$line.tar.xz
	ksrc=${KCM_CACHE:-${HOME:-/tmp}/.cache/kcm}/kselftest/linux-source-$line
	stamp="$ksrc/.kcm-unpacked $(stat -c '%s %Y' "$tarball" 2>/dev/null)"
	if [ ! -f "$tarball" ]; then
		not_ok "no $tarball: apt-get install linux-source-$line (make deps)"
		exit 1
	fi
	if [ "$(cat "$ksrc/.kcm-unpacked" 2>/dev/null)" != "$stamp" ]; then
		echo "# kselftest: unpacking $tarball (once)"
		rm -rf "$ksrc"
		mkdir -p "$ksrc"
		# What make headers and the selftests need, without the bulk
		if ! tar -C "$ksrc" --strip-components=1 -xJf "$tarball" \
			--exclude='*/drivers' --exclude='*/sound' --exclude='*/Documentation' \
			--exclude='*/fs' --exclude='*/firmware'; then
			not_ok "unpacking $tarball"
			exit 1
		fi
		echo "$stamp" >"$ksrc/.kcm-unpacked"
	fi
fi
sel=$ksrc/tools/testing/selftests

if quiet make -C "$top" --no-print-directory kselftest-tree KSRC="$ksrc"; then
	ok "make kselftest-tree puts the suite in ${ksrc/#$HOME/\~}/tools/testing/selftests/net/kcm"
else
	not_ok "make kselftest-tree KSRC=$ksrc"
	exit 1
fi
# The kernel's own way in a configured tree: headers, build and install
# in one goal, everything under O=.
if [ -n "$kbuild" ]; then
	rm -rf "$out/install"
	if quiet make -C "$ksrc" O="$kbuild" -j"$(nproc)" kselftest-install TARGETS=net/kcm &&
	   grep -q KCM_RECV_BATCH "$kbuild/usr/include/linux/kcm.h" &&
	   cp -a "$kbuild/kselftest/kselftest_install" "$out/install"; then
		ok "make O=... kselftest-install TARGETS=net/kcm in the debug kernel's tree (usr/include/linux/kcm.h ours)"
	else
		not_ok "make O=$kbuild kselftest-install TARGETS=net/kcm"
		exit 1
	fi
else
	# headers_install rewrites the header (comments, annotations): ours is the
	# one with our extensions.
	if quiet make -C "$ksrc" -j"$(nproc)" headers &&
	   grep -q KCM_RECV_BATCH "$ksrc/usr/include/linux/kcm.h"; then
		ok "make headers: usr/include/linux/kcm.h is ours (KCM_RECV_BATCH)"
	else
		not_ok "make headers in $ksrc"
		exit 1
	fi

	# Built in place (the kernel tree's own way, without O=), anew each time.
	rm -rf "$out/install"
	make -C "$sel" TARGETS=net/kcm clean >/dev/null 2>&1
	if quiet make -C "$sel" -j"$(nproc)" TARGETS=net/kcm; then
		ok "make -C tools/testing/selftests TARGETS=net/kcm builds it through lib.mk"
	else
		not_ok "make -C tools/testing/selftests TARGETS=net/kcm"
		exit 1
	fi
	if quiet make -C "$sel" TARGETS=net/kcm INSTALL_PATH="$out/install" install &&
	   [ -x "$out/install/run_kselftest.sh" ]; then
		ok "make install TARGETS=net/kcm gives run_kselftest.sh and kselftest-list.txt"
	else
		not_ok "make -C tools/testing/selftests TARGETS=net/kcm install"
		exit 1
	fi
fi

# One list: the runner's list is the standalone one, renamed.
want=$(make -s -C "$top/selftests" --no-print-directory emit_tests | sed 's@^kcm:@net/kcm:@')
if [ "$(cat "$out/install/kselftest-list.txt")" = "$want" ]; then
	ok "kselftest-list.txt lists the $(echo "$want" | wc -l) programs of the standalone list, in its order"
else
	not_ok "kselftest-list.txt differs from the standalone list"
	diff <(echo "$want") "$out/install/kselftest-list.txt" | sed 's/^/# /'
fi

# A program run by the kernel's runner, here on the host: kcm_uapi_compat
# needs no module.
res=$("$out/install/run_kselftest.sh" -t net/kcm:kcm_uapi_compat 2>&1)
printf '%s\n' "$res" | sed 's/^/# /'
if echo "$res" | grep -qx 'ok 1 selftests: net/kcm: kcm_uapi_compat'; then
	ok "run_kselftest.sh -t net/kcm:kcm_uapi_compat passes (host)"
else
	not_ok "run_kselftest.sh -t net/kcm:kcm_uapi_compat"
fi
exit "$failed"
