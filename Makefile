# RoCE appliance firmware. `make run` boots one appliance; `make test` runs every
# test. Both install what they need (QEMU, the bare-metal Rust target) first.

TARGET   := x86_64-unknown-none
IMAGE    := $(abspath target/$(TARGET)/release/appliance)
# Root needs no sudo (CI, these machines); elsewhere apt-get runs under sudo.
SUDO     := $(if $(filter 0,$(shell id -u)),,sudo)

# One appliance per NODE; nodes 1 and 2 share one wire (a UDP socket pair on
# 127.0.0.1), each with its own MAC and shared-memory ring file.
NODE     ?= 1
PEER     ?= $(if $(filter 1,$(NODE)),2,1)
PORT_BASE ?= 47000
PORT     := $(shell echo $$(($(PORT_BASE)+$(NODE))))
PEER_PORT := $(shell echo $$(($(PORT_BASE)+$(PEER))))
MAC      := 52:54:00:00:00:$(shell printf %02x $(NODE))
RING     ?= /dev/shm/roce-appliance-$(NODE)
RING_SIZE ?= 64M
MEM      ?= 512M
# eth0's MTU (and largest MTU), the NIC's `host_mtu`: 9000 gives RoCE MTU 4096.
MTU      ?= 1500
# The NIC model: virtio (virtio-net-pci), e1000e (Intel 82574L) or igb (Intel
# 82576, QEMU 8.0 and later). The Intel models have no MTU property: eth0
# starts at 1500 and `ip link set eth0 mtu 9000` on the console raises it (the
# drivers' largest is 9000).
NIC      ?= virtio
NIC_DEVICE_virtio = virtio-net-pci,netdev=n0,mac=$(MAC),host_mtu=$(MTU)
NIC_DEVICE_e1000e = e1000e,netdev=n0,mac=$(MAC)
NIC_DEVICE_igb = igb,netdev=n0,mac=$(MAC)
NIC_DEVICE = $(or $(NIC_DEVICE_$(NIC)),$(error NIC=$(NIC): expected virtio, e1000e or igb))
# Held (flock) while an appliance runs on that UDP port: QEMU's socket netdev
# binds with SO_REUSEADDR, so a second one on the same port would not fail.
PORT_LOCK ?= /tmp/roce-appliance-udp-$(PORT).lock
ACCEL    ?= tcg
# The QEMU binary: APPLIANCE_QEMU, as for the tests and benchmarks (e.g.
# APPLIANCE_QEMU=$(QEMU72) after `make qemu-7.2`), else the installed one.
QEMU     := $(or $(APPLIANCE_QEMU),qemu-system-x86_64)
APPEND   ?=
RUNS     ?= 3
ITERS    ?= 200
MS       ?= 2000

comma := ,
ACCEL_ARGS := $(if $(filter kvm,$(ACCEL)),-accel kvm,-accel tcg$(comma)thread=single)

# The console: stdio with `signal=off`, so Ctrl-C reaches the guest instead of
# stopping QEMU, and `mux=on` for QEMU's own escape (Ctrl-A x quits QEMU).
# The NIC (QEMU_NIC) between the machine and the ring, so run-passthrough can
# put a host NIC in its place.
QEMU_NIC = -netdev socket,id=n0,udp=127.0.0.1:$(PEER_PORT),localaddr=127.0.0.1:$(PORT) \
	-device $(NIC_DEVICE)
QEMU_MACHINE = -nodefaults -display none -no-reboot \
	-chardev stdio,id=console,mux=on,signal=off -serial chardev:console -monitor none \
	-device isa-debug-exit,iobase=0xf4,iosize=0x04 -m $(MEM) $(ACCEL_ARGS) -cpu qemu64,+pclmulqdq
