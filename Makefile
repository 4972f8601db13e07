# SPDX-License-Identifier: GPL-2.0-only
#
# Out-of-tree entry point.  Kbuild (not this file) describes the module, so
# the same sources build in the kernel tree as net/kcm.
#
#   make            build ./kcm.ko against KDIR
#   make check      build, boot the distro kernel in qemu, run the selftests
#   make run        boot the VM and run the demo program
#   make bench      ours vs the distro's kcm.ko vs user-space framing vs raw
#                   TCP, in one VM boot (~5 min in TCG); BENCH_ARGS=... are
#                   options of tools/testing/bench.sh
#   make profile    perf inside the VM during one kcmperf workload;
#                   PROFILE_ARGS=... are options of tools/testing/profile.sh
#   make check-debug the selftests on a KASAN/lockdep/kmemleak kernel built
#                   from linux-source-6.1 with our net/kcm (cached build;
#                   DEBUG_LINE=6.12 or 6.12-rt: from linux-source-6.12;
#                   DEBUG_LINE=7.2: from linux-source-7.2 of the Debian 13
#                   root)
#   make debug-kernel  only build (or reuse) that kernel and its kcm.ko
#   make lint       checkpatch --strict, W=1, sparse, kernel-doc, shellcheck;
#                   then W=1 against every kernel that has headers
#   make install    kcm.ko into /lib/modules/KVER/updates/ (INSTALL_MOD_PATH
#                   prefixes it) then depmod; kcmstat and the kcm(7) man
#                   page under $(DESTDIR)$(PREFIX).  make uninstall undoes it.
#   make deps       apt-get install what all of the above needs, and make
#                   the Debian 13 root of the 7.x kernels
#   make kselftest-tree KSRC=<kernel source>  the selftests into that tree
#                   as tools/testing/selftests/net/kcm (and our UAPI
#                   header as its include/uapi/linux/kcm.h)

# The kernel (tools/testing/kver.sh, which prints its choice): KVER=<version>
# picks one, of this machine or of the Debian 13 root (KVER=7.3.4+deb13-amd64);
# KDIR=<headers or build tree> builds against any other.  Unset,
# a plain build uses the running kernel's headers when they exist, and the
# rig (check, run, bench, profile) a kernel whose image and headers are
# both installed.  Those targets install missing packages first and only
# then choose, in a second make (the *-on targets).
KDIR_GIVEN := $(KDIR)
# /lib/modules/<version>/build names its kernel (Debian's kernel.release
# there holds the upstream version); another tree says it in kernel.release.
KVER ?= $(strip $(if $(filter /lib/modules/%/build,$(KDIR_GIVEN)),\
	$(patsubst /lib/modules/%/build,%,$(KDIR_GIVEN)),\
	$(if $(KDIR_GIVEN),$(shell cat $(KDIR_GIVEN)/include/config/kernel.release 2>/dev/null))))
RIG_GOALS := check run bench profile lint
ifeq ($(KDIR),)
ifeq ($(filter $(RIG_GOALS),$(MAKECMDGOALS)),)
KVER := $(shell tools/testing/kver.sh build $(KVER))
endif
KDIR = /lib/modules/$(KVER)/build
endif
# A kernel of the Debian 13 root (tools/testing/trixie-root.sh) is built
# inside that root, where KDIR is the same path.  KROOT: that root, empty
# for this machine's kernels and for a KDIR given (the rig's *-on targets
# are given both).
ifeq ($(origin KROOT),undefined)
KROOT := $(if $(KDIR_GIVEN),,$(if $(KVER),$(shell tools/testing/kver.sh root $(KVER) 2>/dev/null)))
endif
IN_ROOT := $(if $(KROOT),tools/testing/trixie-root.sh run)
# ours | distro | /path/to/kcm.ko: the module the VM tests load
KCM_MODULE ?= ours

