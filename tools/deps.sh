#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# deps.sh install   apt-get install everything the build, the VM tests and
#                   the lint need, and make (or complete) the Debian 13
#                   root of the 7.x kernels (tools/testing/trixie-root.sh);
#                   quick when everything is there
# deps.sh ensure    install what is missing when we can (root with
#                   apt-get); otherwise say exactly what to install
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

PKGS=(
	build-essential libc6-dev linux-libc-dev bc kmod cpio gzip xz-utils
	linux-headers-amd64 linux-image-amd64
	qemu-system-x86 busybox-static
	# ip and tc in the VM: the selftests' namespaces, veth and netem
	iproute2
	# the kernel's kselftest install (lib.mk copies with rsync)
	rsync
	sparse shellcheck linux-source-6.1 perl python3
	# the debug kernel (make check-debug): pahole (dwarves) makes its BTF
	flex bison libelf-dev libssl-dev dwarves util-linux
	# make install and its test in make check; the man page lint
	dkms man-db groff-base
	# the documentation lint
	python3-docutils
	# the Debian 13 root of the 7.x kernels
	debootstrap
	# the 32-bit selftests of the compat path (gcc -m32, static)
	gcc-multilib
	# tools/examples: a BPF parser in C (clang) loaded with libbpf, static
	clang libbpf-dev libelf-dev zlib1g-dev
	# io_uring: the kcm_uring selftest, uring_server, kcmperf -U (static)
	liburing-dev
)

# The other kernels the tree is tested on (make check KVER=..., the 6.12
# debug kernel): 'deps.sh install' (CI, make deps) adds them.
KERNEL_PKGS=(
	linux-image-6.12-amd64 linux-headers-6.12-amd64
	linux-image-6.12-rt-amd64 linux-headers-6.12-rt-amd64
	linux-source-6.12
)

# Debian 13 has 6.12 as its kernel and linux-source-6.12, no 6.1; its
# PREEMPT_RT kernel is linux-image-rt-amd64.
if [ -r /etc/os-release ] && grep -qx 'VERSION_CODENAME=trixie' /etc/os-release; then
	PKGS=("${PKGS[@]/linux-source-6.1/linux-source-6.12}")
	KERNEL_PKGS=(linux-image-rt-amd64 linux-headers-rt-amd64)
fi

# Ubuntu names its kernel packages by flavour and has one linux-source.
if [ -r /etc/os-release ] && grep -qx 'ID=ubuntu' /etc/os-release; then
	PKGS=("${PKGS[@]/linux-headers-amd64/linux-headers-generic}")
	PKGS=("${PKGS[@]/linux-image-amd64/linux-image-generic}")
	PKGS=("${PKGS[@]/linux-source-6.1/linux-source}")
	KERNEL_PKGS=()
fi

missing() {
	local p
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
			grep -q 'install ok installed' || echo "$p"
	done
}

install() {
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

can_install() {
	[ "$(id -u)" = 0 ] && command -v apt-get >/dev/null
}

case "${1:-ensure}" in
install)
	mapfile -t need < <(missing "${PKGS[@]}" "${KERNEL_PKGS[@]}")
	if [ "${#need[@]}" != 0 ]; then
		echo "deps: installing ${need[*]}" >&2
		install "${need[@]}"
	fi
	"$top/tools/testing/trixie-root.sh" install
	;;
ensure)
	command -v dpkg-query >/dev/null || {
		echo "deps: not a Debian/Ubuntu system; install the equivalents of: ${PKGS[*]}" >&2
		exit 1
	}
	mapfile -t need < <(missing "${PKGS[@]}")
	[ "${#need[@]}" = 0 ] && exit 0
	if can_install; then
		echo "deps: installing ${need[*]}" >&2
		install "${need[@]}"
	else
		echo "deps: missing packages: ${need[*]}" >&2
		echo "deps: run as root: apt-get install ${need[*]}  (or: sudo make deps)" >&2
		exit 1
	fi
	;;
*)
	echo "usage: $0 install|ensure" >&2
	exit 2
	;;
esac