# The ring: DOORBELL=1 (the default) is ivshmem-doorbell, whose ivshmem server
# (our ivshmem-server, started and stopped with QEMU) owns the ring file and
# listens beside it on $(RING).sock, so host programs and the appliance wake
# each other; DOORBELL=0 is ivshmem-plain, polled both ways.
DOORBELL ?= 1
RING_SOCK := $(RING).sock
IVSHMEM_SERVER := $(abspath target/release/ivshmem-server)
QEMU_RING_PLAIN = -object memory-backend-file,id=shm,mem-path=$(RING),size=$(RING_SIZE),share=on \
	-device ivshmem-plain,memdev=shm
QEMU_RING_DOORBELL = -chardev socket,path=$(RING_SOCK),id=ivsh -device ivshmem-doorbell,chardev=ivsh,vectors=1
QEMU_KERNEL = -kernel $(IMAGE) $(if $(APPEND),-append "$(APPEND)")
QEMU_RING = $(if $(filter 0,$(DOORBELL)),$(QEMU_RING_PLAIN),$(QEMU_RING_DOORBELL)) $(QEMU_KERNEL)
QEMU_ARGS = $(QEMU_MACHINE) $(QEMU_NIC) $(QEMU_RING)

.PHONY: qemu-7.2 qemu-7.2-path bench-qemu bench-turnaround deps-rdma-core abi abi-path ivshmem-server all run run-passthrough boot-passthrough boot install uninstall test host-test qemu-test image image-path boot-time bench bench-net bench-nics bench-rdma bench-verbs bench-interop bench-perftest fuzz fuzz-wire deps deps-rust deps-qemu clean linux-peer linux-peer-backports interop interop-smoke deps-tshark deps-fonts deps-vde fabric iso iso-path deps-iso iso-test soak

all: image

## deps: install QEMU and the bare-metal target if missing (idempotent, quiet)
deps: deps-rust deps-qemu

deps-rust:
	@rustup target list --installed 2>/dev/null | grep -qx '$(TARGET)' || rustup target add $(TARGET) >/dev/null 2>&1

## deps-qemu: QEMU, on Debian 12 from bookworm-backports (QEMU 10, which has igb)
deps-qemu:
	@SUDO=$(SUDO) bash tests/setup/qemu.sh

## qemu-7.2: bookworm's own QEMU 7.2 unpacked into target/qemu-7.2 beside the
## installed QEMU (nothing installed); APPLIANCE_QEMU=$(make -s qemu-7.2-path)
## runs `make run`, the tests and the benchmarks on it; `make bench-qemu` compares
QEMU72   := $(abspath target/qemu-7.2/usr/bin/qemu-system-x86_64)
qemu-7.2:
	@SUDO=$(SUDO) bash tests/setup/qemu-7.2.sh $(abspath target/qemu-7.2)

qemu-7.2-path:
	@echo $(QEMU72)

## abi: build libibverbs.so.1 (rdma-core 44's C ABI over the verbs ring) and
## the roce-run wrapper under target/abi; `make -s abi-path` prints the folder
## (librdmacm.so.1, rdma-core 44's RDMA CM over the ring's CM commands, too)
ABI_DIR := $(CURDIR)/target/abi
abi: deps-rust
	cargo build --release -p libibverbs
	rdma/host/libibverbs/link.sh target/release/libibverbs_abi.a $(ABI_DIR)
	install -m 755 rdma/host/libibverbs/roce-run $(ABI_DIR)/roce-run
	cargo build --release -p librdmacm
	rdma/host/librdmacm/link.sh target/release/librdmacm_abi.a $(ABI_DIR)

abi-path:
	@echo $(ABI_DIR)

## image: build the bootable ELF; `make -s image-path` prints where it is
image: deps-rust
	cargo build --release -p kernel --target $(TARGET)

image-path:
	@echo $(IMAGE)

