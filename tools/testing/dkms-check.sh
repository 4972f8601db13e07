#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# The install paths of make check, as TAP:
#
# 1. make install into a scratch INSTALL_MOD_PATH/DESTDIR: kcm.ko lands in
#    lib/modules/KVER/updates/, depmod resolves kcm and net-pf-41 to it,
#    kcmstat and the man page land under PREFIX.
# 2. DKMS on this machine: the module's sources (tools/tree-files.sh of
#    the --src tree, default this one; make check passes the export of
#    tools/testing/tree-check.sh, which has no .git but the build products
#    of the lint) are copied to /usr/src/kcm-VER without any build
#    product, then dkms add, build and install -k KVER; modinfo must then
#    name the DKMS module, not the kernel's.
# 3. One VM boot with that installed module tree (the real modules.dep and
#    modules.alias that DKMS's depmod wrote, the DKMS kcm.ko in updates/
#    and the kernel's own kcm.ko in kernel/) and no insmod: socket(AF_KCM)
#    must autoload ours (tools/testing/vm/autoload-guest.sh).
# 4. dkms remove: the kernel's module is the one modprobe finds again.
#
# With --root ROOT (a kernel of the Debian 13 root, tools/testing/
# trixie-root.sh), steps 2 to 4 are what a Debian 13 user does: the
# sources go to ROOT's /usr/src, dkms and depmod run inside ROOT, and the
# VM boots ROOT's image with ROOT's module tree.  Step 2 also asks DKMS
# for a kernel outside BUILD_EXCLUSIVE_KERNEL, which it must refuse.
#
# Needs root and dkms (tools/deps.sh installs it).  Leaves nothing behind:
# the DKMS module is removed on exit, also after a failure, so that runs
# can be repeated.
#
#   dkms-check.sh --kver VER [--out DIR] [--src TREE] [--timeout SECS] [--root ROOT]
set -uo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
kver=
out=$top/.build
srctree=$top
timeout=300
kroot=
usage="usage: $0 --kver VER [--out DIR] [--src TREE] [--timeout SECS] [--root ROOT]"
while [ $# -gt 0 ]; do
	case $1 in
	--kver) kver=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--timeout) timeout=$2; shift 2 ;;
	--src) srctree=$(cd "$2" && pwd) || exit 2; shift 2 ;;
	--root) kroot=$2; shift 2 ;;
	*) echo "$usage" >&2; exit 2 ;;
	esac
done
[ -n "$kver" ] || { echo "$usage" >&2; exit 2; }
export PATH=$PATH:/sbin:/usr/sbin

# dkms as the machine that has the kernel runs it: here, or in the root.
dkms() {
	if [ -n "$kroot" ]; then
		"$top/tools/testing/trixie-root.sh" run dkms "$@"
	else
		command dkms "$@"
	fi
}
# modinfo of the kernel's module tree (paths as seen from here)
kmodinfo() {
	modinfo ${kroot:+-b "$kroot"} -k "$kver" "$@"
}

failed=0
work=$out/dkms
log=$work/dkms.log	# everything
slog=$work/step.log	# the current step
mkdir -p "$work"
: >"$log"
: >"$slog"

result() {
	# $1: 0 = pass; $2: description; the step's output is in $slog
	if [ "$1" = 0 ]; then
		echo "ok - $2"
	else
		echo "not ok - $2"
		tail -n 15 "$slog" | sed 's/^/#   /'
		failed=$((failed + 1))
	fi
	cat "$slog" >>"$log"
	: >"$slog"
}

ver=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"$/\1/p' "$top/dkms.conf")
modver=$(modinfo -F version "$top/kcm.ko" 2>>"$slog")
[ -n "$ver" ] && [ "$ver" = "$modver" ]
result $? "dkms: dkms.conf PACKAGE_VERSION '$ver' is the module's MODULE_VERSION '$modver'"

# The kernels dkms.conf declares (BUILD_EXCLUSIVE_KERNEL, a regular
# expression DKMS matches with bash's =~): this one, the supported lines,
# not the ones kcm_compat.h does not cover.
range=$(sed -n 's/^BUILD_EXCLUSIVE_KERNEL="\(.*\)"$/\1/p' "$top/dkms.conf")
r=0
for v in "$kver" 6.1.0-9-amd64 6.1.0-57-amd64 6.6.30 6.10.2-arch1 6.12.118+deb12-amd64 \
	 6.12.118+deb12-rt-amd64 6.18.15+deb13-amd64 7.0.13+deb13-amd64 \
	 7.2.12+deb13-rt-amd64 7.3.4+deb13-amd64 7.3.4+deb13-rt-amd64; do
	[[ $v =~ $range ]] || { echo "# $v is outside '$range'" >>"$slog"; r=1; }
done
for v in 5.10.0-30-amd64 5.15.0-1-generic 6.0.12 7.4.0 7.10.1 8.0.1 16.1.0 17.3.4; do
	[[ $v =~ $range ]] && { echo "# $v is inside '$range'" >>"$slog"; r=1; }
done
[ -n "$range" ]
result $((r | $?)) "dkms: BUILD_EXCLUSIVE_KERNEL '$range' takes $kver and 6.1 to 7.3, not 5.x, 6.0, 7.4+"

# ---- 1. make install
inst=$work/install
rm -rf "$inst"
make -s -C "$top" install KVER="$kver" INSTALL_MOD_PATH="$inst/root" \
	DESTDIR="$inst/dest" PREFIX=/usr >>"$slog" 2>&1 &&
	[ -f "$inst/root/lib/modules/$kver/updates/kcm.ko" ] &&
	[ "$(modinfo -b "$inst/root" -k "$kver" -n net-pf-41 2>>"$slog")" = \
	  "$inst/root/lib/modules/$kver/updates/kcm.ko" ] &&
	[ -x "$inst/dest/usr/bin/kcmstat" ] &&
	[ -f "$inst/dest/usr/share/man/man7/kcm.7" ]
