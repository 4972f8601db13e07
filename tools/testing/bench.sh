#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# make bench: one VM boot in which tools/kcmperf measures our kcm.ko and the
# distribution's, alternately (A B B A for each configuration: only one
# module can own AF_KCM at a time, so the guest rmmods one and insmods the
# other), next to the user-space framer and raw TCP of the same bytes
# (the user framer in odd rounds, raw TCP in even ones and in an odd last
# round, so that --rounds 1 has both).  Ends with a table of medians and
# the ratios ours/distro, ours/user and ours/raw, each paired by round
# (the median of the other's runs each against ours' run nearest to it,
# pratio() below), as the host's speed drifts.  A run whose messages
# did not all arrive intact, or that stalled, shows as FAIL in its cell,
# never as a number.
#
#   bench.sh --module KO [--kver VER] [--distro-module KO]
#            [--distro-parser P] [--secs S]
#            [--rounds N] [--only 'CFG ...'] [--parsers 'P ...'] [--out DIR]
#            [--timeout S] [--full-check]
#
# Configurations (CFG): rx-64 rx-512 rx-16K rx-256K (receive throughput,
# 2 TCP connections x 2 KCM sockets, each read by a thread of its own;
# the messages come from a sender process, a thread per connection
# writing 64 KB at a time, TCP_NODELAY, TCP sizing both ends' buffers
# (but SO_RCVBUF 16x the message above 32 KB, on the listener); the
# user-space framer: one epoll thread cutting messages for as many
# worker threads as KCM has readers; raw TCP: one epoll thread reading
# 1 MB at a time) and rr-64 (request/response latency,
# 1 connection, 1 KCM socket), each with default socket buffers and with
# the distribution module's best tuning (KCM SO_RCVBUF 8 MB; the guest
# raises net.core.rmem_max to allow it); rxm-64 (rx-64 with the KCM
# readers using recvmmsg(), 16 messages a call); rxb-64 and rxb-512 (rx
# with our batched receive, KCM_RECV_BATCH 64: ours only, the distro
# module has no such option); rxb1-64 and rxb1-512 (the same with one
# KCM socket and one reader, and the framer with one worker); rxB-64 and
# rxB-512 (the same with reads as
# large as the user-space framer's: 256 KB, KCM_RECV_BATCH 4096 and 512,
# where that framer reads up to 1 MB a call); rxu-64 (rx-64 with the KCM readers using
# io_uring, 64 IORING_OP_RECVs in flight each, kcmperf -U 64: both
# modules; the baselines as in rx-64); tx-512 (2 KCM sockets send() over 2
# connections; default buffers only); txb-64 and txb-512 (tx with the KCM
# senders using sendmmsg(), 64 messages a call, so MSG_BATCH on all but
# the last: both modules; the user-space senders write 64 messages a
# call, raw TCP the same framed stream in 256 KB writes); scale-rx and
# scale-tx (the connections axis, kcmperf -m scale: 1, 10, 100 and 1000
# TCP connections attached to one mux of 2 KCM sockets carry 64-byte
# messages, received by KCM or sent by it; per N the rate, the guest's
# CPU time per message, the wall time to attach the N connections and to
# close the KCM sockets (the mux) and then the TCP sockets, and how many
# connections carried messages: ours and distro, and in scale-rx the
# user-space framer epolling the N receiving ends; in a table of their
# own with the ratio N=1000 / N=1); scale-rxb (scale-rx with the KCM
# readers using our batched receive, KCM_RECV_BATCH 64: ours and the
# user-space framer); tls-512 and tls-16K (rx over kernel TLS, kcmperf
# -K: TLS 1.3 AES-GCM-128 on both ends of both connections; ours reads
# the decrypted stream through kTLS, the user-space framer and raw TCP
# read the same kTLS sockets with read(); 6.6 and later only, where KCM
# goes through kTLS; the distribution module does not frame it and does
# not run); steer-64 and steer-512 (kcmperf -m steer: 4 connections, 4
# workers, every message carrying one of 64 keys and every key's messages
# checked to reach one worker in order: ours steering by key with
# KCM_RECV_KEY and reading with KCM_RECV_BATCH 64, against the
# user-space framer whose dispatcher hashes the key to a worker's queue;
# neither the distribution module nor raw TCP runs).  Also known: tx-64.
#
# The distribution module runs with kcmperf's -P distro parser, which
# reads the message offset that module keeps in skb->cb: the documented
# offset-0 parser mis-frames there (upstream's framing defect) and its
# runs would only stall.  Ours runs the documented parser.
# --distro-module KO --distro-parser ebpf compares ours with another
# build of ours (an older commit's kcm.ko) in the distro column; the
# rxb rows then run there too.
#
# --parsers (default 'cbpf lenfield check'; '' for none): in the rx
# (rx-*, rxb-*, rxb1-*, rxB-*) and rr configurations ours also runs with
# these parsers beside the documented eBPF one: those of our extensions
# (classic BPF, the built-in length field parser) and check, an eBPF
# parser that checks every header against an array map (kcmperf -P
# check); a table compares them with it and with the user-space framer,
# and says what a run of each eBPF parser costs (BPF_PROG_TEST_RUN in the
# guest) and what the check parser adds to the CPU time of a message.
#
# Every run reports the guest's idle CPU share over its window (both
# vCPUs; kcmperf's idle=) and its CPU time per message (busy time of the
# whole guest over the window's messages).  A baseline (user, raw) run
# of a throughput row that leaves more than 5% of the CPU idle was held
# back by something other than its receiving (the sender, wake-ups): the
# table marks it and every ratio against it with '!'.
#
# Every message is checked where it is received (kcmperf: size, header,
# sequence number, trailer and samples of the payload); --full-check
# compares every byte of every message (kcmperf -X), at a cost to every
# receiving column.
#
# Exit status: 0 when every run of ours and of the baselines passed (the
# distribution module failing is the upstream framing bug, reported but
# not fatal), 1 otherwise, 2 when the VM itself failed.
set -euo pipefail

