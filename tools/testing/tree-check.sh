#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The suite without git, as TAP (make check): a release tarball or a copy
# made with cp -r has no .git, and the lint and the DKMS check must still
# find the tree's files (tools/tree-files.sh).
#
# 1. export: the tree's files copied to DIR (default .build/export), no
#    .git; check.sh then runs the lint and the DKMS source copy there.
# 2. in the export, with a git that fails (as on a machine without git),
#    and with git but outside any repository (as in a tarball), the
#    export's tools/tree-files.sh lists exactly the exported files.
# 3. in this tree as built (kcm.ko, *.o, .build/, test binaries), the list
#    made without git is git's (tracked files and untracked ones that no
#    .gitignore names): no build product in it.
#
#   tree-check.sh [--out DIR]
set -uo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=$top/.build/export
while [ $# -gt 0 ]; do
	case $1 in
	--out) out=$2; shift 2 ;;
	*) echo "usage: $0 [--out DIR]" >&2; exit 2 ;;
	esac
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

failed=0

# $1: 0 = pass; $2: what; the evidence is in $work/why
result() {
	if [ "$1" = 0 ]; then
		echo "ok - $2"
	else
		echo "not ok - $2"
		failed=$((failed + 1))
		head -n 20 "$work/why" | sed 's/^/#   /'
	fi
	: >"$work/why"
}

ingit=
git -C "$top" rev-parse --show-toplevel >/dev/null 2>&1 && [ -e "$top/.git" ] && ingit=1

# ---- 1. the export
rm -rf "$out"
mkdir -p "$out"
"$top/tools/tree-files.sh" -z >"$work/list" 2>"$work/why" &&
	(cd "$top" && xargs -0 cp -p --parents -t "$out" <"$work/list") 2>>"$work/why" &&
	[ ! -e "$out/.git" ] && [ -x "$out/tools/tree-files.sh" ]
result $? "tree: $(tr -cd '\0' <"$work/list" | wc -c) files exported to ${out#"$top"/}, without .git"
tr '\0' '\n' <"$work/list" >"$work/want"

# ---- 2. no git: a git that fails first on PATH; then git, but no
# repository around the export (GIT_CEILING_DIRECTORIES: the checkout
# this export sits in is not looked for)
mkdir -p "$work/nogit"
printf '#!/bin/sh\necho "git: not installed" >&2\nexit 127\n' >"$work/nogit/git"
chmod +x "$work/nogit/git"
PATH=$work/nogit:$PATH "$out/tools/tree-files.sh" >"$work/got" 2>"$work/why"
rc=$?
diff "$work/want" "$work/got" >>"$work/why"
result $((rc | $?)) "tree: without git installed, tools/tree-files.sh in the export lists exactly the exported files"
(cd "$out" && GIT_CEILING_DIRECTORIES=$(dirname "$out") tools/tree-files.sh) >"$work/got" 2>"$work/why"
rc=$?
diff "$work/want" "$work/got" >>"$work/why"
result $((rc | $?)) "tree: outside a git repository, tools/tree-files.sh in the export lists exactly the exported files"

# ---- 3. the built tree: find's list is git's
if [ -n "$ingit" ]; then
	git -C "$top" ls-files -co --exclude-per-directory=.gitignore |
		while IFS= read -r f; do
			[ -e "$top/$f" ] || [ -L "$top/$f" ] && echo "$f"
		done | LC_ALL=C sort >"$work/git"
	KCM_TREE_FILES='find' "$top/tools/tree-files.sh" >"$work/find" 2>"$work/why"
	rc=$?
	diff "$work/git" "$work/find" >>"$work/why"
	rc=$((rc | $?))
	if grep -E '\.(o|ko|mod|cmd)$|^\.build/|(^|/)Module\.symvers$' "$work/find" >>"$work/why"; then
		rc=1
	fi
	built=
	[ -f "$top/kcm.ko" ] && built=", kcm.ko and the test binaries built"
	result "$rc" "tree: without git, the list of this tree$built is git's: no build product"
else
	echo "ok - tree: without git, the list of this tree is git's # SKIP not a git checkout"
fi

[ "$failed" = 0 ]
