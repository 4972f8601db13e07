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
# Prints the version on stdout and why it was chosen on stderr; exits 1
# with what to install when nothing fits.  KCM_MODROOT (/lib/modules),
# KCM_BOOT (/boot) and KCM_UNAME (uname -r) stand in for the machine in
# the rig's own test of this logic.
set -euo pipefail

modroot=${KCM_MODROOT:-/lib/modules}
boot=${KCM_BOOT:-/boot}
running=${KCM_UNAME:-$(uname -r)}

has_headers() {
	[ -f "$modroot/$1/build/Makefile" ]
}

has_image() {
	[ -f "$boot/vmlinuz-$1" ]
}

# Installed versions, newest last; at one version "-rt-" sorts first so
# that the generic flavour comes last.
versions() {
	local d
	for d in "$modroot"/*/; do
		[ -d "$d" ] || continue
		d=${d%/}
		echo "${d##*/}"
	done | awk '{ k = $0; sub(/-rt-/, "-", k); print k "\t" ($0 ~ /-rt-/ ? 0 : 1) "\t" $0 }' |
		sort -t "$(printf '\t')" -k1,1V -k2,2n | cut -f3
}

newest() {
	local v best=
	for v in $(versions); do
		"$@" "$v" && best=$v
	done
	[ -n "$best" ] && echo "$best"
}

both() {
	has_headers "$1" && has_image "$1"
}

say() {
	echo "kcm: kernel $1 ($2)" >&2
	echo "$1"
}

pick_build() {
	local v
	if [ -n "${1:-}" ]; then
		has_headers "$1" || {
			echo "kcm: no headers for $1: apt-get install linux-headers-$1" >&2
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
	echo "kcm: no kernel headers under $modroot/*/build: apt-get install linux-headers-amd64 (or: make deps)" >&2
	return 1
}

pick_rig() {
	local v
	if [ -n "${1:-}" ]; then
		both "$1" || {
			echo "kcm: the rig needs both linux-image-$1 and linux-headers-$1 installed" >&2
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
	echo "kcm: no kernel with both image and headers installed: apt-get install linux-image-amd64 linux-headers-amd64 (or: make deps)" >&2
	return 1
}

case "${1:-}" in
build) pick_build "${2:-}" ;;
rig) pick_rig "${2:-}" ;;
list)
	for v in $(versions); do
		printf '%s\timage=%s\theaders=%s\n' "$v" \
			"$(has_image "$v" && echo yes || echo no)" \
			"$(has_headers "$v" && echo yes || echo no)"
	done
	;;
*)
	echo "usage: $0 build|rig [KVER] | list" >&2
	exit 2
	;;
esac