args_given=("$@")
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$top/.build
module=
kver=
distro=
distro_parser=distro
secs=2
rounds=2
only=
parsers="cbpf lenfield check"
out=$build/bench
timeout_s=
full_check=0

usage() {
	cat >&2 <<'EOF'
usage: bench.sh --module KO [--kver VER] [--distro-module KO]
                [--distro-parser distro|ebpf] [--secs S (2)]
                [--rounds N (2)] [--only 'CFG ...'] [--parsers 'P ...']
                [--out DIR] [--timeout S (600 + 540 a round)] [--full-check]
EOF
	exit 2
}

while [ $# -gt 0 ]; do
	case $1 in
	--module) module=$2; shift 2 ;;
	--kver) kver=$2; shift 2 ;;
	--distro-module) distro=$2; shift 2 ;;
	--distro-parser) distro_parser=$2; shift 2 ;;
	--secs) secs=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--only) only=$2; shift 2 ;;
	--parsers) parsers=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--timeout) timeout_s=$2; shift 2 ;;
	--full-check) full_check=1; shift ;;
	*) usage ;;
	esac
done

die() {
	echo "bench: $*" >&2
	exit 1
}

[ -n "$module" ] || usage
[ -f "$module" ] || die "module not found: $module (build it first: 'make')"
[ -x "$top/tools/kcmperf" ] || die "tools/kcmperf not built: make tools"
[[ $secs =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "--secs wants seconds, not '$secs'"
[[ $rounds =~ ^[1-9][0-9]*$ ]] || die "--rounds wants a positive number"
# a round of every configuration takes 5 to 7 minutes in TCG
[ -n "$timeout_s" ] || timeout_s=$((600 + 540 * rounds))
[[ $timeout_s =~ ^[1-9][0-9]*$ ]] || die "--timeout wants seconds"
modinfo=$(PATH=$PATH:/sbin:/usr/sbin command -v modinfo) ||
	die "modinfo not found: apt-get install kmod"
if [ -z "$kver" ]; then
	kver=$("$modinfo" -F vermagic "$module" | awk '{ print $1 }')
fi
if [ -z "$distro" ]; then
	for f in "/lib/modules/$kver/kernel/net/kcm/kcm.ko"{,.xz,.zst,.gz}; do
		if [ -f "$f" ]; then
			distro=$f
			break
		fi
	done
fi
[[ -n $distro && -f $distro ]] ||
	die "no distribution kcm.ko under /lib/modules/$kver/kernel/net/kcm (--distro-module)"

# A module uncompressed: busybox insmod may not decompress.
install_ko() {
	case $1 in
	*.ko.xz) xz -dc "$1" >"$2" ;;
	*.ko.zst) zstd -qdc "$1" >"$2" ;;
	*.ko.gz) gzip -dc "$1" >"$2" ;;
	*) cp "$1" "$2" ;;
	esac
}

default_cfgs="rx-64 rxm-64 rxb1-64 rxb-64 rxB-64 rxu-64 rx-512 rxb1-512 rxb-512 rxB-512 rx-16K rx-256K rr-64 tx-512 txb-64 txb-512 tls-512 tls-16K scale-rx scale-rxb scale-tx steer-64 steer-512"
all_cfgs="$default_cfgs tx-64"
cfgs=${only:-$default_cfgs}
for c in $cfgs; do
	case " $all_cfgs " in
	*" $c "*) ;;
	*) die "unknown configuration '$c' (known: $all_cfgs)" ;;
	esac
done
for p in $parsers; do
	case $p in
	cbpf | lenfield | check) ;;
	*) die "unknown parser '$p' (known: cbpf lenfield check)" ;;
	esac
done

payload=$out/payload
rm -rf "$payload"
mkdir -p "$payload"
cp "$top/tools/kcmperf" "$payload/"
install_ko "$module" "$payload/ours.ko"
install_ko "$distro" "$payload/distro.ko"