BUILD := $(CURDIR)/.build
VM := tools/testing/vm/vm.sh
TIMEOUT ?= 900
# DEBUG_LINE=6.12: the debug kernel from linux-source-6.12; 6.12-rt: the same
# with PREEMPT_RT; 7.2: from linux-source-7.2 (trixie-backports)
DEBUG_LINE ?= 6.1
DEBUG := $(BUILD)/debug$(if $(filter-out 6.1,$(DEBUG_LINE)),-$(DEBUG_LINE))
DEBUG_TIMEOUT ?= 2700
# KCM_TESTS='kcm_netem kcm_examples.sh': only these selftests (check,
# check-debug)
KCM_TESTS ?=
# BENCH_ARGS='--only rx-64 --secs 3': options of tools/testing/bench.sh
BENCH_ARGS ?=
# PROFILE_ARGS=...: options of tools/testing/profile.sh
PROFILE_ARGS ?=

.PHONY: all modules clean check run lint deps deps-check selftests tools \
	debug-kernel check-debug bench profile install uninstall \
	check-on run-on bench-on profile-on lint-on kselftest-tree

all: modules

modules:
	@test -d "$(KROOT)$(KDIR)" || { echo "kcm: no kernel headers at '$(KROOT)$(KDIR)':" \
		"apt-get install linux-headers-amd64 (or run 'make deps')" >&2; exit 1; }
	$(IN_ROOT) $(MAKE) -C $(KDIR) M=$(CURDIR) modules

clean:
	-$(IN_ROOT) $(MAKE) -C $(KDIR) M=$(CURDIR) clean
	$(MAKE) -C selftests clean
	$(MAKE) -C tools clean
	rm -rf $(BUILD)

deps:
	tools/deps.sh install

# updates/ is searched by depmod before kernel/: modprobe and the net-pf-41
# autoload then pick this module over the kernel's own.  A kernel of the
# Debian 13 root gets it in that root.
INSTALL_MOD_PATH ?= $(KROOT)
MOD_DIR := $(INSTALL_MOD_PATH)/lib/modules/$(KVER)/updates
DEPMOD := PATH=$$PATH:/sbin:/usr/sbin depmod $(if $(INSTALL_MOD_PATH),-b $(INSTALL_MOD_PATH))
PREFIX ?= /usr/local
DESTDIR ?=

install: modules tools
	install -D -m 0644 kcm.ko $(MOD_DIR)/kcm.ko
	$(DEPMOD) -a $(KVER)
	install -D -m 0755 tools/kcmstat $(DESTDIR)$(PREFIX)/bin/kcmstat
	install -D -m 0644 man/kcm.7 $(DESTDIR)$(PREFIX)/share/man/man7/kcm.7

uninstall:
	rm -f $(MOD_DIR)/kcm.ko $(DESTDIR)$(PREFIX)/bin/kcmstat \
		$(DESTDIR)$(PREFIX)/share/man/man7/kcm.7
	$(DEPMOD) -a $(KVER)

# The kselftest target (selftests/Makefile, tools/testing/kselftest-tree.sh)
kselftest-tree:
	@test -n "$(KSRC)" || { echo "kcm: make kselftest-tree KSRC=<kernel source tree>" >&2; exit 1; }
	tools/testing/kselftest-tree.sh $(KSRC)

deps-check:
	@tools/deps.sh ensure

selftests:
	$(MAKE) -C selftests

tools:
	$(MAKE) -C tools

# The module the guest loads (the distro's may be compressed)
ifeq ($(KCM_MODULE),ours)
GUEST_KO = $(CURDIR)/kcm.ko
else ifeq ($(KCM_MODULE),distro)
GUEST_KO = $(firstword $(wildcard $(KROOT)/lib/modules/$(KVER)/kernel/net/kcm/kcm.ko*) \
	$(KROOT)/lib/modules/$(KVER)/kernel/net/kcm/kcm.ko)
else
GUEST_KO = $(KCM_MODULE)
endif

