#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# Boot a distro (or self-built) kernel under qemu with a busybox initramfs,
# load kcm.ko, run a command in the guest and judge the kernel log.
#
#   vm.sh --module PATH.ko [--payload DIR] [--run 'CMD'] [--kernel-version VER]
#         [--kernel VMLINUZ] [--timeout SECS] [--out DIR] [--append 'ARGS']
#         [--extra-modules 'veth sch_netem'] [--no-module] [--rmmod]
#         [--env 'K=V ...'] [--overlay DIR] [--root DIR]
#
# The guest's ttyS0 is the kernel console (OUT/console.log); ttyS1 carries
# the command's stdout+stderr (OUT/output.log), streamed here live.  After
# the run, exactly one TAP line judges the kernel log:
#   ok - vm: kernel log clean
#   not ok - vm: kernel log: <first offending line>
#   not ok - vm: guest did not finish (panic/hang?)
#   not ok - vm: timeout after N s
#
# Exit status: the command's exit status if the kernel log is clean and the
# guest finished; 2 kernel problem or guest died; 3 timeout; 1 host-side
# setup error.
#
# Environment:
#   KCM_VM_ACCEL   auto (default) | kvm | tcg.  auto probes KVM once per
#                  (host kernel, guest kernel) and caches the verdict in
#                  ${KCM_CACHE:-$HOME/.cache/kcm}/kvm-probe-<host>-<guest>
#   KCM_VM_MEM     guest RAM in MiB (1024)
#   KCM_VM_SMP     guest CPUs (2)
#   KCM_VM_QEMU    qemu binary (qemu-system-x86_64)
#   KCM_VM_BUSYBOX static busybox to put in the initramfs (/bin/busybox)
#   KCM_VM_TCG_THREAD  single (default) | multi: TCG's threading (see
#                  tcg_args below)
#   KCM_VM_REBOOTS under TCG, how many times a guest killed by an emulator
#                  fault (see emulator_fault) is booted again (2)
#
# Each boot's output starts with a line "# vm: boot N"; a count of TAP
# results (tools/testing/tap-count.sh) drops a void boot's results.

set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

