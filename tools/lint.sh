#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The checks a netdev maintainer runs on a patch, over the whole tree:
# checkpatch.pl --strict (from the distro's linux-source), a W=1 build with
# sparse (C=2), kernel-doc -none, groff/man warnings on the man page,
# docutils on Documentation/*.rst and the shell scripts through shellcheck.
# Prints one line per check and fails if any of them says anything.
#
#   lint.sh [--kdir DIR [--root ROOT]] [--kernels]
#
# --root: DIR is a kernel of that Debian 13 root (tools/testing/kver.sh
# root), where the build and kernel-doc run.  --kernels (make lint): also
# a W=1 build against every kernel with headers, of this machine and of
# the roots (tools/testing/kver.sh list), each in its own copy of the
# module's sources under .build/kernels/VER.
set -uo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
kdir=
kroot=
kernels=
cache=${KCM_CACHE:-${HOME:-/tmp}/.cache/kcm}

while [ $# -gt 0 ]; do
	case $1 in
	--kdir) kdir=$2; shift 2 ;;
	--root) kroot=$2; shift 2 ;;
	--kernels) kernels=1; shift ;;
	*) echo "usage: $0 [--kdir DIR [--root ROOT]] [--kernels]" >&2; exit 2 ;;
	esac
done

# kbuild of a kernel of root $1 ("" for this machine) runs there: the
# 7.x headers' programs need Debian 13's C library.
in_root() {
	local r=$1
	shift
	if [ -n "$r" ]; then
		"$top/tools/testing/trixie-root.sh" run "$@"
	else
		"$@"
	fi
}

# The headers make builds against (tools/testing/kver.sh), and the
# checkpatch of the same kernel line: a newer one knows newer rules.
if [ -z "$kdir" ]; then
	kver=$("$top/tools/testing/kver.sh" build) || exit 1
	kdir=/lib/modules/$kver/build
fi
line=$(in_root "$kroot" make -s -C "$kdir" kernelversion 2>/dev/null | cut -d. -f1,2)
src_tar=/usr/src/linux-source-$line.tar.xz
[ -f "$src_tar" ] ||
	src_tar=$(find /usr/src -maxdepth 1 -name 'linux-source-*.tar.xz' | sort -V | tail -n 1)

cd "$top" || exit 1
failed=0
passed=0
skipped=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT

report() {
	local name=$1 rc=$2
	if [ "$rc" = 0 ] && [ ! -s "$out" ]; then
		echo "ok - lint: $name"
		passed=$((passed + 1))
	else
		echo "not ok - lint: $name"
		sed 's/^/#   /' "$out"
		failed=$((failed + 1))
	fi
}

skip() {
	echo "ok - lint: $1 # SKIP $2"
	skipped=$((skipped + 1))
}

# checkpatch.pl and its data files, unpacked once from linux-source.
checkpatch() {
	local dir base
	[ -n "$src_tar" ] || return 1
	base=$(basename "$src_tar" .tar.xz)
	dir=$cache/$base-lint
	if [ ! -x "$dir/$base/scripts/checkpatch.pl" ]; then
		mkdir -p "$dir" &&
			tar -C "$dir" -xJf "$src_tar" "$base/scripts/checkpatch.pl" \
				"$base/scripts/spelling.txt" \
				"$base/scripts/const_structs.checkpatch" || return 1
	fi
	echo "$dir/$base/scripts/checkpatch.pl"
}

# The tree's files, from git or, in a copy without .git, from the tree
files=$top/tools/tree-files.sh
mapfile -t kernel_c < <("$files" '*.c' '*.h' ':!selftests' ':!tools')
mapfile -t user_c < <("$files" 'selftests/*.c' 'selftests/*.h' 'tools/*.c' 'tools/*.h')
mapfile -t shells < <("$files" '*.sh' '.ci/run' 'tools/testing/vm/guest-init')
if [ "${#kernel_c[@]}" = 0 ] || [ "${#user_c[@]}" = 0 ] || [ "${#shells[@]}" = 0 ]; then
	echo "not ok - lint: no files to check ($files found none)"
	exit 1
fi

# 1. checkpatch --strict on the kernel code, the tools and the tests
# checkpatch asks git about the tree even with --no-tree (and without a
# git checkout says so)
git_noise='^fatal: \|^total: '
if cp=$(checkpatch); then
	# kcm_compat.h is where the kernel versions differ: the one file
	# allowed to test LINUX_VERSION_CODE.
	mapfile -t plain < <(printf '%s\n' "${kernel_c[@]}" | grep -vx kcm_compat.h)
	{
		"$cp" --strict --no-tree --terse --show-types --quiet --no-summary -f \
			"${plain[@]}" Kconfig 2>&1 &&
		"$cp" --strict --no-tree --terse --show-types --quiet --no-summary \
			--ignore LINUX_VERSION_CODE,CONSTANT_COMPARISON -f kcm_compat.h 2>&1
	} | grep -v "$git_noise" >"$out"
	report "checkpatch --strict (kernel)" "${PIPESTATUS[0]}"
	# User space: kernel style, but printf-style TAP macros, plain C
	# library calls and <stdint.h> types are expected there, and BIT()
	# does not exist.
	"$cp" --strict --no-tree --terse --show-types --quiet --no-summary \
		--ignore MACRO_ARG_REUSE,COMPLEX_MACRO,MACRO_WITH_FLOW_CONTROL,PREFER_DEFINED_ATTRIBUTE_MACRO,NEW_TYPEDEFS,PREFER_KERNEL_TYPES,BIT_MACRO \
		-f "${user_c[@]}" 2>&1 | grep -v "$git_noise" >"$out"
	report "checkpatch --strict (tools, selftests)" "${PIPESTATUS[0]}"
