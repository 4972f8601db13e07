#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Which kernel to build against and, for the rig, to boot.
#
#   kver.sh build [KVER]   the kernel to build kcm.ko for: KVER if given,
#                          else the running kernel when its headers are
#                          installed, else the newest installed headers
#   kver.sh rig [KVER]     the kernel the VM boots: KVER if given, else
#                          the running kernel when its image and headers
#                          are both installed, else the newest kernel that
#                          has both (at one version the generic flavour
#                          before -rt)
#   kver.sh list           every installed kernel: version, image?, headers?
#
#   kver.sh root VER       the root directory that holds VER: nothing for
#                          the machine itself, else a root of
#                          tools/testing/trixie-root.sh, where kcm.ko
#                          for VER is built (chroot) and VER is booted from
#
# Kernels come from the machine first, then from the roots: the machine's
# own kernels are chosen when nothing is given; a root's kernel when it is
# named (KVER=7.3.4+deb13-amd64) or the machine has none.
#
# Prints the version on stdout and why it was chosen on stderr; exits 1
# with what to install when nothing fits.  KCM_MODROOT (/lib/modules),
# KCM_BOOT (/boot), KCM_UNAME (uname -r) and KCM_ROOTS (the roots, by
# default the trixie root when it was made) stand in for the machine in
# the rig's own test of this logic.
set -euo pipefail

modroot=${KCM_MODROOT:-/lib/modules}
boot=${KCM_BOOT:-/boot}
running=${KCM_UNAME:-$(uname -r)}
if [ -z "${KCM_ROOTS+set}" ]; then
	KCM_ROOTS=$("$(dirname "${BASH_SOURCE[0]}")/trixie-root.sh" path)
fi
read -r -a roots <<<"$KCM_ROOTS"

# The root that holds version $1 ("" for the machine); 1 if none does.
root_of() {
	local r
	if [ -d "$modroot/$1" ]; then
		echo ""
		return
	fi
	for r in "${roots[@]}"; do
		[ -d "$r/lib/modules/$1" ] && { echo "$r"; return; }
	done
	return 1
}

# The headers' Makefile of $1, seen from here: a root's build link is
# absolute inside that root.
has_headers() {
	local r link
	r=$(root_of "$1") || return 1
	if [ -z "$r" ]; then
		[ -f "$modroot/$1/build/Makefile" ]
		return
	fi
	link=$(readlink "$r/lib/modules/$1/build") || return 1
	case $link in
	/*) [ -f "$r$link/Makefile" ] ;;
	*) [ -f "$r/lib/modules/$1/build/Makefile" ] ;;
	esac
}

# /boot/vmlinuz-VER, or /lib/modules/VER/vmlinuz: where Debian 13's
# linux-binary package puts it (the image without its boot-loader hooks).
has_image() {
	local r
	r=$(root_of "$1") || return 1
	if [ -z "$r" ]; then
		[ -f "$boot/vmlinuz-$1" ] || [ -f "$modroot/$1/vmlinuz" ]
	else
		[ -f "$r/boot/vmlinuz-$1" ] || [ -f "$r/lib/modules/$1/vmlinuz" ]
	fi
}

# Installed versions of the machine ($1 = "") or of the roots ($1 =
# roots), newest last; at one version "-rt-" sorts first so that the
# generic flavour comes last.
versions() {
	local dir d dirs=("$modroot")
	[ "${1:-}" = roots ] && dirs=("${roots[@]/%//lib/modules}")
	for dir in "${dirs[@]}"; do
		[ -n "$dir" ] || continue
		for d in "$dir"/*/; do
			[ -d "$d" ] || continue
			d=${d%/}
			echo "${d##*/}"
		done
	done | awk '{ k = $0; sub(/-rt-/, "-", k); print k "\t" ($0 ~ /-rt-/ ? 0 : 1) "\t" $0 }' |
		sort -t "$(printf '\t')" -k1,1V -k2,2n | cut -f3
}

# newest [roots] TEST: the newest version of the machine (or of the
# roots) that passes TEST.
newest() {
	local v best='' where=''
	if [ "$1" = roots ]; then
		where=roots
		shift
	fi
	for v in $(versions $where); do
		"$@" "$v" && best=$v
	done
	[ -n "$best" ] && echo "$best"
}

both() {
	has_headers "$1" && has_image "$1"
}

# A kernel of Debian 13 lives in the root that tools/deps.sh makes.
deb13_hint() {
	case $1 in
	*+deb13*) echo " (in the Debian 13 root: make deps, or tools/testing/trixie-root.sh install)" ;;
	esac
}

say() {
	echo "kcm: kernel $1 ($2)" >&2
	echo "$1"
}

pick_build() {
	local v
	if [ -n "${1:-}" ]; then
		has_headers "$1" || {
			echo "kcm: no headers for $1: apt-get install linux-headers-$1$(deb13_hint "$1")" >&2
			return 1
		}
		say "$1" "KVER given"
		return
	fi
	if has_headers "$running"; then
		say "$running" "the running kernel"
		return
	fi
	if v=$(newest has_headers); then
		say "$v" "newest installed headers; the running $running has none"
		return
	fi
	if v=$(newest roots has_headers); then
		say "$v" "newest headers of ${roots[*]}; the machine has none"
		return
	fi
	echo "kcm: no kernel headers under $modroot/*/build: apt-get install linux-headers-amd64 (or: make deps)" >&2
	return 1
}

pick_rig() {
	local v
	if [ -n "${1:-}" ]; then
		both "$1" || {
			echo "kcm: the rig needs both linux-image-$1 and linux-headers-$1 installed$(deb13_hint "$1")" >&2
			return 1
		}
		say "$1" "KVER given"
		return
	fi
	if both "$running"; then
		say "$running" "the running kernel"
		return
	fi
	if v=$(newest both); then
		say "$v" "newest with image and headers; override with KVER=..."
		return
	fi
	if v=$(newest roots both); then
		say "$v" "newest with image and headers in ${roots[*]}; the machine has none"
		return
	fi
	echo "kcm: no kernel with both image and headers installed: apt-get install linux-image-amd64 linux-headers-amd64 (or: make deps)" >&2
	return 1
}

case "${1:-}" in
build) pick_build "${2:-}" ;;
rig) pick_rig "${2:-}" ;;
root)
	[ -n "${2:-}" ] || { echo "usage: $0 root VER" >&2; exit 2; }
	root_of "$2" || { echo "kcm: no kernel $2 installed" >&2; exit 1; }
	;;
list)
	for v in $(versions) $(versions roots); do
		printf '%s\timage=%s\theaders=%s%s\n' "$v" \
			"$(has_image "$v" && echo yes || echo no)" \
			"$(has_headers "$v" && echo yes || echo no)" \
			"$(r=$(root_of "$v") && [ -n "$r" ] && printf '\troot=%s' "$r")"
	done
	;;
*)
	echo "usage: $0 build|rig [KVER] | root VER | list" >&2
	exit 2
	;;
esac