usage() {
	cat <<'EOF'
usage: vm.sh --module PATH.ko [--payload DIR] [--run 'CMD'] [--kernel-version VER]
             [--kernel VMLINUZ] [--timeout SECS (600)] [--out DIR (./.build/vm)]
             [--append 'extra cmdline'] [--extra-modules 'veth sch_netem']
             [--no-module] [--rmmod] [--env 'K=V ...'] [--overlay DIR]
             [--root DIR]

  --module PATH.ko     module loaded in the guest as /lib/modules/kcm.ko
  --payload DIR        copied to /kcm in the guest (the command's cwd)
  --run 'CMD'          sh command run in the guest; its exit status is ours
                       (default: none, just boot and load the module)
  --kernel-version VER modules of /lib/modules/VER (default: the newest VER
                       with both /lib/modules/VER/build and /boot/vmlinuz-VER)
  --kernel VMLINUZ     kernel image (default /boot/vmlinuz-VER, else
                       /lib/modules/VER/vmlinuz, as Debian 13 installs it)
  --root DIR           VER is a kernel of root DIR (tools/testing/
                       trixie-root.sh): its image and its modules (the
                       extra ones) are DIR's
  --timeout SECS       wall-clock limit for the whole boot (default 600)
  --out DIR            logs and initramfs go here (default ./.build/vm)
  --append ARGS        extra kernel command line
  --extra-modules LIST modules of VER loaded before kcm.ko, with their
                       dependencies (default: veth, sch_netem, and kTLS
                       with its ciphers; absent ones are skipped)
  --no-module          do not load kcm.ko (--module then optional)
  --rmmod              rmmod kcm after the command (checks module unload)
  --env 'K=V ...'      exported in the guest (repeatable; no spaces in V)
  --overlay DIR        copied onto the initramfs root (e.g. a /lib/modules
                       tree for modprobe; repeatable)
  --scan-log FILE      only judge a saved console log; exit 0 clean, 2 not
  --emulator-fault FILE  only tell whether a saved console log shows the
                       guest killed by the emulator (exit 0) or not (1)

Exit: command's status if the kernel log is clean; 2 kernel problem or the
guest died; 3 timeout; 1 setup error.
EOF
}

die() {
	echo "vm: $*" >&2
	exit 1
}

warn() {
	echo "vm: warning: $*" >&2
}

# Single-quote $1 for a POSIX shell.
shq() {
	local s=$1
	printf "'%s'" "${s//\'/\'\\\'\'}"
}

# Escape a value for a qemu option list (',' is doubled).
qesc() {
	printf '%s' "${1//,/,,}"
}

# First token of the version string in a bzImage's setup header, or nothing.
kernel_image_version() {
	local img=$1 magic ptr
	magic=$(dd if="$img" bs=1 skip=514 count=4 status=none 2>/dev/null) || return 0
	[[ $magic == HdrS ]] || return 0
	ptr=$(od -An -tu2 -j 526 -N 2 "$img" 2>/dev/null | tr -d ' ') || return 0
	[[ -n $ptr && $ptr -gt 0 ]] || return 0
	dd if="$img" bs=1 skip=$((512 + ptr)) count=200 status=none 2>/dev/null |
		tr '\0' '\n' | sed -n '1{s/ .*//;p;}'
}

# Newest VER with both /lib/modules/VER/build and /boot/vmlinuz-VER.
default_kver() {
	local d v
	for d in /lib/modules/*/; do
		[[ -d $d ]] || continue
		v=$(basename "$d")
		if [[ -e $d/build && -e /boot/vmlinuz-$v ]]; then
			printf '%s\n' "$v"
		fi
	done | sort -V | tail -n 1
}

# Kernel-log lines that mean the run failed (extended regex, case-sensitive).
# "kmemleak" alone would also match the detector's own start-up lines on a
# kmemleak kernel, so those two informational lines are excluded below; its
# reports are "kmemleak: N new suspected memory leaks" + "unreferenced object".
# "BUG <cache> (Not tainted):" is SLUB's corruption / objects-left report.
# Lockdep and RCU-usage reports all start with "WARNING:".
# RCU stalls: "rcu: INFO: rcu_preempt detected stalls", and the RCU-tasks
# flavours' "INFO: rcu_tasks detected stalls on tasks:" (no "rcu: ").
KERNEL_PROBLEM_RE='Kernel panic|Oops|BUG:|BUG [^ ]+ \((Not t|T)ainted|WARNING:|KASAN|UBSAN|KFENCE|general protection fault|possible recursive locking|possible circular locking|INFO: task .* blocked|kmemleak|unreferenced object|Call Trace|RCU stall|rcu_[a-z]+ self-detected stall|INFO: .*detected stall|hard LOCKUP'
KERNEL_BENIGN_RE='kmemleak: Kernel memory leak detector initialized|kmemleak: Automatic memory scanning thread started'

# Print the first problem line of kernel log $1 (with "\r" stripped) and
# return 0, or return 1 when the log is clean.
scan_kernel_log() {
	local line
	line=$(tr -d '\r' <"$1" | grep -aE -- "$KERNEL_PROBLEM_RE" |
		grep -avE -- "$KERNEL_BENIGN_RE" | head -n 1) || true
	[[ -n $line ]] || return 1
	printf '%s\n' "$line"
}

# A guest killed by the emulator, not by the code under test: multi-threaded
# TCG can run a stale translation of code the kernel's text patching
# (text_poke_bp: static keys, static calls) has already restored, so a CPU
# traps on an int3 that is no longer in memory and the kernel oopses
# ("Oops: int3", "Code:" showing some byte other than cc just before the
# <byte> at RIP).  Print the oops line and return 0 when the first problem of
# log $1 is that; return 1 otherwise (a real int3, or any other report).
emulator_fault() {
	local first code
	first=$(scan_kernel_log "$1") || return 1
	[[ $first == *"Oops: int3"* ]] || return 1
	code=$(tr -d '\r' <"$1" | grep -aF -A 40 -- "$first" | grep -a -m 1 'Code: ') ||
		return 1
	[[ $code =~ ([0-9a-f]{2})\ \<[0-9a-f]{2}\> ]] || return 1
	[[ ${BASH_REMATCH[1]} != cc ]] || return 1
	printf '%s\n' "$first"
}

console_tail() {
	echo "vm: last 60 lines of $out/console.log:" >&2
	tail -n 60 "$out/console.log" | tr -d '\r' >&2 || true
}

# ---------------------------------------------------------------- options
module=
payload=
run_cmd=
kver=
kernel=
timeout_s=600
out=./.build/vm
append=
# The selftests' namespaces and netem, and kTLS (kcm_tls) with the
# ciphers it can use, loaded ahead: the guest has no modprobe to load
# them when the crypto API asks.  The names of 6.x and of 7.x (where
# ghash and poly1305 are built in and ChaCha20 is "chacha"): what a
# kernel lacks is skipped.
extra_modules='veth sch_netem tls gcm ghash-generic ctr ccm chacha20poly1305 chacha_generic poly1305_generic chacha'
no_module=0
rmmod=0
kroot=
env_words=()
overlays=()
scan_log=
fault_log=

need_arg() {
	[[ $# -ge 2 ]] || die "$1 needs an argument (see --help)"
}

while [[ $# -gt 0 ]]; do
	opt=$1
	if [[ $opt == --*=* ]]; then
		set -- "${opt%%=*}" "${opt#*=}" "${@:2}"
		opt=$1
	fi
	case $opt in
	--module) need_arg "$@"; module=$2; shift 2 ;;
	--payload) need_arg "$@"; payload=$2; shift 2 ;;
	--run) need_arg "$@"; run_cmd=$2; shift 2 ;;
	--kernel-version) need_arg "$@"; kver=$2; shift 2 ;;
	--kernel) need_arg "$@"; kernel=$2; shift 2 ;;
	--timeout) need_arg "$@"; timeout_s=$2; shift 2 ;;
	--out) need_arg "$@"; out=$2; shift 2 ;;
	--append) need_arg "$@"; append=$2; shift 2 ;;
	--extra-modules) need_arg "$@"; extra_modules=$2; shift 2 ;;
	--env)
		need_arg "$@"
		read -r -a words <<<"$2"
		env_words+=("${words[@]}")
		shift 2
		;;
	--overlay) need_arg "$@"; overlays+=("$2"); shift 2 ;;
	--root) need_arg "$@"; kroot=$2; shift 2 ;;
	--no-module) no_module=1; shift ;;
	--rmmod) rmmod=1; shift ;;
	--scan-log) need_arg "$@"; scan_log=$2; shift 2 ;;
	--emulator-fault) need_arg "$@"; fault_log=$2; shift 2 ;;
	-h | --help) usage; exit 0 ;;
	*) usage >&2; die "unknown argument: $opt" ;;
	esac
done

# --scan-log FILE: only judge a saved console log (tests the patterns).
if [[ -n $scan_log ]]; then
	[[ -r $scan_log ]] || die "--scan-log: cannot read $scan_log"
	if problem=$(scan_kernel_log "$scan_log"); then
		echo "not ok - vm: kernel log: $problem"
		exit 2
	fi
	echo "ok - vm: kernel log clean"
	exit 0
fi

# --emulator-fault FILE: only say whether a saved console log shows the
# guest killed by an emulator fault (exit 0) or not (exit 1).
if [[ -n $fault_log ]]; then
	[[ -r $fault_log ]] || die "--emulator-fault: cannot read $fault_log"
	emulator_fault "$fault_log"
	exit
fi

[[ $timeout_s =~ ^[1-9][0-9]*$ ]] || die "--timeout wants a positive number of seconds, not '$timeout_s'"
for w in "${env_words[@]}"; do
	[[ $w =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || die "--env: '$w' is not K=V"
done

# ---------------------------------------------------------------- host checks
qemu=${KCM_VM_QEMU:-qemu-system-x86_64}
command -v "$qemu" >/dev/null ||
	die "$qemu not found: apt-get install qemu-system-x86 (or run 'make deps')"
for tool in cpio gzip timeout tail; do
	command -v "$tool" >/dev/null ||
		die "$tool not found: apt-get install $([[ $tool == cpio ]] && echo cpio || echo coreutils) (or run 'make deps')"
done
# Non-root users on Debian have no /sbin in PATH.
modinfo=$(PATH=$PATH:/sbin:/usr/sbin command -v modinfo) ||
	die "modinfo not found: apt-get install kmod"
# The modules of VER: this machine's, or those of --root DIR.
modinfo_base=()
if [[ -n $kroot ]]; then
	[[ -d $kroot/lib/modules ]] || die "--root: no $kroot/lib/modules"
	modinfo_base=(-b "$kroot")
fi

busybox=${KCM_VM_BUSYBOX:-/bin/busybox}
[[ -x $busybox ]] || die "$busybox not found: apt-get install busybox-static (or run 'make deps')"
# A dynamic busybox would need its libraries in the initramfs.
ldd_out=$(LC_ALL=C ldd "$busybox" 2>&1) || true
[[ $ldd_out == *"not a dynamic executable"* || $ldd_out == *"statically linked"* ]] ||
	die "$busybox is not statically linked: apt-get install busybox-static"

if [[ $no_module == 0 ]]; then
	[[ -n $module ]] || die "--module PATH.ko is required (or pass --no-module)"
	[[ -f $module ]] || die "module not found: $module (build it first: 'make')"
	[[ -r $module ]] || die "module not readable: $module"
elif [[ -n $module && ! -f $module ]]; then
	die "module not found: $module"
fi
if [[ -n $payload ]]; then
	[[ -d $payload ]] || die "--payload: not a directory: $payload"
fi

if [[ -n $kernel ]]; then
	[[ -f $kernel ]] || die "kernel image not found: $kernel"
	if [[ -z $kver ]]; then
		v=$(kernel_image_version "$kernel")
		if [[ -n $v && -d /lib/modules/$v ]]; then
			kver=$v
		else
			kver=$(default_kver)
		fi
	fi
else
	if [[ -z $kver ]]; then
		kver=$(default_kver)
		[[ -n $kver ]] || die "no kernel with both /lib/modules/VER/build and /boot/vmlinuz-VER:" \
			"apt-get install linux-image-amd64 linux-headers-amd64 (or run 'make deps')"
	fi
	kernel=$kroot/boot/vmlinuz-$kver
	[[ -f $kernel ]] || kernel=$kroot/lib/modules/$kver/vmlinuz
	[[ -f $kernel ]] || die "$kroot/boot/vmlinuz-$kver not found: apt-get install linux-image-amd64 (or run 'make deps')"
fi
[[ -r $kernel ]] || die "cannot read $kernel (Debian installs it mode 0600): run as root or chmod a+r it"
[[ -n $kver ]] || warn "no kernel version known: --extra-modules are skipped"

mkdir -p "$out" || die "cannot create $out"
out=$(cd "$out" && pwd)

# One run per out dir at a time.
if command -v flock >/dev/null; then
	exec 9>"$out/.lock"
	flock -n 9 || die "another vm.sh is using $out (pass another --out)"
fi

# ---------------------------------------------------------------- initramfs
root=$out/initramfs
rm -rf "$root"
mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,dev,proc,sys,tmp,run,root,kcm,lib/modules/dep,var}
# As on Debian: the names of ip netns (/run/netns) are under /var/run too.
ln -s ../run "$root/var/run"

cp "$busybox" "$root/bin/busybox"
ln -s busybox "$root/bin/sh"
cp "$here/guest-init" "$root/init"
chmod 0755 "$root/init" "$root/bin/busybox"

# Copies dynamic program $1 to $2 in the initramfs with the shared
# libraries and the loader that ldd names, each at its own path.
install_dynamic() {
	local lib
	cp -L "$1" "$root$2" || die "cannot copy $1"
	while read -r lib; do
		[[ -e $root$lib ]] && continue
		mkdir -p "$root$(dirname "$lib")"
		cp -L "$lib" "$root$lib" || die "cannot copy $lib (for $1)"
	done < <(LC_ALL=C ldd "$1" | sed -nE 's@.*=> (/[^ ]+).*@\1@p; t; s@^[[:space:]]*(/[^ ]+).*@\1@p')
}

# iproute2's ip and tc: the selftests set up namespaces, veth and netem
# with them.  At Debian's paths, /bin/ip and /sbin/tc, where the guest's
# PATH finds them before busybox's ip and tc applets ('busybox --install'
# leaves existing files alone).  netem is built into tc: its plugin
# directory is not needed.  Missing on the host, the tests that need them
# SKIP.
host_path=$PATH:/sbin:/usr/sbin
for tool in /bin/ip /sbin/tc; do
	if path=$(PATH=$host_path command -v "${tool##*/}"); then
		install_dynamic "$path" "$tool"
	else
		warn "${tool##*/} not found: apt-get install iproute2 (or run 'make deps'); the tests that need it skip"
	fi
done

# coreutils' timeout: the kselftest runner (run_kselftest.sh) calls
# /usr/bin/timeout --foreground, which busybox's applet does not know.
install_dynamic "$(PATH=$host_path command -v timeout)" /usr/bin/timeout

# Copy a .ko (maybe compressed) to $2 uncompressed: busybox insmod may not
# decompress.
install_ko() {
	case $1 in
	*.ko.xz) xz -dc "$1" >"$2" ;;
	*.ko.zst) zstd -qdc "$1" >"$2" ;;
	*.ko.gz) gzip -dc "$1" >"$2" ;;
	*) cp "$1" "$2" ;;
	esac
}

