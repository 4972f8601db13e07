#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# make kselftest-tree KSRC=<kernel source>: puts this tree's selftests into
# a kernel source tree as tools/testing/selftests/net/kcm/, with what they
# need (the shared user-space helpers of tools/lib/kcm/, flat beside them),
# and this tree's UAPI header as include/uapi/linux/kcm.h, as when net/kcm
# is in-tree.  Then, in that tree:
#
#   make headers
#   make -C tools/testing/selftests TARGETS=net/kcm run_tests
#   make -C tools/testing/selftests TARGETS=net/kcm INSTALL_PATH=DIR install
#   DIR/run_kselftest.sh -c net/kcm
#
# Files of an earlier copy that this tree no longer has are removed; build
# products there (lib.mk builds in place) are left alone.
set -euo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
ksrc=${1:-}

if [ -z "$ksrc" ] || [ ! -f "$ksrc/tools/testing/selftests/lib.mk" ]; then
	echo "kselftest-tree: KSRC='$ksrc' is not a kernel source tree" \
		"(no tools/testing/selftests/lib.mk)" >&2
	exit 1
fi

dst=$ksrc/tools/testing/selftests/net/kcm
mkdir -p "$dst"

# The suite's sources: everything of selftests/ but the standalone runner
shopt -s nullglob
files=()
for f in "$top"/selftests/*.[ch] "$top"/selftests/*.sh "$top"/selftests/Makefile \
	 "$top"/selftests/config "$top"/selftests/settings "$top"/tools/lib/kcm/*.h; do
	[ "$(basename "$f")" = run_tests.sh ] || files+=("$f")
done

# A source file of an earlier copy that is not in this one goes
for old in "$dst"/*.[ch] "$dst"/*.sh; do
	keep=
	for f in "${files[@]}"; do
		[ "$(basename "$f")" = "$(basename "$old")" ] && keep=1
	done
	[ -n "$keep" ] || rm -f "$old"
done

cp "${files[@]}" "$dst/"
# Left alone when it is ours already: a kernel built there would rebuild
# what includes it.
cmp -s "$top/include/uapi/linux/kcm.h" "$ksrc/include/uapi/linux/kcm.h" ||
	install -m 0644 "$top/include/uapi/linux/kcm.h" "$ksrc/include/uapi/linux/kcm.h"
echo "kselftest-tree: ${#files[@]} files in ${dst#"$ksrc"/}, include/uapi/linux/kcm.h is this tree's"
