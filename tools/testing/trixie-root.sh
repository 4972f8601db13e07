#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The Debian 13 root: the 7.x kernels of trixie-backports, installed with
# apt as a Debian 13 user installs them, beside the compiler they were
# built with.  Their headers need gcc-14 and linux-kbuild-7.x, whose
# programs need glibc 2.38: Debian 12 has neither, so kcm.ko for them is
# built inside this root, and the rig boots their images from it.
#
#   trixie-root.sh install     make the root with debootstrap, or bring it
#                              up to date; quick when nothing is missing
#   trixie-root.sh path        the root's directory (made or not)
#   trixie-root.sh run CMD...  CMD inside the root (chroot), with this tree
#                              bind-mounted at its own path and CMD run in
#                              the current directory; the mounts live in
#                              a private mount namespace and end with CMD
#
# What must stay true: the root holds exactly one copy of Debian 13 with
# trixie-backports as a source; BOOT kernels have linux-binary,
# linux-modules and linux-headers installed there (the root's
# /boot/vmlinuz-VER, /lib/modules/VER and /lib/modules/VER/build, as on a
# Debian 13 machine), BUILD kernels only their headers.  Nothing in the
# root is modified but through apt, dpkg and dkms inside it.
#
# Needs root (debootstrap, chroot, mount).  Environment: KCM_CACHE
# (~/.cache/kcm; the root is KCM_CACHE/trixie-root), KCM_MIRROR
# (http://deb.debian.org/debian).
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
root=${KCM_CACHE:-${HOME:-/tmp}/.cache/kcm}/trixie-root
mirror=${KCM_MIRROR:-http://deb.debian.org/debian}

# The kernels of trixie-backports the project builds for.  BOOT: booted by
# make check (generic and PREEMPT_RT).  BUILD: only compiled against.
BOOT=(7.3.4+deb13-amd64 7.3.4+deb13-rt-amd64)
BUILD=(7.2.12+deb13-amd64 7.2.12+deb13-rt-amd64)

# What a Debian 13 user installs to build and install the module: the
# headers (gcc-14 comes with them), make, dkms; sparse and python3 for
# the lint's W=1 C=2 build and kernel-doc; linux-source-7.2 for the debug
# kernel (make check-debug DEBUG_LINE=7.2).
pkgs() {
	local v
	echo make kmod dkms sparse python3 linux-source-7.2
	for v in "${BOOT[@]}"; do
		echo "linux-binary-$v linux-modules-$v linux-headers-$v"
	done
	for v in "${BUILD[@]}"; do
		echo "linux-headers-$v"
	done
}

die() {
	echo "trixie-root: $*" >&2
	exit 1
}

# run_in DIR CMD...: CMD in root DIR, this tree and /proc, /sys, /dev
# mounted, in the current directory when the root has it.
run_in() {
	local dir=$1
	shift
	[ "$(id -u)" = 0 ] || die "needs root (chroot, mount)"
	mkdir -p "$dir$top"
	# shellcheck disable=SC2016 # expanded by the inner shell
	unshare --mount --propagation private /bin/sh -c '
		set -e
		dir=$1 top=$2 cwd=$3
		shift 3
		mount --bind "$top" "$dir$top"
		mount -t proc proc "$dir/proc"
		mount -t sysfs sys "$dir/sys"
		mount --rbind /dev "$dir/dev"
		[ -d "$dir$cwd" ] || cwd=/
		exec chroot "$dir" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
			HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive \
			/bin/sh -c "cd \"\$0\" && exec \"\$@\"" "$cwd" "$@"
	' sh "$dir" "$top" "$PWD" "$@"
}

missing() {
	local p
	# shellcheck disable=SC2046 # one package a word
	for p in $(pkgs); do
		dpkg-query --admindir="$root/var/lib/dpkg" -W -f='${Status}\n' "$p" 2>/dev/null |
			grep -q 'install ok installed' || echo "$p"
	done
}

install() {
	local tmp need
	command -v debootstrap >/dev/null ||
		die "debootstrap not found: apt-get install debootstrap (tools/deps.sh installs it)"
	mkdir -p "$(dirname "$root")"
	exec 7>"$root.lock"
	flock 7
	if [ ! -x "$root/usr/bin/apt-get" ]; then
		tmp=$root.tmp
		rm -rf "$tmp" "$root"
		echo "# trixie-root: debootstrap trixie into $root" >&2
		debootstrap --variant=minbase --include=ca-certificates trixie \
			"$tmp" "$mirror" >"$tmp.log" 2>&1 ||
			{ tail -n 20 "$tmp.log" >&2; die "debootstrap failed (log $tmp.log)"; }
		cat >"$tmp/etc/apt/sources.list.d/backports.sources" <<-EOF
		Types: deb
		URIs: $mirror
		Suites: trixie-backports
		Components: main
		Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
		EOF
		# Docs and man pages are of no use here: dpkg leaves them out.
		printf '%s\n' 'path-exclude=/usr/share/doc/*' 'path-exclude=/usr/share/man/*' \
			>"$tmp/etc/dpkg/dpkg.cfg.d/kcm-nodoc"
		mv "$tmp" "$root"
		rm -f "$tmp.log"
	fi
	mapfile -t need < <(missing)
	if [ "${#need[@]}" = 0 ]; then
		echo "# trixie-root: $root is complete" >&2
		return
	fi
	echo "# trixie-root: installing ${need[*]}" >&2
	cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
	run_in "$root" apt-get update -qq
	# shellcheck disable=SC2046 # one package a word
	run_in "$root" apt-get install -y -qq --no-install-recommends $(pkgs) >/dev/null
	run_in "$root" apt-get clean
}

case "${1:-}" in
install) install ;;
path) echo "$root" ;;
run)
	shift
	[ $# -gt 0 ] || die "usage: $0 run CMD..."
	[ -x "$root/usr/bin/apt-get" ] || die "no root at $root: tools/trixie-root.sh install (or: make deps)"
	run_in "$root" "$@"
	;;
*)
	echo "usage: $0 install | path | run CMD..." >&2
	exit 2
	;;
esac