# Resolve module NAME (or path, or alias) of $kver and its dependencies,
# depth first; appends their paths to mod_order, optional ones (softdeps,
# e.g. libcrc32c's "pre: crc32c") marked with a leading "?".  $2=1: NAME
# itself is optional.  Returns 1 if NAME is not found.
declare -A mod_seen=()
mod_order=()
resolve_module() {
	local name=$1 optional=${2:-0} paths path deps dep word pre
	local -a dep_list soft_list
	paths=$("$modinfo" "${modinfo_base[@]}" -k "$kver" -n "$name" 2>/dev/null) || return 1
	[[ -n $paths ]] || return 1
	# An alias may name several modules, one per line.
	while IFS= read -r path; do
		[[ -n $path && $path != "(builtin)" ]] || continue
		[[ -z ${mod_seen[$path]:-} ]] || continue
		mod_seen[$path]=1
		deps=$("$modinfo" "${modinfo_base[@]}" -k "$kver" -F depends "$path" 2>/dev/null) || deps=
		IFS=, read -r -a dep_list <<<"$deps"
		for dep in "${dep_list[@]}"; do
			[[ -n $dep ]] || continue
			resolve_module "$dep" "$optional" ||
				warn "$name needs $dep, not found under $kroot/lib/modules/$kver"
		done
		deps=$("$modinfo" "${modinfo_base[@]}" -k "$kver" -F softdep "$path" 2>/dev/null) || deps=
		read -r -a soft_list <<<"${deps//$'\n'/ }"
		pre=0
		for word in "${soft_list[@]}"; do
			case $word in
			pre:) pre=1 ;;
			post:) pre=0 ;;
			*) if ((pre)); then resolve_module "$word" 1 || true; fi ;;
			esac
		done
		if ((optional)); then
			mod_order+=("?$path")
		else
			mod_order+=("$path")
		fi
	done <<<"$paths"
}