result $? "install: make install puts kcm.ko in updates/ (net-pf-41 resolves to it), kcmstat and kcm.7 under PREFIX"

# ---- 2. DKMS
if ! { [ -n "$kroot" ] && [ -x "$kroot/usr/sbin/dkms" ]; } && ! command -v dkms >/dev/null; then
	echo "not ok - dkms: dkms not installed (apt-get install dkms, or make deps)"
	exit 1
fi
if [ "$(id -u)" != 0 ]; then
	echo "not ok - dkms: needs root (dkms install writes /lib/modules)"
	exit 1
fi

src=$kroot/usr/src/kcm-$ver
cleanup() {
	dkms remove -m kcm -v "$ver" --all >>"$log" 2>&1
	rm -rf "$src"
}
trap cleanup EXIT
cleanup

# The module's sources as they are in the tree --src names (the tree's
# files: git's list in a checkout, or without git every file but the
# build products), never its *.o, *.ko or .build/.
products() {
	find "$1" \( -name '*.o' -o -name '*.ko' -o -name '*.cmd' -o -name '*.mod' \
		-o -name '*.mod.c' -o -name Module.symvers -o -name modules.order \
		-o -name .build -o -name .git \) -print
}
mkdir -p "$src" &&
	(cd "$srctree" && tools/tree-files.sh -z . ':!selftests' ':!tools' ':!.ci' |
		xargs -0 -r cp -p --parents -t "$src") 2>>"$slog" &&
	[ -f "$src/dkms.conf" ] && [ -f "$src/Kbuild" ] && [ -f "$src/kcmsock.c" ] &&
	[ -f "$src/include/uapi/linux/kcm.h" ] && [ ! -e "$src/tools" ] &&
	[ -z "$(products "$src" | tee -a "$slog")" ]
result $? "dkms: sources of ${srctree#"$top"/} copied to $src, without build products ($(products "$srctree" | wc -l) there)"
dkms add -m kcm -v "$ver" >>"$slog" 2>&1
result $? "dkms: dkms add kcm/$ver"
dkms build -m kcm -v "$ver" -k "$kver" >>"$slog" 2>&1
result $? "dkms: dkms build kcm/$ver -k $kver"
dkms install -m kcm -v "$ver" -k "$kver" >>"$slog" 2>&1
result $? "dkms: dkms install kcm/$ver -k $kver"

# A kernel outside the range: DKMS says so and builds nothing (dkms 3
# exits 77 there; a compile error would be another status).
outside=7.99.0-1-amd64
dkms build -m kcm -v "$ver" -k "$outside" >>"$slog" 2>&1
r=$?
[ "$r" != 0 ] && grep -q BUILD_EXCLUSIVE "$slog" &&
	! compgen -G "$kroot/var/lib/dkms/kcm/$ver/$outside/*/module/kcm.ko*" >/dev/null
result $? "dkms: dkms build -k $outside is refused by BUILD_EXCLUSIVE_KERNEL (exit $r), not compiled"

mods=$kroot/lib/modules/$kver
gmods=/lib/modules/$kver
ko=$(kmodinfo -n net-pf-41 2>>"$slog")
case $ko in
"$mods"/updates/*) r=0 ;;
*) r=1 ;;
esac
echo "# net-pf-41 -> $ko" >>"$slog"
result $r "dkms: modinfo -k $kver net-pf-41 names the DKMS module (${ko#"$mods"/})"

# ---- 3. the VM: the installed tree, no insmod
if [ "$r" = 0 ]; then
	overlay=$work/overlay
	payload=$work/payload
	rm -rf "$overlay" "$payload"
	mkdir -p "$overlay$gmods" "$payload"
	for f in modules.dep modules.alias modules.softdep modules.symbols \
		 modules.builtin modules.order; do
		[ -f "$mods/$f" ] && cp "$mods/$f" "$overlay$gmods/"
	done
	distro=$(find "$mods/kernel/net/kcm" -name 'kcm.ko*' | head -n 1)
	for f in "$ko" $distro; do
		g=$gmods/${f#"$mods"/}
		mkdir -p "$overlay$(dirname "$g")"
		cp "$f" "$overlay$g"
	done
	cp "$top/selftests/kcm_helper" "$top/tools/testing/vm/autoload-guest.sh" "$payload/"
	srcv=$(modinfo -F srcversion "$ko")
	"$top/tools/testing/vm/vm.sh" --no-module --kernel-version "$kver" \
		--extra-modules '' --overlay "$overlay" --payload "$payload" \
		--env "KCM_WANT_VERSION=$ver KCM_WANT_SRCVERSION=$srcv" \
		--run 'sh autoload-guest.sh' --out "$work/vm" --timeout "$timeout" \
		${kroot:+--root "$kroot"}
	vm_rc=$?
	[ "$vm_rc" = 0 ] || failed=$((failed + 1))
fi

# ---- 4. dkms remove
cleanup
ko=$(kmodinfo -n net-pf-41 2>>"$slog")
case $ko in
"$mods"/updates/*) r=1 ;;
*) r=0 ;;
esac
[ ! -e "$src" ]
result $((r | $?)) "dkms: after dkms remove net-pf-41 is the kernel's own again (${ko#"$mods"/})"

[ "$failed" = 0 ]