## iso: a bootable ISO (BIOS and UEFI) of the same image, GRUB loading it by
## Multiboot2 with its console on COM1; `make -s iso-path` prints where it is
ISO      := $(abspath target/appliance.iso)
ISO_ROOT := $(abspath target/iso-root)
ISO_PKGS := grub-pc-bin grub-efi-amd64-bin grub-common xorriso mtools
ISO_FIRMWARE_PKGS := ovmf
deps-iso:
	@dpkg -s $(ISO_PKGS) $(ISO_FIRMWARE_PKGS) >/dev/null 2>&1 || { \
		echo "installing $(ISO_PKGS) $(ISO_FIRMWARE_PKGS) ..."; \
		$(SUDO) apt-get update -qq >/dev/null && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends \
			$(ISO_PKGS) $(ISO_FIRMWARE_PKGS) >/dev/null; }

iso: image deps-iso
	@rm -rf $(ISO_ROOT) && mkdir -p $(ISO_ROOT)/boot/grub
	cp $(IMAGE) $(ISO_ROOT)/boot/appliance
	cp boot/iso/grub.cfg $(ISO_ROOT)/boot/grub/grub.cfg
	grub-mkrescue -o $(ISO) $(ISO_ROOT) 2>/dev/null
	@echo "ISO: $(ISO)"

iso-path:
	@echo $(ISO)

## iso-test: the ISO under SeaBIOS and OVMF on one wire (RDMA pingpongs, ACPI
## power-off) and q35's ECAM (tests/tests/iso.rs, ~70 s; `make test` runs it too)
iso-test: iso deps-qemu
	APPLIANCE_IMAGE=$(IMAGE) APPLIANCE_ISO=$(ISO) cargo test -p tests --test iso -- --test-threads=1

## ivshmem-server: the ring's ivshmem server (QEMU's protocol), which `make run` starts
ivshmem-server:
	@cargo build --release -q -p ivshmem --bin ivshmem-server

# With DOORBELL (not 0): start the ring's ivshmem server beside the ring (the
# kernel kills it if the shell dies first) and wait for its socket.
define START_SERVER
$(if $(filter 0,$(DOORBELL)),,\
pdeath=$$(command -v setpriv >/dev/null && echo setpriv --pdeathsig TERM); \
$$pdeath $(IVSHMEM_SERVER) --shm $(RING) --socket $(RING_SOCK) 9>&- 8>&- & server=$$!; \
for i in $$(seq 100); do [ -S $(RING_SOCK) ] && break; sleep 0.05; done; \
if ! [ -S $(RING_SOCK) ]; then echo "error: the ivshmem server did not start on $(RING_SOCK)"; kill $$server 2>/dev/null; exit 1; fi;)
endef

# Boots one appliance on the console. Locks on the ring file and the UDP port,
# inherited by QEMU and so held until it exits, refuse a second appliance on
# either. The ring is sized every time (QEMU refuses a backing file of another
# size; the firmware lays the ring out afresh at boot) and removed when QEMU
# exits, with the ivshmem server and its socket.
define BOOT
exec 8<>$(RING) 9<>$(PORT_LOCK); \
if ! flock -n 8; then \
	echo "error: node $(NODE) is already running: its ring $(RING) is locked (held by pid $$(fuser $(RING) 2>/dev/null | tr -s ' ' | sed 's/^ //'))."; \
	echo "Type 'shutdown' on its console, or start another node (NODE=2, or RING=... PORT_BASE=...)."; \
	exit 1; fi; \
if ! flock -n 9; then \
	echo "error: UDP port $(PORT) is taken by another appliance (lock $(PORT_LOCK)); choose another NODE or PORT_BASE."; \
	exit 1; fi; \