# Copies mod_order[] into the initramfs; sets staged_paths to their guest
# paths and empties mod_order.
staged=0
staged_paths=
stage_modules() {
	local p base guest opt
	staged_paths=
	for p in "${mod_order[@]}"; do
		opt=
		if [[ $p == \?* ]]; then
			opt='?'
			p=${p#\?}
		fi
		base=$(basename "$p")
		base=${base%.xz}
		base=${base%.zst}
		base=${base%.gz}
		guest=/lib/modules/dep/$(printf '%02d' "$staged")-$base
		install_ko "$p" "$root$guest" || die "cannot copy $p"
		staged=$((staged + 1))
		staged_paths+="$opt$guest "
	done
	mod_order=()
}

pre_modules=
if [[ -n $module ]]; then
	install_ko "$module" "$root/lib/modules/kcm.ko" || die "cannot copy $module"
	vermagic=$("$modinfo" -F vermagic "$module" 2>/dev/null | awk '{print $1}') || vermagic=
	if [[ -n $kver && -n $vermagic && $vermagic != "$kver" ]]; then
		warn "$module was built for $vermagic, the guest runs $kver: insmod will likely fail"
	fi
	# kcm.ko's own dependencies (none on kernels with STREAM_PARSER=y).
	if [[ -n $kver ]]; then
		deps=$("$modinfo" -F depends "$module" 2>/dev/null) || deps=
		IFS=, read -r -a kcm_deps <<<"$deps"
		for dep in "${kcm_deps[@]}"; do
			[[ -n $dep ]] || continue
			resolve_module "$dep" || warn "kcm.ko needs $dep, not found under $kroot/lib/modules/$kver"
		done
		stage_modules
		pre_modules=$staged_paths
	fi
fi

extra_paths=
if [[ -n $kver ]]; then
	read -r -a extra_list <<<"$extra_modules"
	for name in "${extra_list[@]}"; do
		resolve_module "$name" || true   # absent modules are skipped
	done
	stage_modules
	extra_paths=$staged_paths
fi

if [[ -n $payload ]]; then
	cp -a "$payload/." "$root/kcm/" || die "cannot copy payload $payload"
fi
for dir in "${overlays[@]}"; do
	[[ -d $dir ]] || die "--overlay: not a directory: $dir"
	cp -a "$dir/." "$root/" || die "cannot copy overlay $dir"
done

{
	echo "# generated by vm.sh"
	echo "KCM_VM_RUN=$(shq "$run_cmd")"
	echo "KCM_VM_NO_MODULE=$no_module"
	[[ -n $module ]] || echo "KCM_VM_NO_MODULE=1"
	echo "KCM_VM_RMMOD=$rmmod"
	echo "KCM_VM_PRE_MODULES=$(shq "$pre_modules")"
	echo "KCM_VM_EXTRA_MODULES=$(shq "$extra_paths")"
	for w in "${env_words[@]}"; do
		echo "export ${w%%=*}=$(shq "${w#*=}")"
	done
} >"$root/kcm-vm.conf"

initrd=$out/initramfs.cpio.gz
(
	cd "$root"
	find . -mindepth 1 -print0 | LC_ALL=C sort -z |
		cpio --null --create --format=newc --quiet --owner=0:0
) | gzip -1 >"$initrd.tmp" || die "building the initramfs failed"
mv -f "$initrd.tmp" "$initrd"

# ---------------------------------------------------------------- accel
smp=${KCM_VM_SMP:-2}
mem=${KCM_VM_MEM:-1024}
# One host thread runs both vCPUs by default: multi-threaded TCG can run a
# stale translation of code the kernel has just patched (text_poke_bp(),
# when a static key or a tracepoint's static call flips), so a guest now
# and then died of "Oops: int3" or hung with one CPU waiting in
# text_poke_bp() for the other.  The suite waits more than it computes, so
# a single thread costs it little (6.1: 112 s against 108 s; the debug
# kernel 451 s against 375 s).  make bench and make profile measure
# parallel work and ask for multi (KCM_VM_TCG_THREAD=multi).
tcg_args=(-accel "tcg,thread=${KCM_VM_TCG_THREAD:-single}" -smp "$smp" -cpu max)
kvm_args=(-accel kvm -cpu host -smp "$smp")

kvm_usable() {
	[[ -c /dev/kvm && -r /dev/kvm && -w /dev/kvm ]]
}

# Boot a tiny init under KVM; 0 if it printed the marker within 20 s.
kvm_probe() {
	local dir=$out/kvm-probe
	rm -rf "$dir"
	mkdir -p "$dir/root/bin" "$dir/root/dev"
	cp "$busybox" "$dir/root/bin/busybox"
	cat >"$dir/root/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox echo KCM-KVM-PROBE-OK
/bin/busybox reboot -f
EOF
	chmod 0755 "$dir/root/init"
	(cd "$dir/root" && find . -mindepth 1 | cpio --create --format=newc --quiet --owner=0:0) |
		gzip -1 >"$dir/initrd.gz"
	: >"$dir/console.log"
	timeout -k 2 20 "$qemu" -m 256 "${kvm_args[@]}" -nodefaults -display none -no-reboot \
		-kernel "$kernel" -initrd "$dir/initrd.gz" \
		-append "console=ttyS0 panic=-1 quiet" \
		-chardev "file,id=con,path=$(qesc "$dir/console.log")" -serial chardev:con \
		</dev/null >"$dir/qemu.log" 2>&1 &
	probe_pid=$!
	wait "$probe_pid" || true
	probe_pid=
	grep -aq KCM-KVM-PROBE-OK "$dir/console.log"
}

probe_pid=
accel=${KCM_VM_ACCEL:-auto}
case $accel in
kvm)
	kvm_usable || die "KCM_VM_ACCEL=kvm but /dev/kvm is not usable"
	accel_args=("${kvm_args[@]}")
	;;
tcg)
	accel_args=("${tcg_args[@]}")
	;;
