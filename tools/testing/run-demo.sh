#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# make run: boot the VM with the module and run the demo program the way an
# application would use KCM.
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
cp "$top/tools/kcm_demo" "$payload/"
cat >"$payload/demo.sh" <<'GUEST'
#!/bin/sh
echo "# module: $(grep '^kcm ' /proc/modules)"
./kcm_demo
GUEST
chmod +x "$payload/demo.sh"

vm_args=(--module "$module" --payload "$payload" --timeout 300
	 --out "$build/vm-demo"
	 --run ./demo.sh)
[ -n "$kver" ] && vm_args+=(--kernel-version "$kver")

exec "$top/tools/testing/vm/vm.sh" "${vm_args[@]}"
