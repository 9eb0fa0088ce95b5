# e1kbox — thin wrappers over go commands. `make run` boots the box, `make test` tests all of it.
SHELL := /bin/bash
GO ?= go
OUT ?= build
# CONFIG is the gokrazy instance config the image is built from:
# make run CONFIG=examples/router/config.json builds and boots the home router.
CONFIG ?= config.json
DEBIAN_PKGS := qemu-system-x86 ovmf systemd-boot-efi e2fsprogs dosfstools mtools squashfs-tools gdisk \
	iproute2 iputils-ping iperf3 dnsmasq tcpdump nftables netsniff-ng isc-dhcp-client traceroute curl ethtool chromium \
	python3 procps util-linux chrony bind9-dnsutils udhcpc unzip clang llvm libbpf-dev linux-libc-dev kea-dhcp6-server radvd ndisc6 xz-utils
UNIT_PKGS = $(shell $(GO) list ./... | grep -v /qemu-test)

.PHONY: all image run vm test unit bpf-check qemu-test qemu-test-updates bench bench-firmware bench-tuning bench-qemu bench-jit lint deps kernel clean

all: image

# deps installs the Debian packages the build, the VM and the tests need (root, apt).
deps:
	@missing=$$(for p in $(DEBIAN_PKGS); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" != 0 ]; then echo "missing Debian packages: $$missing"; echo "run: sudo apt-get install -y $$missing"; exit 1; fi; \
		echo "installing: $$missing"; \
		DEBIAN_FRONTEND=noninteractive apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing; \
	fi

image: deps
	$(GO) run ./firmware build -config $(CONFIG) -out $(OUT)

# run builds the image and boots it in QEMU with three e1000e NICs (one TCG
# thread), printing the dashboard and gokrazy UI URLs, the password and
# which tap is which data port (WAN and LAN for the router image).
run: image
	$(GO) run ./firmware vm -config $(CONFIG) -out $(OUT)

vm:
	$(GO) run ./firmware vm -config $(CONFIG) -out $(OUT)

# test runs every test: unit, fuzz seeds, netns integration, browser and QEMU.
test: deps bpf-check unit qemu-test

unit:
	$(GO) vet ./...
	$(GO) test -timeout 20m $(UNIT_PKGS)

# bpf-check regenerates the fast path's BPF object and Go bindings (bpf2go,
# Debian's clang) and fails if they differ from the committed ones.
bpf-check: deps
	cd appliance/dataplane/fastpath && $(GO) generate ./...
	git diff --exit-code -- appliance/dataplane/fastpath || (echo "fastpath: the committed BPF objects are stale; run go generate ./appliance/dataplane/fastpath and commit"; exit 1)

qemu-test:
	$(GO) test -timeout 60m -v -count=1 ./qemu-test/

# qemu-test-updates runs only the interrupted-update, panicking-kernel,
# hanging-kernel (the watchdog) and dashboard-upload tests (part of qemu-test).
qemu-test-updates:
	$(GO) test -timeout 60m -v -count=1 -run '^(TestFailedUpdates|TestDashboardUpdate)$$' ./qemu-test/

# bench also runs the netns harness (root): kernel bridge, nftables and e1kbox
# side by side; pass flags with BENCH_ARGS, e.g. make bench BENCH_ARGS=-quick.
bench: deps
	$(GO) test -run '^$$' -bench . -benchmem ./rules/ ./appliance/dataplane/...
	$(GO) run ./bench $(BENCH_ARGS)

# bench-firmware measures build time (cold-ish and warm), boot to a healthy
# appliance under TCG and an OTA round trip, and prints them.
bench-firmware: deps
	$(GO) test -timeout 30m -count=1 -run '^$$' -bench Firmware -benchtime 1x ./qemu-test/

# bench-tuning measures interrupts/s and received pps on the emulated e1000e
# for ITR off/dynamic/10000 ints/s and copybreak 256 vs 0 (indicative: TCG).
bench-tuning: deps
	$(GO) test -timeout 20m -count=1 -run '^$$' -bench TuningTCG -benchtime 1x ./qemu-test/

# bench-qemu boots the image under TCG and measures boot to forwarding, pps
# through the emulated e1000e ports in bridge and NAT mode, and the
# forwarding outage of an OTA update (indicative: TCG).
bench-qemu: deps
	$(GO) test -timeout 30m -count=1 -run '^$$' -bench ForwardingTCG -benchtime 1x ./qemu-test/

# kernel rebuilds e1kbox's kernel package (firmware/kernel) from Debian's
# linux-source-6.12 at KERNEL_DEB (trixie-security: add that suite to apt's
# sources); ~30-60 min on 2 cores, so not part of make test. Commit the
# vmlinuz, config and SOURCE it writes.
KERNEL_DEB ?= 6.12.118-1
KERNEL_PKGS := flex bison bc make gcc libelf-dev libssl-dev zstd xz-utils
kernel:
	@if [ "$$(dpkg-query -W -f='$${Version}' linux-source-6.12 2>/dev/null)" != "$(KERNEL_DEB)" ]; then \
		apt-get install -y -q --allow-downgrades linux-source-6.12=$(KERNEL_DEB) || \
		{ echo "linux-source-6.12=$(KERNEL_DEB) is in Debian's trixie-security suite: add it to apt's sources (docs/firmware.md)"; exit 1; }; fi
	apt-get install -y -q $(KERNEL_PKGS)
	$(GO) run ./firmware/kernel/mkkernel -pkg firmware/kernel

# bench-jit boots the image on gokrazy's kernel (BPF interpreter) and on
# e1kbox's (JIT), three times each, and compares the fast path's
# self-measure (indicative: TCG; the ratio is what counts).
bench-jit: deps
	$(GO) test -timeout 40m -count=1 -run '^$$' -bench FastPathJIT -benchtime 1x ./qemu-test/

lint:
	gofmt -l . | (! grep .) || (echo "gofmt needed"; exit 1)
	$(GO) vet ./...
	@if command -v staticcheck >/dev/null || [ -x $$HOME/go/bin/staticcheck ]; then PATH=$$PATH:$$HOME/go/bin staticcheck ./...; else echo "staticcheck not installed: go install honnef.co/go/tools/cmd/staticcheck@latest"; fi

clean:
	rm -rf $(OUT)