auto)
	accel_args=("${tcg_args[@]}")
	if kvm_usable; then
		guest_id=$(kernel_image_version "$kernel")
		guest_id=${guest_id:-$kver}
		cache_dir=${KCM_CACHE:-${HOME:-/tmp}/.cache/kcm}
		cache=$cache_dir/kvm-probe-$(uname -r)-${guest_id//\//_}
		verdict=
		[[ -r $cache ]] && verdict=$(head -n 1 "$cache")
		if [[ $verdict != kvm && $verdict != tcg ]]; then
			echo "vm: probing KVM (once; verdict cached in $cache)" >&2
			if kvm_probe; then verdict=kvm; else verdict=tcg; fi
			echo "vm: KVM probe: using $verdict" >&2
			if mkdir -p "$cache_dir" 2>/dev/null; then
				if echo "$verdict" >"$cache.tmp.$$"; then
					mv -f "$cache.tmp.$$" "$cache" || true
				fi
			fi
		fi
		[[ $verdict == kvm ]] && accel_args=("${kvm_args[@]}")
	fi
	;;
*) die "KCM_VM_ACCEL must be auto, kvm or tcg, not '$accel'" ;;
esac

# ---------------------------------------------------------------- run
# panic=-1: a panic reboots at once, which -no-reboot turns into qemu's exit.
# oops=panic: an oops leaves the kernel half-dead (locks held, the test
# process killed), so end the run right away instead of waiting for the
# timeout; the oops text is still in console.log.  WARNs only print (no
# panic_on_warn) so that one run shows all of them.  No 'quiet': the
# console log is the evidence.
cmdline="console=ttyS0,115200 panic=-1 oops=panic"
[[ -z $append ]] || cmdline+=" $append"