truncate -s $(RING_SIZE) $(RING); \
server=; $(START_SERVER) \
echo "node $(NODE): MAC $(MAC), wire udp 127.0.0.1:$(PORT) <-> 127.0.0.1:$(PEER_PORT), mtu $(MTU), ring $(RING)$(if $(filter 0,$(DOORBELL)), (polled), doorbell $(RING_SOCK))"; \
echo "(type 'shutdown' to power off; Ctrl-C interrupts a command; Ctrl-A x kills QEMU)"; \
$(if $(and $(filter e1000e igb,$(NIC)),$(filter-out 1500,$(MTU))),echo "$(NIC): eth0 starts at mtu 1500; type 'ip link set eth0 mtu $(MTU)'";) \
$(QEMU) $(QEMU_ARGS); status=$$?; \
[ -n "$$server" ] && kill $$server 2>/dev/null; wait 2>/dev/null; \
rm -f $(RING) $(RING_SOCK); exit $$status
endef

## run: build the image and boot one appliance (NODE=2 in a second terminal
## joins the same wire; MTU=9000 for jumbo frames and RoCE MTU 4096;
## NIC=e1000e or NIC=igb for an Intel 82574L or 82576 instead of virtio-net;
## DOORBELL=0 for a polled ivshmem-plain ring without the ivshmem server)
run: image deps-qemu ivshmem-server
	@$(BOOT)

## run-passthrough: the appliance on a host NIC handed over through VFIO
## (PCI=DDDD:BB:DD.F, bound to vfio-pci; HARDWARE.md is the runbook). The
## host is checked first, with a clear error for each missing step;
## DRY_RUN=1 prints the QEMU command instead of running it.
run-passthrough: image boot-passthrough

## boot-passthrough: run-passthrough without building the image (IMAGE=...)
boot-passthrough: deps-qemu
	@[ -n "$(PCI)" ] || { echo "usage: make run-passthrough PCI=0000:03:00.0 (lspci -D -nn lists the NICs; see HARDWARE.md)"; exit 2; }
	@cargo build -q --release -p tests --bin passthrough-check
	@dev=$$($(abspath target/release/passthrough-check) '$(PCI)') || exit 2; \
	cmd="$(QEMU) $(QEMU_MACHINE) -device $$dev $(QEMU_RING_PLAIN) $(QEMU_KERNEL)"; \
	if [ -n "$(DRY_RUN)" ]; then echo "$$cmd"; exit 0; fi; \
	exec 8<>$(RING); \
	if ! flock -n 8; then echo "error: the ring $(RING) is in use by another appliance (RING=... picks another)"; exit 1; fi; \
	truncate -s $(RING_SIZE) $(RING); \
	echo "host NIC $(PCI) through vfio-pci, ring $(RING) (type 'shutdown' to power off; Ctrl-A x kills QEMU)"; \
	$$cmd; status=$$?; rm -f $(RING); exit $$status

## boot: boot the image as it is, without building it (the tests use this)
boot: deps-qemu ivshmem-server
	@$(BOOT)