else
	echo "not ok - lint: checkpatch.pl not found: apt-get install linux-source-$line"
	failed=$((failed + 1))
fi

# 2. W=1 build with sparse over every file
if command -v sparse >/dev/null; then
	sparse_flag=C=2
else
	sparse_flag=
	skip sparse "sparse not installed (apt-get install sparse)"
fi
in_root "$kroot" make -C "$kdir" M="$top" W=1 $sparse_flag modules 2>&1 |
	grep -E 'warning:|error:' >"$out"
report "W=1 $sparse_flag build" 0

# 3. kernel-doc: the headers' own, else (Debian's 7.x headers ship none)
# the newest of this machine's headers
kdoc_root=$kroot
kdoc=$kdir/scripts/kernel-doc
if [ ! -e "$kroot$kdoc" ]; then
	kdoc_root=
	kdoc=$(for f in /usr/src/linux-headers-*/scripts/kernel-doc; do
		[ -e "$f" ] && echo "$f"; done | sort -V | tail -n 1)
fi
if [ -n "$kdoc" ]; then
	in_root "$kdoc_root" "$kdoc" -none "${kernel_c[@]}" >"$out" 2>&1
	report "kernel-doc -none" $?
else
	echo "not ok - lint: kernel-doc: none in $kdir nor in /usr/src/linux-headers-*"
	failed=$((failed + 1))
fi

# 4. the man page: groff's own warnings and man's (line breaks, fonts)
mapfile -t manpages < <("$files" 'man/*.[1-8]')
if command -v groff >/dev/null && command -v man >/dev/null; then
	for page in "${manpages[@]}"; do
		# man's stdout is the rendered page; only its warnings count.
		{ groff -man -ww -z "$page"
		  LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -E UTF-8 -l "$page" >/dev/null; } 2>"$out"
		report "man page $page" 0
	done
else
	echo "not ok - lint: groff or man not installed (apt-get install groff-base man-db)"
	failed=$((failed + 1))
fi

# 5. the documentation: docutils' warnings and errors (the kernel's
# Sphinx build reports the same ones)
mapfile -t docs < <("$files" 'Documentation/*.rst')
if python3 -c 'import docutils' 2>/dev/null; then
	for doc in "${docs[@]}"; do
		python3 - "$doc" >"$out" 2>&1 <<-'EOF'
		import sys, docutils.core
		with open(sys.argv[1]) as f:
		    docutils.core.publish_string(f.read(), source_path=sys.argv[1],
		                                 writer_name='null',
		                                 settings_overrides={'report_level': 2})
		EOF
		report "rst $doc" $?
	done
else
	echo "not ok - lint: docutils not installed (apt-get install python3-docutils)"
	failed=$((failed + 1))
fi

# 6. shellcheck
if command -v shellcheck >/dev/null; then
	shellcheck -x "${shells[@]}" >"$out" 2>&1
	report shellcheck $?
else
	echo "not ok - lint: shellcheck not installed (apt-get install shellcheck)"
	failed=$((failed + 1))
fi

# 7. every kernel: W=1, no warning (--kernels)
if [ -n "$kernels" ]; then
	mapfile -t kvers < <("$top/tools/testing/kver.sh" list | awk -F '\t' '$3 == "headers=yes" { print $1 }')
	[ "${#kvers[@]}" != 0 ] || { echo "not ok - lint: no kernel headers installed"; failed=$((failed + 1)); }
	for v in "${kvers[@]}"; do
		r=$("$top/tools/testing/kver.sh" root "$v")
		dir=$top/.build/kernels/$v
		rm -rf "$dir"
		mkdir -p "$dir"
		cp --parents -t "$dir" Kbuild Kconfig "${kernel_c[@]}"
		in_root "$r" make -C "/lib/modules/$v/build" M="$dir" W=1 modules >"$dir/build.log" 2>&1
		rc=$?
		grep -E 'warning:|error:' "$dir/build.log" >"$out"
		[ -f "$dir/kcm.ko" ] || rc=1
		[ "$rc" = 0 ] || [ -s "$out" ] || tail -n 5 "$dir/build.log" >"$out"
		report "W=1 build against $v${r:+ (Debian 13 root)}" "$rc"
	done
	# make lint on its own ends as make check does
	echo "$passed passed, $failed failed, $skipped skipped"
fi

[ "$failed" = 0 ]