console_log=$out/console.log
output_log=$out/output.log
rm -f "$console_log".[0-9]* "$output_log".[0-9]*

qemu_pid=
stream_pid=
# Only called from the EXIT trap, which ShellCheck 0.9 does not follow
# (a false "unreachable" SC2317 on every line).
# shellcheck disable=SC2317
cleanup() {
	local pid
	for pid in "$probe_pid" "$qemu_pid"; do
		[[ -n $pid ]] || continue
		kill -TERM "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	if [[ -n $stream_pid ]]; then
		kill -TERM "$stream_pid" 2>/dev/null || true
		wait "$stream_pid" 2>/dev/null || true
	fi
}
trap cleanup EXIT
trap 'echo "vm: hangup" >&2; exit 129' HUP
trap 'echo "vm: interrupted" >&2; exit 130' INT
trap 'echo "vm: terminated" >&2; exit 143' TERM

accel_name=${accel_args[1]%%,*}

# One boot: qemu runs the guest; its ttyS1 is copied live to stdout (no
# "\r", no KCM-VM-* marker lines).  Sets qemu_rc, start_s and elapsed.
boot() {
	local start
	: >"$console_log"
	: >"$output_log"
	start=$(date +%s.%N)
	start_s=$SECONDS
	# timeout(1) kills qemu on expiry (and, 5 s later, for good); it
	# forwards our TERM on cleanup.  qemu never reads stdin here.
	timeout -k 5 "$timeout_s" "$qemu" -m "$mem" "${accel_args[@]}" \
		-nodefaults -display none -no-reboot \
		-kernel "$kernel" -initrd "$initrd" -append "$cmdline" \
		-chardev "file,id=con,path=$(qesc "$console_log")" -serial chardev:con \
		-chardev "file,id=out,path=$(qesc "$output_log")" -serial chardev:out \
		</dev/null >"$out/qemu.log" 2>&1 &
	qemu_pid=$!

	tail -n +1 -s 0.2 -f --pid="$qemu_pid" "$output_log" </dev/null |
		sed -u -E -e 's/\r//g' -e "/$marker_re/{s/$marker_re//;/^\$/d;}" &
	stream_pid=$!

	qemu_rc=0
	wait "$qemu_pid" || qemu_rc=$?
	qemu_pid=
	wait "$stream_pid" || true
	stream_pid=
	elapsed=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
	echo "vm: qemu ($accel_name) ran ${elapsed}s; logs in $out" >&2
}