# The guest side (busybox sh).  Every run prints one line
#   R cfg=... tune=... who=ours|distro|user|raw rc=N <kcmperf's line>
cat >"$payload/bench-guest.sh" <<GUEST
#!/bin/sh
secs=$secs
rounds=$rounds
cfgs="$cfgs"
parsers="$parsers"
distro_parser=$distro_parser
full_check=$full_check
GUEST
cat >>"$payload/bench-guest.sh" <<'GUEST'
stall=3
# kcmperf ends itself (watchdog) well before this
limit=$(awk -v s="$secs" -v w="$stall" 'BEGIN { printf "%d", s * 1.2 + 2 * w + 30 }')
# scale-*: four of those, and 1000 connections set up and closed
slimit=$(awk -v l="$limit" 'BEGIN { printf "%d", 4 * l + 60 }')

# SO_RCVBUF is capped by rmem_max: the tuned runs ask for 8 MB
echo 33554432 >/proc/sys/net/core/rmem_max
echo 33554432 >/proc/sys/net/core/wmem_max
# scale-*: 1000 connections' buffers (up to 128 MB) must not put TCP
# under memory pressure, which drops and retransmits: 4x the default
# of a 1 GB guest
# (awk: a shell's read takes /proc a byte at a time, which sysctl files
# do not serve)
mem=$(awk '{ printf "%d %d %d", $1 * 4, $2 * 4, $3 * 4 }' /proc/sys/net/ipv4/tcp_mem)
echo "$mem" >/proc/sys/net/ipv4/tcp_mem

cur=none
use() {
	[ "$cur" = "$1" ] && return 0
	if grep -q '^kcm ' /proc/modules; then
		i=0
		while ! rmmod kcm 2>/dev/null; do
			i=$((i + 1))
			if [ $i -ge 100 ]; then
				echo "# bench: rmmod kcm failed: $(rmmod kcm 2>&1)"
				cur=stuck
				return 1
			fi
			sleep 0.1
		done
	fi
	if ! msg=$(insmod "./$1.ko" 2>&1); then
		echo "# bench: insmod $1.ko failed: $msg"
		cur=none
		return 1
	fi
	cur=$1
	echo "# bench: $1 kcm.ko loaded (taint '$(cat /sys/module/kcm/taint)')"
}

run() {
	cfg=$1 tune=$2 who=$3
	shift 3
	impl=$who
	mod=$who
	case $who in
	ours-*)
		# ours with another parser: who=ours-<parser>
		mod=ours
		set -- -P "${who#ours-}" "$@"
		;;
	esac
	lim=$limit
	case $cfg in
	scale-*)
		# the connections axis: KCM's own but for the user framer
		# reading the N receiving ends of scale-rx
		case $cfg:$who in scale-tx:user | *:raw) return ;; esac
		lim=$slimit
		;;
	esac
	case $cfg:$who in
	# kTLS: the distribution module reads beneath it
	tls-*:distro) return ;;
	# steering by key: ours (an extension) and the user framer
	steer-*:distro | steer-*:raw) return ;;
	esac
	case $who in
	ours | ours-* | distro)
		impl=kcm
		# rxm-*: KCM readers use recvmmsg(); the baselines batch anyway
		case $cfg in
		rxm-*) set -- "$@" -R 16 ;;
		# rxu-*: KCM readers use io_uring, 64 receives in flight
		rxu-*) set -- "$@" -U 64 ;;
		rxb-* | rxb1-* | rxB-* | scale-rxb | steer-*)
			# batched receive: an extension, ours only (and
			# another build of ours in the distro column)
			[ "$who" = distro ] && [ "$distro_parser" = distro ] &&
				return
			# rxB: 256 KB reads, as large as the user framer's
			case $cfg in
			rxb-* | rxb1-* | scale-rxb | steer-*) set -- "$@" -G 64 ;;
			*) set -- "$@" -G $((262144 / ${cfg#rxB-})) ;;
			esac
			;;
		esac
		# the parser that frames correctly on the distro module
		[ "$who" = distro ] && set -- "$@" -P "$distro_parser"
		if ! use "$mod"; then
			echo "R cfg=$cfg tune=$tune who=$who rc=nomod"
			return
		fi
		;;
	esac
	# --full-check: every payload byte, not samples
	[ "$full_check" = 1 ] && set -- "$@" -X
	out=$(timeout -s KILL "$lim" ./kcmperf -i "$impl" -t "$secs" \
		-W "$stall" "$@" 2>/tmp/err)
	rc=$?
	sed 's/^/# /; s/^# # /# /' /tmp/err
	# a line per kcmperf line (scale prints one per N)
	if [ -n "$out" ]; then
		echo "$out" | while IFS= read -r line; do
			echo "R cfg=$cfg tune=$tune who=$who rc=$rc $line"
		done
	fi
	# no line, or a scale run cut short (rc 0 or 1 end normally)
	if [ -z "$out" ] || { [ "$rc" != 0 ] && [ "$rc" != 1 ] &&
		[ "${cfg#scale-}" != "$cfg" ]; }; then
		echo "R cfg=$cfg tune=$tune who=$who rc=$rc"
	fi
}

echo "# bench: kernel $(uname -r), $(nproc) CPUs, ${secs}s per run, $rounds rounds"
# KCM goes through kTLS from 6.6 on
ktls=0
case $(uname -r) in
[0-5].* | 6.[0-5].*) ;;
*) ktls=1 ;;
esac
for cfg in $cfgs; do
	case $cfg in
	tls-*)
		if [ $ktls = 0 ]; then
			echo "# bench: $cfg: KCM does not go through kTLS before 6.6"
			continue
		fi
		args="-m rx -s ${cfg#tls-} -c 2 -k 2 -K"
		;;
	rx-*) args="-m rx -s ${cfg#rx-} -c 2 -k 2" ;;
	rxm-*) args="-m rx -s ${cfg#rxm-} -c 2 -k 2" ;;
	rxb-*) args="-m rx -s ${cfg#rxb-} -c 2 -k 2" ;;
	rxb1-*) args="-m rx -s ${cfg#rxb1-} -c 2 -k 1" ;;
	rxB-*) args="-m rx -s ${cfg#rxB-} -c 2 -k 2" ;;
	rxu-*) args="-m rx -s ${cfg#rxu-} -c 2 -k 2" ;;
	rr-*) args="-m rr -s ${cfg#rr-} -c 1 -k 1" ;;
	steer-*) args="-m steer -s ${cfg#steer-} -c 4 -k 4" ;;
	tx-*) args="-m tx -s ${cfg#tx-} -c 2 -k 2" ;;
	txb-*) args="-m tx -s ${cfg#txb-} -c 2 -k 2 -S 64" ;;
	# scale-rxb: the direction of scale-rx, read in batches (run())
	scale-*) d=${cfg#scale-}; args="-m scale -d ${d%b} -c 1,10,100,1000 -k 2 -s 64" ;;
	esac
	tunes="default tuned"
	case $cfg in
	tx-* | txb-*) tunes=default ;; # SO_RCVBUF of a KCM socket plays no part
	tls-*) tunes=default ;;
	scale-*) tunes=default ;;
	steer-*) tunes=default ;;
	esac
	for tune in $tunes; do
		tuning=
		[ $tune = tuned ] && tuning="-B 8M"
		r=1
		while [ $r -le "$rounds" ]; do
			if [ $((r % 2)) = 1 ]; then
				set -- ours user distro
				# an odd last round: raw TCP runs in it too
				[ "$r" = "$rounds" ] && set -- "$@" raw
			else
				set -- distro raw ours
			fi
			case $cfg in
			rx-* | rxb-* | rxb1-* | rxB-* | rr-*)
				for p in $parsers; do
					set -- "$@" "ours-$p"
				done
				;;
			esac
			for who; do
				# shellcheck disable=SC2086 # word lists
				run "$cfg" "$tune" "$who" $args $tuning
			done
			r=$((r + 1))
		done
	done
