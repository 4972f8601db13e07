#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Build (or reuse) the debug kernel of 'make check-debug': the distro's
# linux-source-6.1 (--line 6.12: linux-source-6.12; --line 6.12-rt: the same
# with CONFIG_PREEMPT_RT; --line 7.2: linux-source-7.2 of trixie-backports,
# from the Debian 13 root of tools/testing/trixie-root.sh) with net/kcm
# replaced by this tree, KASAN, lockdep,
# kmemleak and friends (tools/testing/debug-kernel.config), and our kcm.ko
# built in the kernel tree as net/kcm/kcm.ko.
#
#   debug-kernel.sh [--out DIR] [--jobs N] [--line 6.1|6.12|6.12-rt|7.2]
#
# Leaves in DIR (default .build/debug): bzImage, kcm.ko, kernel.release,
# ksrc and kbuild (the paths of the kernel tree and of its O= build),
# config, kunit/ (any other module built in net/kcm, e.g. a KUnit suite).
#
# Cache: ${KCM_CACHE:-~/.cache/kcm}/debug-kernel/KEY/{src,build}, outside
# the repo.  KEY hashes what the kernel image depends on: the config
# fragment, the kernel recipe of this script (between the ">>> kernel
# recipe" marks), the linux-source package version and the gcc and pahole
# versions.  A new KEY unpacks and builds a kernel (about 10 min on 2
# cores); an existing one is reused.  Every run then copies our module
# sources into src/net/kcm and src/include (only files whose content
# changed); if our Kconfig changed it reconfigures and lets make rebuild
# what depends on it (a minute or two), and it always runs 'make modules',
# which rebuilds just what changed (seconds).  The KCM_DEBUG_KEEP (4) most
# recently used kernels are kept (one per line).
#
# Environment: KCM_CACHE, KCM_JOBS (nproc + 1), KCM_DEBUG_KEEP,
#   KCM_LINUX_SOURCE (/usr/src/linux-source-LINE.tar.xz, for 7.2 in the
#   Debian 13 root).  Every line is built with this machine's compiler:
#   kcm.ko is built in the same tree, so both come from one compiler.
set -euo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
self=$top/tools/testing/debug-kernel.sh
fragment=$top/tools/testing/debug-kernel.config
line=6.1
cache=${KCM_CACHE:-${HOME:-/tmp}/.cache/kcm}/debug-kernel
out=$top/.build/debug
jobs=${KCM_JOBS:-$(($(nproc) + 1))}
keep=${KCM_DEBUG_KEEP:-4}
PATH=$PATH:/sbin:/usr/sbin

while [ $# -gt 0 ]; do
	case $1 in
	--out) out=$2; shift 2 ;;
	--jobs) jobs=$2; shift 2 ;;
	--line) line=$2; shift 2 ;;
	*) echo "usage: $0 [--out DIR] [--jobs N] [--line 6.1|6.12|6.12-rt|7.2]" >&2; exit 2 ;;
	esac
done
case $line in
6.1 | 6.12 | 6.12-rt) pkgroot= ;;
# Debian 12 has no linux-source-7.2: the Debian 13 root installs it.
7.2) pkgroot=$("$top/tools/testing/trixie-root.sh" path) ;;
*) echo "$0: --line is 6.1, 6.12, 6.12-rt or 7.2, not '$line'" >&2; exit 2 ;;
esac
# 6.12-rt: linux-source-6.12 built with CONFIG_PREEMPT_RT
base=${line%-rt}
pkg=linux-source-$base
tarball=${KCM_LINUX_SOURCE:-$pkgroot/usr/src/$pkg.tar.xz}
# A kernel line may need more: debug-kernel-BASE.config, then
# debug-kernel-LINE.config (the flavour's own) join the fragment.
names=("$base")
[ "$line" != "$base" ] && names+=("$line")
extras=()
for name in "${names[@]}"; do
	f=$top/tools/testing/debug-kernel-$name.config
	[ -f "$f" ] && extras+=("$f")
done
if [ "${#extras[@]}" -gt 0 ]; then
	joined=$(mktemp)
	trap 'rm -f "$joined"' EXIT
	cat "$fragment" "${extras[@]}" >"$joined"
	fragment=$joined
fi

say() {
	echo "# debug kernel: $*"
}

die() {
	echo "debug-kernel: $*" >&2
	exit 1
}

# Show the end of log $1 and fail: $2 is what failed.
build_failed() {
	echo "debug-kernel: $2 failed; last lines of $1:" >&2
	tail -n 40 "$1" >&2
	exit 1
}

# ------------------------------------------------------------ our sources
# Copy $1 to $2 unless it already has that content (unchanged files keep
# their timestamps, so make does not rebuild them).
sync_file() {
	cmp -s "$1" "$2" 2>/dev/null && return 0
	mkdir -p "$(dirname "$2")"
	cp -f "$1" "$2"
	synced=$((synced + 1))
}

