#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# make run: boot the VM with the module and show the main job end to end:
# the demo program, then the examples of tools/examples (a pre-forked
# worker server fed over three connections, a sharded server whose
# requests KCM steers by account, a client that survives a connection
# reset, the parser built by clang and loaded by libbpf), each with
# kcmstat's view of its mux while it runs.
#
#   run-demo.sh --module KO [--kver VER]
set -euo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
build=$top/.build
module=
kver=

while [ $# -gt 0 ]; do
	case $1 in
	--module) module=$2; shift 2 ;;
	--kver) kver=$2; shift 2 ;;
	*) echo "usage: $0 --module KO [--kver VER]" >&2; exit 2 ;;
	esac
done

payload=$build/demo
rm -rf "$payload"
mkdir -p "$payload"
cp "$top/tools/kcm_demo" "$top/tools/kcmstat" "$payload/"
make -s -C "$top/tools/examples" install INSTALL_PATH="$payload/examples" >/dev/null
cat >"$payload/demo.sh" <<'GUEST'
#!/bin/sh
echo "# module: $(grep '^kcm ' /proc/modules)"
./kcm_demo || exit 1
cd examples || exit 1
echo
echo "### prefork_server: 4 workers share one mux, 3 TCP connections feed it"
./prefork_server -w 4 -c 3 -n 300 -k ../kcmstat || exit 1
echo
echo "### sharded_server: 4 workers each own a shard of accounts; KCM steers by account"
./sharded_server -w 4 -c 8 -n 4000 -a 64 -k ../kcmstat || exit 1
echo
echo "### failover_client: one of two connections is reset halfway"
./failover_client -n 200 -k ../kcmstat || exit 1
echo
echo "### bpf_parser: the parser from clang, loaded by libbpf; then as raw instructions"
./bpf_parser -o parser_len.bpf.o && ./bpf_parser -r
GUEST
chmod +x "$payload/demo.sh"

vm_args=(--module "$module" --payload "$payload" --timeout 300
	 --out "$build/vm-demo"
	 --run ./demo.sh)
[ -n "$kver" ] && vm_args+=(--kernel-version "$kver")

exec "$top/tools/testing/vm/vm.sh" "${vm_args[@]}"