done
echo "# bench: done"
GUEST
chmod +x "$payload/bench-guest.sh"

vm_rc=0
# Both vCPUs run at once (multi-threaded TCG): the workloads are parallel.
# kTLS and its AES-GCM cipher for the tls rows (what a kernel lacks is
# skipped, as in vm.sh).
KCM_VM_TCG_THREAD=${KCM_VM_TCG_THREAD:-multi} \
"$top/tools/testing/vm/vm.sh" --module "$module" --no-module \
	--kernel-version "$kver" --extra-modules 'tls gcm ghash-generic ctr' \
	--payload "$payload" \
	--timeout "$timeout_s" --out "$out/vm" --run 'sh ./bench-guest.sh' ||
	vm_rc=$?

grep -a '^R ' "$out/vm/output.log" | tr -d '\r' >"$out/results.txt" || true
[ -s "$out/results.txt" ] || die "no results (VM exit $vm_rc); see $out/vm"

# How to run this bench again: make's line (it adds --module and --kver).
repro=
for a in "${args_given[@]}"; do
	case $a in
	"" | *[[:space:]]*) repro+=" \"$a\"" ;;
	*) repro+=" $a" ;;
	esac
done
repro=$(printf '%s\n' "$repro" |
	sed -E 's/ --(module|kver) [^ ]+//g; s/^ //')
commit=$(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo unknown)
git -C "$top" diff --quiet HEAD 2>/dev/null || commit="$commit (uncommitted changes)"
printf "Reproduce: at %s, make bench KVER=%s BENCH_ARGS='%s'\n" \
	"$commit" "$kver" "$repro" >"$out/table.txt"