# net/kcm becomes exactly our Kconfig, Kbuild and kcm*.[ch] (upstream's
# Makefile and sources go); our headers replace the kernel's, and the
# trace events header joins include/trace/events/.
sync_sources() {
	local f base
	local -A want=()
	synced=0
	for f in "$top/Kconfig" "$top/Kbuild" "$top"/kcm*.c "$top"/kcm*.h; do
		[ -f "$f" ] || continue
		base=$(basename "$f")
		case $base in *.mod.c) continue ;; esac
		want[$base]=1
		sync_file "$f" "$src/net/kcm/$base"
	done
	for f in "$src"/net/kcm/*; do
		[ -e "$f" ] || continue
		[ -n "${want[$(basename "$f")]:-}" ] && continue
		rm -rf "$f"
		synced=$((synced + 1))
	done
	while IFS= read -r f; do
		case $f in
		net/kcm*.h | uapi/linux/kcm*.h | trace/events/kcm*.h)
			sync_file "$top/include/$f" "$src/include/$f" ;;
		*) die "include/$f: only include/net/kcm*.h, include/uapi/linux/kcm*.h and include/trace/events/kcm*.h go into the kernel tree" ;;
		esac
	done < <(cd "$top/include" && find . -type f -name '*.h' | sed 's|^\./||' | sort)
}

# >>> kernel recipe (hashed into the cache key: edit it and the kernel is
# rebuilt)

# CONFIG_* lines for the KUnit suites our Kconfig may define: every symbol
# but AF_KCM whose name says KUNIT or TEST is enabled (m if tristate).
kunit_fragment() {
	awk '
		/^config / { sym = $2; next }
		/^[ \t]+(bool|tristate)/ && sym != "" { type[sym] = $1 }
		END {
			for (s in type)
				if (s != "AF_KCM" && s ~ /KUNIT|TEST/)
					printf "CONFIG_%s=%s\n", s, type[s] == "tristate" ? "m" : "y"
		}' "$top/Kconfig" | sort
}

# verify_config CONFIG FRAGMENT...: every CONFIG_ line of the fragments must
# hold in CONFIG ("=n": not set); olddefconfig silently drops what it
# cannot satisfy.
verify_config() {
	local config=$1
	shift
	awk -v config="$config" '
		match($0, /^CONFIG_[A-Za-z0-9_]+=/) {
			sym = substr($0, 1, RLENGTH - 1); val = substr($0, RLENGTH + 1)
			if (FILENAME == config) have[sym] = val; else want[sym] = val
		}
		END {
			bad = 0
			for (s in want) {
				w = want[s]; h = (s in have) ? have[s] : "n"
				if (w != h) { printf "  %s: want %s, got %s\n", s, w, h; bad = 1 }
			}
			exit bad
		}' "$@" "$config"
}

# (Re)configure $bld: tinyconfig + the fragments, checked.  Also run when
# only our Kconfig changed: kbuild then rebuilds just what depends on the
# symbols that changed.
configure_kernel() {
	kunit_fragment >"$dir/kunit.config"
	say "configuring: tinyconfig + $(basename "$fragment")$([ -s "$dir/kunit.config" ] &&
		echo " + $(tr '\n' ' ' <"$dir/kunit.config")")"
	mkdir -p "$bld"
	{
		make -C "$src" O="$bld" tinyconfig &&
			"$src/scripts/kconfig/merge_config.sh" -m -O "$bld" "$bld/.config" \
				"$fragment" "$dir/kunit.config" &&
			make -C "$src" O="$bld" olddefconfig
	} >"$dir/config.log" 2>&1 || build_failed "$dir/config.log" "configuring"
	if ! verify_config "$bld/.config" "$fragment" "$dir/kunit.config" >"$dir/config.diff"; then
		cat "$dir/config.diff" >&2
		die "the final .config lacks the options above (unmet dependency or unknown symbol: see $fragment)"
	fi
}

# make bzImage, with a progress line a minute.
make_bzimage() {
	local start=$SECONDS pid n

	say "make bzImage -j$jobs (from scratch: about 10 min on 2 cores; log $dir/build.log)"
	nice -n 10 make -C "$src" O="$bld" -j"$jobs" bzImage >"$dir/build.log" 2>&1 &
	pid=$!
	while kill -0 "$pid" 2>/dev/null; do
		for _ in $(seq 60); do
			sleep 1
			kill -0 "$pid" 2>/dev/null || break
		done
		if kill -0 "$pid" 2>/dev/null; then
			n=$(grep -c '^  CC ' "$dir/build.log" || true)
			say "still building: $n files compiled in $((SECONDS - start)) s"
		fi
	done
	wait "$pid" || build_failed "$dir/build.log" "the kernel build"
	sha256sum <"$top/Kconfig" >"$dir/.kconfig"
	say "kernel $(cat "$bld/include/config/kernel.release") built in $((SECONDS - start)) s"
}

# Unpack, put our net/kcm in, configure, build bzImage (modules come later).
build_kernel() {
	if [ ! -f "$dir/.unpacked" ]; then
		say "unpacking $tarball ($pkg $pkg_version)"
		rm -rf "$src" "$bld"
		mkdir -p "$src"
		tar -C "$src" --strip-components=1 -xJf "$tarball" ||
			die "unpacking $tarball failed"
		touch "$dir/.unpacked"
	fi
	sync_sources
	rm -f "$dir/.built"
	configure_kernel
	make_bzimage
	touch "$dir/.built"
}

# <<< kernel recipe

# Keep the $keep most recently used kernels.
prune() {
	local d n=0
	while IFS= read -r d; do
		n=$((n + 1))
		[ "$n" -le "$keep" ] && continue
		[ "$d" = "$dir" ] && continue
		say "removing the old build $d"
		rm -rf "$d"
	done < <(find "$cache" -mindepth 2 -maxdepth 2 -name .used -printf '%T@ %h\n' |
		sort -rn | cut -d ' ' -f 2-)
}

# Build our module in the tree and copy the results to $out.
build_module() {
	local start=$SECONDS ko release vermagic f

	nice -n 10 make -C "$src" O="$bld" -j"$jobs" modules >"$dir/modules.log" 2>&1 ||
		build_failed "$dir/modules.log" "building net/kcm in the kernel tree"
	ko=$bld/net/kcm/kcm.ko
	release=$(cat "$bld/include/config/kernel.release")
	[ -f "$ko" ] || die "no $ko after 'make modules' (is CONFIG_AF_KCM=m?)"
	[ "$(modinfo -F intree "$ko")" = Y ] || die "$ko is not marked as an in-tree module"
	vermagic=$(modinfo -F vermagic "$ko")
	[ "${vermagic%% *}" = "$release" ] ||
		die "$ko has vermagic '$vermagic', the kernel is $release"
	say "net/kcm: $synced file(s) synced, 'make modules' took $((SECONDS - start)) s"

	mkdir -p "$out/kunit"
	rm -f "$out"/kunit/*.ko
	cp -f "$bld/arch/x86/boot/bzImage" "$out/bzImage"
	cp -f "$ko" "$out/kcm.ko"
	cp -f "$bld/.config" "$out/config"
	echo "$release" >"$out/kernel.release"
	# Where the tree is: the suite goes there as a kselftest target too
	echo "$src" >"$out/ksrc"
	echo "$bld" >"$out/kbuild"
	echo "$dir" >"$out/cache-dir"
	for f in "$bld"/net/kcm/*.ko; do
		[ "$f" = "$ko" ] || cp -f "$f" "$out/kunit/"
	done
	say "$release ready in $out: bzImage, kcm.ko$(compgen -G "$out/kunit/*.ko" >/dev/null &&
		echo ", kunit/")"
}

# ------------------------------------------------------------ main
for tool in make gcc flex bison bc xz pahole modinfo flock; do
	command -v "$tool" >/dev/null ||
		die "$tool not found: run 'tools/deps.sh install' (or 'make deps')"
done

if [ ! -f "$tarball" ]; then
	if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
		die "$tarball missing: ${pkgroot:+in the Debian 13 root $pkgroot: }apt-get install $pkg"
	fi
	say "installing $pkg${pkgroot:+ in the Debian 13 root}"
	if [ -n "$pkgroot" ]; then
		"$top/tools/testing/trixie-root.sh" install || die "tools/testing/trixie-root.sh install failed"
	else
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$pkg" >/dev/null ||
			die "apt-get install $pkg failed"
	fi
	[ -f "$tarball" ] || die "$pkg installed but $tarball is still missing"
fi
pkg_version=$(dpkg-query ${pkgroot:+--admindir="$pkgroot/var/lib/dpkg"} -W -f='${Version}' "$pkg" 2>/dev/null) ||
	pkg_version=$(stat -c '%s %Y' "$tarball")

key=$({
	echo "$pkg $pkg_version"
	gcc --version | head -n 1
	pahole --version
	sed -n '/^# >>> kernel recipe/,/^# <<< kernel recipe/p' "$self" | sha256sum
	sha256sum <"$fragment"
} | sha256sum | cut -c 1-16)

dir=$cache/$key
src=$dir/src
bld=$dir/build
mkdir -p "$cache" "$out"

# One run at a time per cache: never two kernel builds at once, and no
# run syncs net/kcm under another's make.
exec 8>"$cache/.lock"
if ! flock -n 8; then
	say "waiting for another debug-kernel.sh ($cache/.lock)"
	flock 8
fi
mkdir -p "$dir"
touch "$dir/.used"

if [ -f "$dir/.built" ]; then
	say "reusing $dir"
	sync_sources
	if ! sha256sum <"$top/Kconfig" | cmp -s - "$dir/.kconfig"; then
		say "our Kconfig changed: reconfiguring, rebuilding what depends on it"
		configure_kernel
		make_bzimage
	fi
else
	build_kernel
	prune
fi
build_module
