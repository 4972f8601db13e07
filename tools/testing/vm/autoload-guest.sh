#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Guest side of tools/testing/dkms-check.sh: the VM booted with no kcm
# module loaded and the DKMS-installed module tree under /lib/modules
# (ours in updates/, the kernel's own in kernel/).  socket(AF_KCM) must
# make the kernel run modprobe for net-pf-41 and load ours.  Prints TAP.
#
# Environment: KCM_WANT_VERSION, KCM_WANT_SRCVERSION (of the installed
# module, from modinfo on the host).

n=0
fail=0
t() {
	# $1: 0 = pass; $2: description
	n=$((n + 1))
	if [ "$1" = 0 ]; then
		echo "ok $n autoload: $2"
	else
		echo "not ok $n autoload: $2"
		fail=1
	fi
}

echo "1..6"
kver=$(uname -r)
[ ! -e /sys/module/kcm ]
t $? "no kcm module loaded before socket()"

dep=$(grep -E '(^|/)kcm\.ko(\.[a-z]+)?:' "/lib/modules/$kver/modules.dep")
echo "# modules.dep: $dep"
case $dep in
updates/*) r=0 ;;
*) r=1 ;;
esac
t $r "modules.dep of $kver resolves kcm to updates/"

out=$(./kcm_helper probe 2>&1)
t $? "socket(AF_KCM) succeeds with no explicit insmod ${out:+($out)}"

[ -d /sys/module/kcm ]
t $? "/sys/module/kcm exists after socket()"

v=$(cat /sys/module/kcm/version 2>/dev/null)
s=$(cat /sys/module/kcm/srcversion 2>/dev/null)
echo "# loaded: version '$v' srcversion '$s'; want '$KCM_WANT_VERSION' '$KCM_WANT_SRCVERSION'"
[ -n "$s" ] && [ "$v" = "$KCM_WANT_VERSION" ] && [ "$s" = "$KCM_WANT_SRCVERSION" ]
t $? "the loaded kcm is the DKMS-built one (version and srcversion match)"

taint=$(cat /sys/module/kcm/taint 2>/dev/null)
[ -r /proc/net/kcm_ext ] && case $taint in *O*) true ;; *) false ;; esac
t $? "it is out of tree (taint '$taint') and has /proc/net/kcm_ext"

exit $fail