# The table: medians per configuration, tuning and implementation.
awk -v secs="$secs" -v parsers="$parsers" -v idle_max=5 '
# rates with k and M, latencies in plain microseconds
function fmt(v, lat) {
	if (lat) return sprintf(v < 100 ? "%.1f" : "%.0f", v)
	if (v >= 1e7) return sprintf("%.1fM", v / 1e6)
	if (v >= 1e6) return sprintf("%.2fM", v / 1e6)
	if (v >= 1e4) return sprintf("%.0fk", v / 1e3)
	if (v >= 1e3) return sprintf("%.1fk", v / 1e3)
	return sprintf("%.0f", v)
}
# the median of a[1..n] (sorts a)
function amedian(a, n,    i, j, t) {
	for (i = 2; i <= n; i++)
		for (j = i; j > 1 && a[j - 1] > a[j]; j--) {
			t = a[j]; a[j] = a[j - 1]; a[j - 1] = t
		}
	if (n % 2) return a[(n + 1) / 2]
	return (a[n / 2] + a[n / 2 + 1]) / 2
}
# the median of metric array @arr over the runs of @key
function median_of(key, arr,    n, i, a) {
	n = nv[key]
	for (i = 1; i <= n; i++) a[i] = arr[key, i]
	return amedian(a, n)
}
# value of a cell in @arr, or "" when a run failed (text in cell[])
function cellv_of(row, who, arr,    key) {
	key = row SUBSEP who
	if (fails[key] || !nv[key]) return ""
	return median_of(key, arr)
}
function cellv(row, who) {
	return cellv_of(row, who, val)
}
# the most idle run of a cell, in % of the guest CPU, or "" if unknown
function maxidle(row, who,    key, i, m) {
	key = row SUBSEP who
	m = ""
	for (i = 1; i <= nv[key]; i++)
		if (idle[key, i] != "" && (m == "" || idle[key, i] > m))
			m = idle[key, i]
	return m
}
# "!" for a baseline of a throughput row that left more than idle_max %
# of the CPU idle in one of its runs: it was not busy receiving
function mark(row, who,    m) {
	if (who != "user" && who != "raw") return ""
	if (row ~ /^rr/ || row !~ (SUBSEP "1$")) return ""
	m = maxidle(row, who)
	return m != "" && m > idle_max ? "!" : ""
}
function celltext(row, who, lat,    key, t, m) {
	key = row SUBSEP who
	if (!runs[key]) return "-"
	if (fails[key]) {
		t = "FAIL"
		if (fails[key] < runs[key])
			t = t sprintf(" %d/%d", fails[key], runs[key])
		return t " " why[key]
	}
	t = fmt(median_of(key, val), lat)
	# the first metric of a row (msg/s, req/s) shows the idle share
	if (row ~ (SUBSEP "1$") && (m = maxidle(row, who)) != "")
		t = t sprintf(" %.0f%%", m) mark(row, who)
	return t
}
function ratio(a, b) {
	if (a == "" || b == "" || b == 0) return "-"
	return sprintf("%.2f", a / b)
}
# ours/@who of a row: the median over @who'"'"'s runs of ours'"'"' run nearest
# to it in the bench'"'"'s order (the same round) over it, so that a host
# whose speed drifts during the bench moves both sides of each ratio
function pratio(row, who) {
	return marked(pratio_of(row, "ours", who, val), row, who)
}
# ratio @r against @who'"'"'s cell of @row, marked as that cell is
function marked(r, row, who) {
	return r == "-" ? r : r mark(row, who)
}
# the same for @mine, another column of ours, over @who, of metric @arr
function pratio_of(row, mine, who, arr,    ko, kw, i, j, best, bd, d, n, a) {
	ko = row SUBSEP mine; kw = row SUBSEP who
	if (fails[ko] || fails[kw] || !nv[ko] || !nv[kw]) return "-"
	n = 0
	for (i = 1; i <= nv[kw]; i++) {
		if (arr[kw, i] == 0) return "-"
		best = 0
		for (j = 1; j <= nv[ko]; j++) {
			d = seq[ko, j] - seq[kw, i]
			if (d < 0) d = -d
			if (!best || d < bd) { best = j; bd = d }
		}
		a[++n] = arr[ko, best] / arr[kw, i]
	}
	return sprintf("%.2f", amedian(a, n))
}
# the median test-run time of the parser of (@row, @who), or "-"
function ptext(row, who,    n, i, a) {
	n = pnn[row, who]
	if (!n) return "-"
	for (i = 1; i <= n; i++) a[i] = pnv[row, who, i]
	return sprintf("%.0f", amedian(a, n))
}
function cputext(row, who,    key) {
	key = row SUBSEP who
	if (!runs[key]) return "-"
	if (fails[key] || !nv[key]) return "FAIL"
	return sprintf("%.0f", median_of(key, cpu))
}
# the connections axis has a table of its own (below)
/^R cfg=scale-/ { next }
/^R / {
	delete f
	for (i = 2; i <= NF; i++) {
		k = $i; sub(/=.*/, "", k)
		v = $i; sub(/^[^=]*=/, "", v)
		f[k] = v
	}
	row = f["cfg"] SUBSEP f["tune"]
	if (!(row in seen)) { seen[row] = 1; rows[++nrows] = row }
	w = f["who"]
	if (f["parser_ns"] != "") pnv[row, w, ++pnn[row, w]] = f["parser_ns"] + 0
	n_metrics = (f["cfg"] ~ /^rr/) ? 4 : 1
	for (m = 1; m <= n_metrics; m++) {
		r = row SUBSEP m
		key = r SUBSEP w
		runs[key]++
		if (f["result"] != "ok") {
			fails[key]++
			t = ""
			if (f["rc"] == "nomod") t = "no module"
			else if (f["rc"] == 137) t = "killed"
			else if (f["result"] == "") t = "rc=" f["rc"]
			else if (f["bad"] + 0 > 0) t = "bad=" f["bad"]
			else if (f["stalled"] + 0 == 1) t = "stalled"
			else t = "lost=" f["lost"]
			# SO_ERROR of a connection; upstream can post a number
			# that is no errno at all
			if (f["err"] ~ /^-?E/) t = t " " f["err"]
			else if (f["err"] != "-" && f["err"] != "") t = t " err#"
			# the first reason stays
			if (why[key] == "") why[key] = t
			continue
		}
		if (n_metrics == 1) v = f["msgs_per_s"]
		else if (m == 1) v = f["rps"]
		else if (m == 2) v = f["p50_us"]
		else if (m == 3) v = f["p99_us"]
		else v = f["p999_us"]
		val[key, ++nv[key]] = v + 0
		seq[key, nv[key]] = NR
		# a number, or "" from a kcmperf that does not say
		idle[key, nv[key]] = f["idle"] == "" ? "" : f["idle"] + 0
		cpu[key, nv[key]] = f["cpu_ns_per_msg"] + 0
		if (n_metrics == 1) mb[key, nv[key]] = f["mb_per_s"] + 0
	}
}
END {
	if (!nrows) exit
	names[1] = "msg/s"; rrn[1] = "req/s"; rrn[2] = "p50 us"
	rrn[3] = "p99 us"; rrn[4] = "p99.9 us"
	fmt_row = "%-8s %-7s %-8s %-23s %-23s %-23s %-23s %6s %6s %6s %9s\n"
	printf fmt_row, "config", "tuning", "metric", "ours", "distro", "user",
	       "raw", "o/dist", "o/user", "o/raw", "ours MB/s"
	for (i = 1; i <= nrows; i++) {
		split(rows[i], rc, SUBSEP)
		n_metrics = (rc[1] ~ /^rr/) ? 4 : 1
		for (m = 1; m <= n_metrics; m++) {
			r = rows[i] SUBSEP m
			name = n_metrics == 1 ? names[1] : rrn[m]
			o = cellv(r, "ours")
			omb = "-"
			if (n_metrics == 1 && o != "")
				omb = sprintf("%.1f", median_of(r SUBSEP "ours", mb))
			lat = m > 1
			if (mark(r, "user") mark(r, "raw") != "") nmarked++
			printf fmt_row, rc[1], rc[2], name, celltext(r, "ours", lat),
			       celltext(r, "distro", lat), celltext(r, "user", lat),
			       celltext(r, "raw", lat), pratio(r, "distro"),
			       pratio(r, "user"), pratio(r, "raw"), omb
		}
	}
	print ""
	print "Medians of " secs " s runs (ours and distro alternating A B B A)."
	print "Ratios are ours/other: above 1 is better for msg/s and req/s,"
	print "below 1 is better for latency; each is the median, over the"
	print "other column'"'"'s runs, of ours'"'"' run of the same round over it"
	print "(paired: a host that drifts moves both).  N%: the guest'"'"'s idle"
	print "CPU share (both vCPUs, over the window) of the cell'"'"'s most idle"
	print "run.  !: a baseline that left more than " idle_max "% idle in a run"
	print "of a throughput row: it was held back by something else than"
	print "receiving, and a ratio against it is no result (request/response"
	print "is one request at a time, idle by design, never marked)."
	print "FAIL n/m: n of m runs lost, damaged or stalled messages; such a"
	print "cell has no number.  EXXX: the error posted on a connection"
	print "(err#: not an errno); every run in full (CPU use, MB/s, counts)"
	print "is in results.txt."
	if (nmarked) print "Rows with a baseline marked !: " nmarked "."
	print ""
	print "CPU per message: ns of busy CPU (both vCPUs, softirqs included) over"
	print "the window'"'"'s messages, medians; ratios ours/other, paired as above"
	print "(below 1: ours costs less):"
	fmt_c = "%-8s %-7s %9s %9s %9s %9s %7s %7s %7s\n"
	printf fmt_c, "config", "tuning", "ours", "distro", "user", "raw",
	       "o/dist", "o/user", "o/raw"
	for (i = 1; i <= nrows; i++) {
		split(rows[i], rc, SUBSEP)
		if (rc[1] ~ /^rr/) continue
		r = rows[i] SUBSEP 1
		printf fmt_c, rc[1], rc[2], cputext(r, "ours"),
		       cputext(r, "distro"), cputext(r, "user"), cputext(r, "raw"),
		       pratio_of(r, "ours", "distro", cpu),
		       pratio_of(r, "ours", "user", cpu),
		       pratio_of(r, "ours", "raw", cpu)
	}
	np = split(parsers, pl, " ")
	if (!np) exit
	print ""
	print "Parsers of ours: the documented eBPF one (ebpf), classic BPF and the"
	print "built-in length field (extensions), and check, an eBPF parser that"
	print "checks each header against an array map; msg/s, their ratios to"
	print "ebpf and (paired) to the user framer:"
	fmt_p = "%-8s %-7s %-8s %-14s %-14s %-14s %-14s %7s %7s %7s %7s %7s %7s\n"
	printf fmt_p, "config", "tuning", "metric", "ebpf", "cbpf", "lenfield",
	       "check", "cbpf/e", "lenf/e", "chk/e", "cbpf/u", "lenf/u", "chk/u"
	for (i = 1; i <= nrows; i++) {
		split(rows[i], rc, SUBSEP)
		if (rc[1] !~ /^(rx|rxb|rxb1|rxB|rr)-/) continue
		n_metrics = (rc[1] ~ /^rr/) ? 4 : 1
		for (m = 1; m <= n_metrics; m++) {
			r = rows[i] SUBSEP m
			name = n_metrics == 1 ? names[1] : rrn[m]
			lat = m > 1
			e = cellv(r, "ours")
			printf fmt_p, rc[1], rc[2], name, celltext(r, "ours", lat),
			       celltext(r, "ours-cbpf", lat),
			       celltext(r, "ours-lenfield", lat),
			       celltext(r, "ours-check", lat),
			       ratio(cellv(r, "ours-cbpf"), e),
			       ratio(cellv(r, "ours-lenfield"), e),
			       ratio(cellv(r, "ours-check"), e),
			       marked(pratio_of(r, "ours-cbpf", "user", val), r, "user"),
			       marked(pratio_of(r, "ours-lenfield", "user", val), r, "user"),
			       marked(pratio_of(r, "ours-check", "user", val), r, "user")
		}
	}
	print ""
	print "What a parser costs: a run of it alone (BPF_PROG_TEST_RUN in the"
	print "guest, ns), and the CPU time of a message with it (ns, medians;"
	print "check-ebpf: what checking each header adds to a message):"
	fmt_q = "%-8s %-7s %8s %8s %9s %9s %9s %9s %10s\n"
	printf fmt_q, "config", "tuning", "run ebpf", "run chk", "cpu ebpf",
	       "cpu cbpf", "cpu lenf", "cpu chk", "check-ebpf"
	for (i = 1; i <= nrows; i++) {
		split(rows[i], rc, SUBSEP)
		if (rc[1] !~ /^(rx|rxb|rxb1|rxB)-/) continue
		r = rows[i] SUBSEP 1
		e = cellv_of(r, "ours", cpu)
		c = cellv_of(r, "ours-check", cpu)
		d = (e != "" && c != "") ? sprintf("%+.0f", c - e) : "-"
		printf fmt_q, rc[1], rc[2], ptext(rows[i], "ours"),
		       ptext(rows[i], "ours-check"), cputext(r, "ours"),
		       cputext(r, "ours-cbpf"), cputext(r, "ours-lenfield"),
		       cputext(r, "ours-check"), d
	}
}' "$out/results.txt" >>"$out/table.txt"