# "# vm: boot N" starts each boot's output: a boot the emulator killed
# (emulator_fault) is booted again, at most KCM_VM_REBOOTS (2) times and
# only under TCG, and TAP counters drop what came after its "boot N" line.
# Its logs stay as console.log.N and output.log.N.
marker_re='KCM-VM-(EXIT|TAINT)=[0-9]*$'
boots=1
[[ $accel_name != tcg ]] || boots=$((1 + ${KCM_VM_REBOOTS:-2}))
for ((n = 1; ; n++)); do
	echo "# vm: boot $n"
	boot
	((n < boots)) || break
	fault=$(emulator_fault "$console_log") || break
	mv -f "$console_log" "$console_log.$n"
	mv -f "$output_log" "$output_log.$n"
	echo "# vm: boot $n died of an emulator fault, not a kernel bug: $fault"
	echo "# vm: (multi-threaded TCG ran a stale int3 of the kernel's text patching;" \
		"log in $console_log.$n); its results are void, booting again"
done

# 124: timeout(1) sent TERM; 137: qemu also needed the KILL.
if [[ $qemu_rc == 124 ]] ||
	[[ $qemu_rc == 137 && $((SECONDS - start_s)) -ge $timeout_s ]]; then
	echo "vm: timeout after $timeout_s s" >&2
	console_tail
	echo "not ok - vm: timeout after $timeout_s s"
	exit 3
