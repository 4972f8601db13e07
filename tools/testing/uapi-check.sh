#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# UAPI hygiene of include/uapi/linux/kcm.h, on the host (no VM): prints TAP.
#
# 1. The header compiles on its own, whatever is appended to it, as C89,
#    gnu89 and C99 (-Wall -Wextra -Werror), as strict C11 (-pedantic too)
#    and as C++98, 11, 17 and 20 (g++ -Wall -Wextra -Werror -pedantic).
# 2. Every macro the system <linux/kcm.h> defines has the same value in
#    ours, and every structure it defines has the same size and the same
#    member offsets.  The names are read from the system header, so items
#    only we define (extensions) are not compared, and upstream items added
#    to a later system header are compared without editing this script.
# 3. selftests/kcm_uapi_compat.c (explicit static assertions, also run in
#    the VM) compiles as C++11 too.
#
#   uapi-check.sh [--system-header PATH]
set -uo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
ours=$top/include/uapi/linux/kcm.h
system=/usr/include/linux/kcm.h
cc=${CC:-gcc}
cxx=${CXX:-g++}

while [ $# -gt 0 ]; do
	case $1 in
	--system-header) system=$2; shift 2 ;;
	*) echo "usage: $0 [--system-header PATH]" >&2; exit 2 ;;
	esac
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0

result() {
	# $1: 0 = pass; $2: test name; output of the failing step in $tmp/out
	if [ "$1" = 0 ]; then
		echo "ok - uapi: $2"
	else
		echo "not ok - uapi: $2"
		sed 's/^/#   /' "$tmp/out"
		failed=$((failed + 1))
	fi
}

# The header alone, then used: every struct it declares is instantiated,
# so that a construct a standard rejects is not hidden by being unused.
mkdir -p "$tmp/inc/linux"
cp "$ours" "$tmp/inc/linux/kcm.h"
structs=$(sed -n 's/^struct \([A-Za-z_][A-Za-z0-9_]*\) {.*/\1/p' "$ours")
{
	echo '#include <linux/kcm.h>'
	for s in $structs; do
		echo "struct $s uapi_$s;"
	done
	echo 'int main(void) { return 0; }'
} >"$tmp/use.c"
cp "$tmp/use.c" "$tmp/use.cc"

# Anonymous unions (struct kcm_attach_ext, the 2015 layout) are C11, as in
# many kernel UAPI headers: -pedantic only from C11 on.
for std in c89 gnu89 c99 c11; do
	flags="-Wall -Wextra -Werror"
	[ $std = c11 ] && flags="-pedantic $flags"
	# shellcheck disable=SC2086 # a word list
	"$cc" -std=$std $flags -I"$tmp/inc" \
		-o "$tmp/use-$std" "$tmp/use.c" >"$tmp/out" 2>&1
	result $? "kcm.h compiles as C (-std=$std $flags)"
done
for std in c++98 c++11 c++17 c++20; do
	"$cxx" -std=$std -pedantic -Wall -Wextra -Werror -I"$tmp/inc" \
		-o "$tmp/use-$std" "$tmp/use.cc" >"$tmp/out" 2>&1
	result $? "kcm.h compiles as C++ (-std=$std -pedantic -Wall -Wextra -Werror)"
done

if [ ! -r "$system" ]; then
	echo "not ok - uapi: no $system to compare with (apt-get install linux-libc-dev)"
	exit 1
fi

# The macros the system header defines itself (not those of its includes,
# not its include guard).
"$cc" -E -dM -include "$system" -x c /dev/null >"$tmp/sys.all" 2>"$tmp/out"
"$cc" -E -dM -include linux/sockios.h -x c /dev/null >"$tmp/base.all" 2>>"$tmp/out"
macros=$(comm -23 <(awk '$1 == "#define" { sub(/\(.*/, "", $2); print $2 }' "$tmp/sys.all" | sort -u) \
		  <(awk '$1 == "#define" { sub(/\(.*/, "", $2); print $2 }' "$tmp/base.all" | sort -u) |
	grep -v '_H$')

# Members of each struct of the system header: the last word before ';'.
members() {
	awk -v s="$1" '
		$0 ~ "^struct " s " {" { in_s = 1; next }
		in_s && /^};/ { in_s = 0 }
		in_s && /;/ { sub(/;.*/, ""); sub(/\[.*/, ""); n = split($0, w, /[ \t*]+/); print w[n] }' "$2"
}
sys_structs=$(sed -n 's/^struct \([A-Za-z_][A-Za-z0-9_]*\) {.*/\1/p' "$system")

# One program per header prints "name value" for each shared item.
gen() {
	local s m
	echo '#include <stdio.h>'
	echo '#include <stddef.h>'
	echo '#include <linux/sockios.h>'
	echo "#include \"$1\""
	echo 'int main(void)'
	echo '{'
	for m in $macros; do
		echo "#ifdef $m"
		printf '\tprintf("macro %s %%lld\\n", (long long)(%s));\n' "$m" "$m"
		echo '#else'
		printf '\tprintf("macro %s missing\\n");\n' "$m"
		echo '#endif'
	done
	for s in $sys_structs; do
		printf '\tprintf("sizeof struct %s %%zu\\n", sizeof(struct %s));\n' "$s" "$s"
		for m in $(members "$s" "$system"); do
			printf '\tprintf("offsetof struct %s.%s %%zu\\n", offsetof(struct %s, %s));\n' \
				"$s" "$m" "$s" "$m"
		done
	done
	echo '	return 0;'
	echo '}'
}

dump() {
	# $1: header, $2: name
	gen "$1" >"$tmp/$2.c" &&
		"$cc" -Wall -Werror -o "$tmp/$2" "$tmp/$2.c" >>"$tmp/out" 2>&1 &&
		"$tmp/$2" >"$tmp/$2.txt"
}

: >"$tmp/out"
dump "$system" sys && dump "$ours" ours
rc=$?
if [ "$rc" = 0 ]; then
	diff -u "$tmp/sys.txt" "$tmp/ours.txt" >"$tmp/out"
	rc=$?
fi
n=$(wc -l 2>/dev/null <"$tmp/sys.txt" || echo 0)
result "$rc" "kcm.h matches $system in all $n shared items (macros, sizes, offsets)"
# An empty list would prove nothing.
if [ "$rc" = 0 ] && { [ -z "$macros" ] || [ -z "$sys_structs" ]; }; then
	echo "not ok - uapi: found no macros or no structs in $system"
	failed=$((failed + 1))
fi

# The selftest's explicit assertions (selftests/kcm_uapi_compat.c, which
# also runs in the VM) hold in C++ too.
"$cxx" -x c++ -std=c++11 -pedantic -Wall -Wextra -Werror -I"$top/include/uapi" \
	-DSYSTEM_KCM_H="\"$system\"" -DOUR_KCM_H="\"$ours\"" \
	-o "$tmp/compat" "$top/selftests/kcm_uapi_compat.c" >"$tmp/out" 2>&1 &&
	"$tmp/compat" >>"$tmp/out" 2>&1
result $? "selftests/kcm_uapi_compat.c holds as C++11"

[ "$failed" = 0 ]
