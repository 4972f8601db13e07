#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# The programs of tools/examples/ (staged as ../examples), each run as a
# newcomer would and judged by its own checks (message counts and bytes
# against what it sent; exit status 0) and by the summary line it prints.
#   prefork_server   4 workers share one mux by clones; 3 connections
#   failover_client  one of two connections is reset halfway
#   sharded_server   4 worker processes own shards of accounts; KCM steers
#                    each request to its account's worker (KCM_RECV_KEY)
#   uring_server     one thread serves the mux through io_uring: 16
#                    receives in flight, a send per request, then a cancel
#   bpf_parser       the parser from clang, loaded by libbpf; then the
#                    same parser as raw instructions
#   kcm_demo         the demo of make run (staged as ../kcm_demo): its two
#                    connections told apart by fd and TCP endpoints, and
#                    every request received whole, naming its connection

set -u
# make check stages the examples beside the suite; the kselftest copy in a
# kernel tree carries the suite alone (they are tools/examples/ here).
if [ ! -d "$(dirname "$0")/../examples" ]; then
	echo "1..0 # SKIP the examples are not staged beside the suite (make check stages them)"
	exit 4
fi
cd "$(dirname "$0")/../examples" || exit 1
n=0
failed=0

# On the distribution's module (KCM_MODULE=distro), examples that rely on
# behaviour where we fix upstream are expected to fail: "not ok ... # TODO"
# with the reason (counted as passed); passing there is a failure.
distro=
[ "${KCM_MODULE:-}" = distro ] && distro=1
SEGMENT="messages sharing a TCP segment are mis-framed by upstream"

# $1: name; $2: a line the output must contain; $3: why it differs on the
# distro module ('' = it does not); then the command
run() {
	name=$1
	want=$2
	differs=$3
	shift 3
	n=$((n + 1))
	out=$("$@" 2>&1)
	rc=$?
	echo "$out" | sed 's/^/# /'
	case $out in
	*"$want"*) found=1 ;;
	*) found=0 ;;
	esac
	if [ "$rc" = 4 ]; then
		# 4: the kselftest skip (uring_server without io_uring)
		echo "ok $n examples: $name # SKIP $(printf '%s\n' "$out" | tail -n 1)"
	elif [ -n "$distro" ] && [ -n "$differs" ]; then
		if [ "$rc" = 0 ] && [ "$found" = 1 ]; then
			echo "not ok $n examples: $name # passed on the distro module, recorded to differ: $differs"
			failed=$((failed + 1))
		else
			echo "not ok $n examples: $name # TODO upstream: $differs"
		fi
	elif [ "$rc" = 0 ] && [ "$found" = 1 ]; then
		echo "ok $n examples: $name"
	else
		echo "not ok $n examples: $name (exit $rc)"
		failed=$((failed + 1))
	fi
}

# The demo's output: two attach lines with different fds and client
# endpoints, and its 8 requests, 0 to 7, each received once, each naming
# the client end of one of those connections, 4 on each.
demo_ok() {
	printf '%s\n' "$1" | awk '
	/^ioctl\(SIOCKCMATTACH\) connection [0-9]+: TCP fd [0-9]+, / {
		fd = $6; sub(",", "", fd)
		ep = $10; sub(",", "", ep)
		if (fd in fds || ep in eps) bad = 1
		fds[fd] = 1; eps[ep] = 0; conns++
	}
	/^worker [0-9]+: recv\(\) = / {
		n = split($0, w, " ")
		ep = w[n]; sub("\"$", "", ep)
		req = w[n - 2]
		if (!(ep in eps) || req in reqs) bad = 1
		eps[ep]++; reqs[req] = 1; got++
	}
	END {
		for (ep in eps)
			if (eps[ep] != 4) bad = 1
		exit !(conns == 2 && got == 8 && !bad)
	}'
}

echo "TAP version 13"
echo "1..9"
run "prefork_server: 4 workers receive all 300 requests over 3 connections" \
	"server: 4 workers received 300 of 300 requests" "$SEGMENT" \
	./prefork_server -w 4 -c 3 -n 300
run "prefork_server: 8 workers, 1 connection, 1000 requests" \
	"server: 8 workers received 1000 of 1000 requests" "$SEGMENT" \
	./prefork_server -w 8 -c 1 -n 1000
run "sharded_server: 4 workers own 64 accounts, 4000 requests over 8 connections steered by account" \
	"server: 4 workers served 4000 of 4000 requests for 64 of 64 accounts, each account at one worker, 0 bad" \
	"KCM_RECV_KEY fails with ENOPROTOOPT" ./sharded_server -w 4 -c 8 -n 4000 -a 64
run "uring_server: io_uring receives 1000 whole requests over 3 connections" \
	"server: io_uring received 1000 of 1000 requests, 210700 of 210700 bytes, 1000 replies, 0 bad, 15 receives cancelled" \
	"$SEGMENT" ./uring_server -q 16 -c 3 -n 1000
run "tls_server: 4 worker threads serve 300 requests over 3 kernel TLS connections" \
	"server: 4 workers received 300 of 300 requests over TLS" \
	"the distro module frames kTLS records it does not decrypt" \
	./tls_server -w 4 -c 3 -n 300
run "failover_client: 200 messages survive a connection reset" \
	"server: phase 2: 100 messages, all on connection" '' \
	./failover_client -n 200
run "bpf_parser: clang-built parser loaded with libbpf frames 150 messages" \
	"bpf_parser (parser_len.bpf.o): 150 messages, 219730 bytes" "$SEGMENT" \
	./bpf_parser -o parser_len.bpf.o
run "bpf_parser -r: the same parser as raw instructions, same result" \
	"bpf_parser (raw instructions): 150 messages, 219730 bytes" "$SEGMENT" \
	./bpf_parser -r

n=$((n + 1))
out=$(../kcm_demo 2>&1)
rc=$?
echo "$out" | sed 's/^/# /'
if [ "$rc" = 0 ] && demo_ok "$out"; then
	echo "ok $n examples: kcm_demo: two connections told apart by fd and endpoints, 8 requests whole"
else
	echo "not ok $n examples: kcm_demo: two connections told apart by fd and endpoints, 8 requests whole (exit $rc)"
	failed=$((failed + 1))
fi
[ "$failed" = 0 ]