## install: the host tools as roce-<tool> in $(BINDIR) (default ~/.local/bin):
## roce-ibv_devinfo, roce-rdma, roce-rc_pingpong, roce-send_bw, ... so that
## rdma-core's, iproute2's and perftest's own ibv_devinfo, rdma, ib_send_bw
## keep their names beside them. `make uninstall` removes them.
BINDIR   ?= $(HOME)/.local/bin
TOOLS    := $(basename $(notdir $(wildcard rdma/host/verbs/src/bin/*.rs)))
install:
	cargo build --release -q -p verbs --bins
	@mkdir -p $(BINDIR)
	@for t in $(TOOLS); do install -m 755 target/release/$$t $(BINDIR)/roce-$$t; done
	@echo "installed $(words $(TOOLS)) tools as $(BINDIR)/roce-<tool>: $(addprefix roce-,$(TOOLS))"
	@case ":$$PATH:" in *":$(BINDIR):"*) ;; *) echo "note: $(BINDIR) is not on PATH";; esac

uninstall:
	@for t in $(TOOLS); do rm -f $(BINDIR)/roce-$$t; done

## test: host unit tests, the QEMU integration tests, and a short interop run
## against Linux rdma_rxe (one pingpong each way; builds the Linux peer once)
test: host-test qemu-test interop-smoke

host-test: deps-rdma-core
	cargo test
	cargo test -p boot

## deps-rdma-core: rdma-core's headers and Debian's unmodified RDMA programs, which the
## libibverbs tests check our ABI against and run over it (idempotent, quiet)
RDMA_CORE_PKGS = libibverbs-dev ibverbs-utils perftest rdmacm-utils
RDMA_CORE_PKGS += librdmacm-dev python3-pyverbs
deps-rdma-core:
	@dpkg -s $(RDMA_CORE_PKGS) >/dev/null 2>&1 || { \
		echo "installing $(RDMA_CORE_PKGS) ..."; \
		$(SUDO) apt-get update -qq >/dev/null && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $(RDMA_CORE_PKGS) >/dev/null; }

# (tests/tests/intel_nics.rs runs boot, ping, link changes, jumbo frames and the
# RDMA pingpongs over e1000e and igb; APPLIANCE_NIC=e1000e or igb runs any
# suite over one.)
qemu-test: image deps-qemu abi deps-rdma-core iso
	cargo build --release -q -p verbs --bins --examples
	APPLIANCE_IMAGE=$(IMAGE) APPLIANCE_ISO=$(ISO) VERBS_BIN=$(abspath target/release) ROCE_ABI_DIR=$(ABI_DIR) cargo test -p tests

## boot-time: median boot-to-prompt time over 5 boots (ACCEL=tcg|kvm)
boot-time: image deps-qemu
	APPLIANCE_IMAGE=$(IMAGE) APPLIANCE_ACCEL=$(ACCEL) cargo run -q --release -p tests --bin boot-time -- 5

## bench-net: the raw wire limit between two appliances (frames/s, Gb/s by frame size)
bench-net: image deps-qemu
	APPLIANCE_IMAGE=$(IMAGE) APPLIANCE_ACCEL=$(ACCEL) cargo run -q --release -p tests --bin bench-net -- $(RUNS) $(MS)

## bench-rdma: ibv_rc_pingpong between two appliances (latency, bandwidth by size)
## bench-nics: the NIC models side by side in one run (raw wire frames/s and
## Gb/s, 64 KiB RDMA WRITE), each against virtio-net
bench-nics: image deps-qemu
	cargo build --release -q -p verbs --bins
	APPLIANCE_IMAGE=$(IMAGE) VERBS_BIN=$(abspath target/release) cargo run -q --release -p tests --bin bench-nics -- $(RUNS) $(MS)

bench-rdma: image deps-qemu
	APPLIANCE_IMAGE=$(IMAGE) APPLIANCE_ACCEL=$(ACCEL) cargo run -q --release -p tests --bin bench-rdma -- $(RUNS) $(ITERS)

## bench-interop: ibv_rc_pingpong Linux<->Linux, appliance<->Linux, appliance<->appliance, with ratios
bench-interop: image deps-qemu deps-fonts linux-peer
	APPLIANCE_IMAGE=$(IMAGE) APPLIANCE_ACCEL=$(ACCEL) cargo run -q --release -p tests --bin bench-interop -- $(RUNS) 100

## bench-verbs: the verbs ring from host programs (NOP, post->CQE, message rate, bandwidth)
bench-verbs: image deps-qemu
	APPLIANCE_IMAGE=$(IMAGE) APPLIANCE_ACCEL=$(ACCEL) cargo run -q --release -p tests --bin bench-verbs -- $(RUNS)

## bench-perftest: perftest WRITE bandwidth and rate, SEND latency: Linux<->Linux, appliance<->Linux,
## appliance<->appliance (Rust tools, then Debian's programs over our libibverbs), and the wire's
## limits between the two appliances at the 64 KiB WRITE's frame size (a copy per frame, prebuilt
## frames, a copy and an ICRC per frame) and its ping beside the SEND latency, in one run, with ratios
bench-perftest: image deps-qemu deps-fonts linux-peer abi deps-rdma-core
	cargo build --release -q -p verbs --bins
	cargo build --release -q -p tests --bins
	APPLIANCE_IMAGE=$(IMAGE) APPLIANCE_ACCEL=$(ACCEL) VERBS_BIN=$(abspath target/release) ROCE_ABI_DIR=$(ABI_DIR) \
		cargo run -q --release -p tests --bin bench-perftest -- $(RUNS)

## bench-turnaround: one guest's frame turnaround: a host process on its UDP wire times
## ICMP echoes (median, p10/p90) to an appliance and to the Linux peer alike, with the
## appliance's profile of where the time goes (ECHOES per run, GAP_US between them)
ECHOES   ?= 1000
GAP_US   ?= 1000
bench-turnaround: image deps-qemu deps-fonts linux-peer
	APPLIANCE_IMAGE=$(IMAGE) APPLIANCE_ACCEL=$(ACCEL) cargo run -q --release -p tests --bin bench-turnaround -- $(RUNS) $(ECHOES) $(GAP_US)

## bench-qemu: bookworm's QEMU 7.2 (make qemu-7.2) against the installed QEMU 10 in one run,
## alternating: netbench frames/s at 1514 and 9014 B, a 64 KiB WRITE and the 2 B SEND
## latency between two appliances, `cost icrc 4096 2000`; the speed ratio per row
bench-qemu: image deps-qemu deps-fonts qemu-7.2
	cargo build --release -q -p verbs --bins
	APPLIANCE_IMAGE=$(IMAGE) APPLIANCE_ACCEL=$(ACCEL) VERBS_BIN=$(abspath target/release) \
		cargo run -q --release -p tests --bin bench-qemu -- $(RUNS) $(MS) $(QEMU72) $(QEMU)

## bench: every benchmark (host codec and transport benchmarks, wire limit, RDMA, verbs ring, interop,
## frame turnaround); bench-qemu, which unpacks a second QEMU, runs on its own
bench: bench-net bench-nics bench-rdma bench-verbs bench-interop bench-perftest bench-turnaround
	cargo bench -q -p rdma

## fuzz: the frame parser fuzzers (rdma/tests/fuzz_frame.rs), the ring command dispatcher
## fuzzers (rdma/verbs-ring) and hostile commands against the real provider (rdma uverbs)
## at FUZZ_CASES (10M) cases or commands each (~7 min), then the
## property tests of the parsers, with many more cases, and every fault schedule of the
## first 6 frames for each operation kind (rdma/tests/fault_schedules.rs)
fuzz:
	FUZZ_CASES=$${FUZZ_CASES:-10000000} cargo test --release -p rdma --test fuzz_frame
	FUZZ_CASES=$${FUZZ_CASES:-10000000} cargo test --release -p verbs-ring fuzz_
	FUZZ_CASES=$${FUZZ_CASES:-10000000} cargo test --release -p rdma --lib hostile_command
	PROPTEST_CASES=$${PROPTEST_CASES:-100000} FAULT_FRAMES=$${FAULT_FRAMES:-6} cargo test --release -p rdma -p kbase

## fuzz-wire: FUZZ_WIRE_FRAMES (1,000,000) fuzzed frames into a running appliance while a
## checker RC QP keeps verifying data (tests/tests/fuzz_wire.rs); prints the per-reason counters
FUZZ_WIRE_FRAMES ?= 1000000
fuzz-wire: image deps-qemu
	cargo build --release -q -p verbs --bins
	APPLIANCE_IMAGE=$(IMAGE) VERBS_BIN=$(abspath target/release) FUZZ_WIRE_FRAMES=$(FUZZ_WIRE_FRAMES) \
		cargo test -p tests --test fuzz_wire -- --ignored --test-threads=1 --nocapture

## linux-peer: build the Linux rdma_rxe peer guest (kernel + initramfs from Debian
## bookworm packages) into target/linux-peer/, once
linux-peer:
	@bash tests/linux-peer/build.sh

## linux-peer-backports: the same peer with bookworm-backports' kernel (rxe with ATOMIC
## WRITE and FLUSH), into target/linux-peer-backports/; only their interop test boots it
linux-peer-backports:
	@PEER_KERNEL=backports bash tests/linux-peer/build.sh

interop-smoke: image deps-qemu linux-peer
interop-smoke: abi deps-rdma-core
	cargo build --release -q -p verbs --bins
	APPLIANCE_IMAGE=$(IMAGE) VERBS_BIN=$(abspath target/release) cargo test -p tests \
		--test interop --test cm smoke -- --ignored --test-threads=1
	APPLIANCE_NIC=e1000e APPLIANCE_IMAGE=$(IMAGE) VERBS_BIN=$(abspath target/release) cargo test -p tests \
		--test interop smoke -- --ignored --test-threads=1
	APPLIANCE_IMAGE=$(IMAGE) ROCE_ABI_DIR=$(ABI_DIR) cargo test -p tests --test abi_interop smoke -- --ignored --test-threads=1

deps-tshark:
	@command -v tshark >/dev/null || { \
		echo "installing tshark ..."; \
		echo "wireshark-common wireshark-common/install-setuid boolean false" | $(SUDO) debconf-set-selections; \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq tshark >/dev/null; }

deps-fonts:
	@test -e /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf || \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq fonts-dejavu-core >/dev/null

## deps-vde: Debian's vde2, the L2 switch of the N-node tests (idempotent, quiet)
deps-vde:
	@command -v vde_switch >/dev/null || { \
		echo "installing vde2 ..."; \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq vde2 >/dev/null; }

## fabric: four appliances and a Linux rdma_rxe peer on one vde_switch: full-mesh RC
## with checked data, pingpongs with Linux, one node killed and rebooted (tests/tests/fabric.rs)
fabric: image deps-qemu deps-vde linux-peer
	APPLIANCE_IMAGE=$(IMAGE) cargo test -p tests --test fabric -- --ignored --nocapture

## soak: SOAK_MINUTES (30) of mixed traffic between two appliances and against Linux,
## through the fault relay, QP/MR churn and host clients SIGKILLed; then no QP left
## but QP1, every ring slot free, the heap back to its level, counters related
## (tests/tests/soak.rs; the summary also lands in target/soak/summary.txt)
SOAK_MINUTES ?= 30
soak: image deps-qemu linux-peer
	cargo build --release -q -p verbs --bins
	APPLIANCE_IMAGE=$(IMAGE) VERBS_BIN=$(abspath target/release) SOAK_MINUTES=$(SOAK_MINUTES) \
		cargo test -p tests --test soak -- --ignored --exact soak --nocapture

## interop: the Linux rdma_rxe interop tests (tests/tests/interop.rs: pingpongs;
## tests/tests/perftest.rs: perftest against the host tools; tests/tests/cm.rs:
## rdmacm-utils against the host tools; tests/tests/ext_interop.rs: memory windows,
## fast registration, SEND WITH INVALIDATE), one QEMU pair at a time
interop: image deps-qemu deps-tshark linux-peer
interop: abi deps-rdma-core deps-vde
	cargo build --release -q -p verbs --bins
	APPLIANCE_IMAGE=$(IMAGE) VERBS_BIN=$(abspath target/release) cargo test -p tests \
		--test interop --test perftest --test cm --test ext_interop -- --ignored --test-threads=1 --nocapture
	APPLIANCE_IMAGE=$(IMAGE) ROCE_ABI_DIR=$(ABI_DIR) cargo test -p tests --test abi_interop \
		-- --ignored --test-threads=1 --nocapture
	APPLIANCE_IMAGE=$(IMAGE) cargo test -p tests --test fabric -- --ignored --nocapture

clean:
	cargo clean