# The connections axis: per configuration and module, one column per N.
awk '
function fmt(v) {
	if (v >= 1e7) return sprintf("%.1fM", v / 1e6)
	if (v >= 1e6) return sprintf("%.2fM", v / 1e6)
	if (v >= 1e4) return sprintf("%.0fk", v / 1e3)
	if (v >= 1e3) return sprintf("%.1fk", v / 1e3)
	return sprintf("%.0f", v)
}
function median(key,    n, i, j, t, a) {
	n = nv[key]
	for (i = 1; i <= n; i++) a[i] = val[key, i]
	for (i = 2; i <= n; i++)
		for (j = i; j > 1 && a[j - 1] > a[j]; j--) {
			t = a[j]; a[j] = a[j - 1]; a[j - 1] = t
		}
	if (n % 2) return a[(n + 1) / 2]
	return (a[n / 2] + a[n / 2 + 1]) / 2
}
# the median of metric m of (cfg, who) at n connections, or ""
function cellv(cw, n, m,    k) {
	k = cw SUBSEP n
	if (fails[k] || !nv[k SUBSEP m]) return ""
	return median(k SUBSEP m)
}
function celltext(cw, n, m,    k, v, t) {
	k = cw SUBSEP n
	if (!runs[k]) return runfail[cw] != "" ? "FAIL " runfail[cw] : "-"
	if (fails[k]) {
		t = "FAIL"
		if (fails[k] < runs[k]) t = t sprintf(" %d/%d", fails[k], runs[k])
		return t " " why[k]
	}
	v = cellv(cw, n, m)
	if (v == "") return "-"
	if (key[m] == "fill") return sprintf("%.3f", v)
	if (key[m] ~ /^cpu_|^conns_used$/) return sprintf("%d", v)
	return fmt(v)
}
function ratio(a, b) {
	if (a == "" || b == "" || b == 0) return "-"
	return sprintf("%.2f", a / b)
}
# ours/@w, N by N, for the first @nm metrics
function versus(cfg, w, name, nm,   m, i, line) {
	if (!((cfg SUBSEP "ours") in seenw) || !((cfg SUBSEP w) in seenw))
		return
	for (m = 1; m <= nm; m++) {
		line = sprintf("%-9s %-7s %-14s", cfg, name, label[m])
		for (i = 1; i <= nn; i++)
			line = line sprintf(" %-14s",
				ratio(cellv(cfg SUBSEP "ours", ns[i], m),
				      cellv(cfg SUBSEP w, ns[i], m)))
		print line sprintf(" %8s", "-")
	}
}
BEGIN {
	nm = split("msgs_per_s cpu_ns_per_msg cpu_all_ns_per_msg attach_us close_kcm_us close_tcp_us conns_used conn_msgs_min conn_msgs_max fill", key, " ")
	split("msg/s|cpu ns/msg|cpu all ns/msg|attach us|close kcm us|close tcp us|conns used|msgs/conn min|msgs/conn max|unread/msg", label, "|")
}
/^R cfg=scale-/ {
	delete f
	for (i = 2; i <= NF; i++) {
		k = $i; sub(/=.*/, "", k)
		v = $i; sub(/^[^=]*=/, "", v)
		f[k] = v
	}
	c = f["cfg"]; w = f["who"]; cw = c SUBSEP w
	if (!(c in seenc)) { seenc[c] = 1; cfgs[++ncfg] = c }
	if (!(cw in seenw)) { seenw[cw] = 1; whos[c, ++nw[c]] = w }
	if (f["conns"] == "") {
		# no line for a phase: the run ended early
		t = "rc=" f["rc"]
		if (f["rc"] == "nomod") t = "no module"
		else if (f["rc"] == 137) t = "killed"
		if (runfail[cw] == "") runfail[cw] = t
		next
	}
	n = f["conns"] + 0
	if (!(n in seenn)) { seenn[n] = 1; ns[++nn] = n }
	k = cw SUBSEP n
	runs[k]++
	if (f["result"] != "ok") {
		fails[k]++
		t = "lost=" f["lost"]
		if (f["bad"] + 0 > 0) t = "bad=" f["bad"]
		else if (f["stalled"] + 0 == 1) t = "stalled"
		if (f["err"] ~ /^-?E/) t = t " " f["err"]
		if (why[k] == "") why[k] = t
		next
	}
	for (m = 1; m <= nm; m++)
		if (f[key[m]] != "") val[k SUBSEP m, ++nv[k SUBSEP m]] = f[key[m]] + 0
}
END {
	if (!ncfg) exit
	for (i = 2; i <= nn; i++)
		for (j = i; j > 1 && ns[j - 1] > ns[j]; j--) {
			t = ns[j]; ns[j] = ns[j - 1]; ns[j - 1] = t
		}
	print ""
	print "Connections: 64 B messages over N TCP connections on one mux of 2 KCM"
	print "sockets (scale-rx: KCM receives; scale-rxb: the same, read with"
	print "KCM_RECV_BATCH 64; scale-tx: KCM sends, the peers read):"
	hdr = sprintf("%-9s %-7s %-14s", "config", "who", "metric")
	for (i = 1; i <= nn; i++) hdr = hdr sprintf(" %-14s", "N=" ns[i])
	print hdr sprintf(" %8s", "N" ns[nn] "/N" ns[1])
	for (c = 1; c <= ncfg; c++) {
		cfg = cfgs[c]
		for (x = 1; x <= nw[cfg]; x++) {
			w = whos[cfg, x]; cw = cfg SUBSEP w
			for (m = 1; m <= nm; m++) {
				line = sprintf("%-9s %-7s %-14s", cfg, w, label[m])
				for (i = 1; i <= nn; i++)
					line = line sprintf(" %-14s", celltext(cw, ns[i], m))
				r = ratio(cellv(cw, ns[nn], m), cellv(cw, ns[1], m))
				# unread/msg: a difference, no ratio
				if (key[m] == "fill") r = "-"
				print line sprintf(" %8s", r)
			}
		}
		# ours against the distribution module, N by N: rate, CPU
		# and times (and the user framer: rate and CPU)
		versus(cfg, "distro", "o/dist", 6)
		versus(cfg, "user", "o/user", 3)
	}
	print ""
	print "cpu ns/msg: CPU time of the whole guest (/proc/stat busy, softirqs"
	print "included) over the messages of the window; cpu all: the same over"
	print "the whole run, warm-up to the last message read, over all of its"
	print "messages (nothing is left in the buffers: where the readers are"
	print "slower than the writers, the buffers of 1000 connections fill for"
	print "tens of seconds, and the window does work for messages it does"
	print "not read); unread/msg: messages the window sent and did not read,"
	print "over those it read; close kcm: closing the"
	print "KCM sockets, the last of which takes the mux and its psocks down;"
	print "close tcp: then closing the N TCP sockets.  msgs/conn: messages"
	print "each connection carried over the run.  user (scale-rx,"
	print "scale-rxb): the same writers, read by two epoll threads framing"
	print "the N receiving ends."
	print "o/dist, o/user: ours/other (above 1 is better for msg/s, below 1"
	print "for the rest)."
}' "$out/results.txt" >>"$out/table.txt"
cat "$out/table.txt"

status=0
if [ "$vm_rc" = 2 ] || [ "$vm_rc" = 3 ]; then
	echo "bench: the VM failed (exit $vm_rc): see $out/vm" >&2
	status=2
elif grep -E 'who=(ours|ours-[a-z]+|user|raw) ' "$out/results.txt" |
	grep -qv 'result=ok'; then
	echo "bench: runs of ours or of a baseline failed: see $out/results.txt" >&2
	status=1
fi
echo "bench: results in $out/results.txt, table in $out/table.txt"
exit "$status"