fi
if [[ $qemu_rc != 0 && ! -s $console_log ]]; then
	cat "$out/qemu.log" >&2
	die "qemu failed (exit $qemu_rc) before the guest printed anything"
fi

exit_line=$(tr -d '\r' <"$output_log" | grep -aoE 'KCM-VM-EXIT=[0-9]+$' | tail -n 1) || true
taint_line=$(tr -d '\r' <"$output_log" | grep -aoE 'KCM-VM-TAINT=[0-9]+$' | tail -n 1) || true

if problem=$(scan_kernel_log "$console_log"); then
	echo "not ok - vm: kernel log: $problem"
	console_tail
	exit 2
fi

# Safety net for reports that scrolled past the console: taint flags
# B (bad page, 1<<5), D (died, 1<<7), W (warning, 1<<9), L (soft lockup,
# 1<<14).  O and E (out-of-tree, unsigned module) are expected.
if [[ -n $taint_line ]]; then
	taint=${taint_line#KCM-VM-TAINT=}
	bad=$((taint & ((1 << 5) | (1 << 7) | (1 << 9) | (1 << 14))))
	if ((bad != 0)); then
		echo "not ok - vm: kernel log: kernel tainted $taint (flags B/D/W/L: $bad) with no report in the log"
		console_tail
		exit 2
	fi
fi

if [[ -z $exit_line ]]; then
	[[ $qemu_rc == 0 ]] || { echo "vm: qemu exited with $qemu_rc:" >&2; cat "$out/qemu.log" >&2; }
	echo "not ok - vm: guest did not finish (panic/hang?)"
	console_tail
	exit 2
fi

echo "ok - vm: kernel log clean"
exit "${exit_line#KCM-VM-EXIT=}"
