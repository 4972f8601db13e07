#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The source files of this tree, one path a line (relative to the top,
# sorted as git sorts them), with or without git:
#
# - in a git checkout whose top is this tree: git ls-files;
# - anywhere else (a release tarball, a copy made with cp -r, an export
#   under .build/): every file but .git and what .gitignore names, so that
#   build products (*.o, *.ko, .build/, the test binaries) are left out.
#
#   tree-files.sh [-z] [PATHSPEC...]
#
# PATHSPEC as git's: a glob where '*' also matches '/' ('*.c',
# 'selftests/*.h'), a directory ('man'), '.' for everything, ':!PATHSPEC'
# to leave out.  -z: NUL-terminated.  KCM_TREE_FILES=git|find forces one
# way (tools/testing/tree-check.sh compares the two).
#
# Without git, every .gitignore is read as git reads the patterns this
# tree uses: 'name' and '*.glob' match in any directory below it, '/path'
# and 'a/b' from its directory, a trailing '/' only directories.  Negation
# ('!') and '**' are refused rather than half understood.
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
sep='\n'
if [ "${1:-}" = -z ]; then
	sep='\0'
	shift
fi

in_git() {
	local t

	command -v git >/dev/null || return 1
	t=$(git -C "$top" rev-parse --show-toplevel 2>/dev/null) || return 1
	[ "$(cd "$t" && pwd -P)" = "$(cd "$top" && pwd -P)" ]
}

# find(1) tests, one per pattern of .gitignore file $1 (./DIR/.gitignore),
# or-ed, NUL-separated.
ignore_tests() {
	local file=$1 pat dir t
	local base=${1%/.gitignore}

	while IFS= read -r pat || [ -n "$pat" ]; do
		pat=${pat%$'\r'}
		case $pat in
		'' | '#'*) continue ;;
		'!'* | *'**'* | *"\\"*)
			echo "tree-files: pattern '$pat' of $file needs git" >&2
			return 1
			;;
		esac
		dir=
		case $pat in
		*/) dir=1; pat=${pat%/} ;;
		esac
		case $pat in
		/*) t=(-path "$base$pat") ;;
		*/*) t=(-path "$base/$pat") ;;
		*) if [ "$base" = . ]; then
			t=(-name "$pat")
		   else
			t=(-path "$base/*" -name "$pat")
		   fi ;;
		esac
		[ -n "$dir" ] && t+=(-type d)
		printf '%s\0' -o \( "${t[@]}" \)
	done <"$top/$file"
}

list_find() {
	local -a tests=(-path ./.git)
	local gi more

	while IFS= read -r -d '' gi; do
		more=$(ignore_tests "$gi" | tr '\0' '\n') || return 1
		[ -n "$more" ] && mapfile -t -O "${#tests[@]}" tests <<<"$more"
	done < <(cd "$top" && find . -path ./.git -prune -o -name .gitignore -type f -print0)
	(cd "$top" && find . \( "${tests[@]}" \) -prune -o \
		\( -type f -o -type l \) -print) |
		sed 's|^\./||' | LC_ALL=C sort
}

list_all() {
	case ${KCM_TREE_FILES:-} in
	git) git -C "$top" ls-files ;;
	find) list_find ;;
	'') if in_git; then git -C "$top" ls-files; else list_find; fi ;;
	*) echo "tree-files: KCM_TREE_FILES is git or find" >&2; return 1 ;;
	esac
}

# Whether path $1 matches pathspec $2 (a glob, or a directory above it).
matches() {
	# shellcheck disable=SC2053 # $2 is a glob on purpose
	[ "$2" = . ] || [[ $1 == $2 ]] || [[ $1 == $2/* ]]
}

keep() {
	local p=$1 spec want=0 any=0

	for spec in "${specs[@]}"; do
		case $spec in
		:!*) matches "$p" "${spec#:!}" && return 1 ;;
		*) any=1; matches "$p" "$spec" && want=1 ;;
		esac
	done
	[ "$any" = 0 ] || [ "$want" = 1 ]
}

specs=("$@")
files=$(list_all) || exit 1
while IFS= read -r f; do
	[ -n "$f" ] || continue
	# a file deleted but not yet "git rm"ed is no longer a source
	[ -e "$top/$f" ] || [ -L "$top/$f" ] || continue
	# shellcheck disable=SC2059 # $sep is \n or \0
	keep "$f" && printf "%s$sep" "$f"
done <<<"$files"
exit 0
