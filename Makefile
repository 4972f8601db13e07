# SPDX-License-Identifier: GPL-2.0-only
#
# Out-of-tree entry point.  Kbuild (not this file) describes the module, so
# the same sources build in the kernel tree as net/kcm.
#
#   make            build ./kcm.ko against KDIR
#   make check      build, boot the distro kernel in qemu, run the selftests
#   make run        boot the VM and run the demo program
#   make lint       checkpatch --strict, W=1, sparse, kernel-doc, shellcheck
#   make deps       apt-get install what all of the above needs

# The newest installed kernel headers, never blindly $(uname -r): the VM
# boots the kernel that matches them.
KDIR ?= $(lastword $(sort $(wildcard /lib/modules/*/build)))
KVER ?= $(notdir $(patsubst %/,%,$(dir $(KDIR))))
# ours | distro | /path/to/kcm.ko: the module the VM tests load
KCM_MODULE ?= ours

BUILD := $(CURDIR)/.build
VM := tools/testing/vm/vm.sh
TIMEOUT ?= 900

.PHONY: all modules clean check run lint deps deps-check selftests tools

all: modules

modules:
	@test -d "$(KDIR)" || { echo "kcm: no kernel headers under /lib/modules/*/build:" \
		"apt-get install linux-headers-amd64 (or run 'make deps')" >&2; exit 1; }
	$(MAKE) -C $(KDIR) M=$(CURDIR) modules

clean:
	-$(MAKE) -C $(KDIR) M=$(CURDIR) clean
	$(MAKE) -C selftests clean
	$(MAKE) -C tools clean
	rm -rf $(BUILD)

deps:
	tools/deps.sh install

deps-check:
	@tools/deps.sh ensure

selftests:
	$(MAKE) -C selftests

tools:
	$(MAKE) -C tools

# The module the guest loads
ifeq ($(KCM_MODULE),ours)
GUEST_KO := $(CURDIR)/kcm.ko
else ifeq ($(KCM_MODULE),distro)
GUEST_KO := /lib/modules/$(KVER)/kernel/net/kcm/kcm.ko
else
GUEST_KO := $(KCM_MODULE)
endif

check: deps-check
	@$(MAKE) --no-print-directory modules selftests tools >$(BUILD).log 2>&1 || \
		{ cat $(BUILD).log; echo "kcm: build failed"; echo "0 passed, 1 failed"; exit 1; }
	tools/testing/check.sh --kver $(KVER) --module $(GUEST_KO) \
		--module-kind $(KCM_MODULE) --timeout $(TIMEOUT)

run: deps-check
	@$(MAKE) --no-print-directory modules tools >$(BUILD).log 2>&1 || \
		{ cat $(BUILD).log; echo "kcm: build failed"; exit 1; }
	tools/testing/run-demo.sh --kver $(KVER) --module $(GUEST_KO)

lint: deps-check
	tools/lint.sh --kdir $(KDIR)