# After deps-check: choose the kernel, then make <goal>-on with it.
define rig_kernel
	+@kver=$$(tools/testing/kver.sh $(2) $(KVER)) || \
		{ echo "0 passed, 1 failed"; exit 1; }; \
	$(MAKE) --no-print-directory $(1)-on KVER=$$kver \
		KDIR=$(or $(KDIR_GIVEN),/lib/modules/$$kver/build) \
		KROOT=$(if $(KDIR_GIVEN),,$$(tools/testing/kver.sh root $$kver 2>/dev/null))
endef

BUILD_ALL = $(MAKE) --no-print-directory modules selftests tools >$(BUILD).log 2>&1 || \
	{ cat $(BUILD).log; echo "kcm: build failed"; echo "0 passed, 1 failed"; exit 1; }

check: deps-check
	$(call rig_kernel,check,rig)

check-on:
	@$(BUILD_ALL)
	tools/testing/check.sh --kver $(KVER) --kdir $(KDIR) --module $(GUEST_KO) \
		--module-kind $(KCM_MODULE) --timeout $(TIMEOUT) \
		$(if $(KCM_TESTS),--run 'KCM_TESTS="$(KCM_TESTS)" selftests/run_tests.sh')

run: deps-check
	$(call rig_kernel,run,rig)

run-on:
	@$(BUILD_ALL)
	tools/testing/run-demo.sh --kver $(KVER) --module $(GUEST_KO)

bench: deps-check
	$(call rig_kernel,bench,rig)

bench-on:
	@$(BUILD_ALL)
	tools/testing/bench.sh --kver $(KVER) --module $(GUEST_KO) $(BENCH_ARGS)

# PROFILE_ARGS='--graph -- -i kcm -m rx -s 512': options of
# tools/testing/profile.sh, then kcmperf's
profile: deps-check
	$(call rig_kernel,profile,rig)

profile-on:
	@$(BUILD_ALL)
	tools/testing/profile.sh --kver $(KVER) --module $(GUEST_KO) $(PROFILE_ARGS)

# The kernel build is cached outside the repo (tools/testing/debug-kernel.sh).
# DEBUG_LINE=6.12: built from linux-source-6.12 instead of 6.1; 6.12-rt: with
# PREEMPT_RT as well; 7.2: from linux-source-7.2.
debug-kernel: deps-check
	tools/testing/debug-kernel.sh --out $(DEBUG) --line $(DEBUG_LINE)

# Same summary line as check.  The guest side is tools/testing/vm/debug-run.sh;
# the lint gate and the rig's pattern test belong to 'make check'.
check-debug: deps-check
	@tools/testing/debug-kernel.sh --out $(DEBUG) --line $(DEBUG_LINE) || \
		{ echo "kcm: debug kernel build failed"; echo "0 passed, 1 failed, 0 skipped"; exit 1; }
	@$(MAKE) --no-print-directory selftests tools >$(DEBUG)/build.log 2>&1 || \
		{ cat $(DEBUG)/build.log; echo "kcm: build failed"; echo "0 passed, 1 failed, 0 skipped"; exit 1; }
	KCM_VM_MEM=$${KCM_VM_MEM:-2048} tools/testing/check.sh --vm-only \
		--module $(DEBUG)/kcm.ko --kernel $(DEBUG)/bzImage \
		--kver $$(cat $(DEBUG)/kernel.release) --extra-modules '' \
		--stage tools/testing/vm/debug-run.sh --stage $(DEBUG)/kunit \
		--run 'sh debug-run.sh $(KCM_TESTS)' --out $(DEBUG)/check \
		--kselftest "--ksrc $$(cat $(DEBUG)/ksrc) --kbuild $$(cat $(DEBUG)/kbuild)" \
		--timeout $(DEBUG_TIMEOUT)

lint: deps-check
	$(call rig_kernel,lint,build)

lint-on:
	tools/lint.sh --kdir $(KDIR) $(if $(KROOT),--root $(KROOT)) --kernels
