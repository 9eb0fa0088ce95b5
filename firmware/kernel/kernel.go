// Package kernel is e1kbox's kernel, a gokrazy kernel package: vmlinuz,
// cmdline.txt and config.txt for the image, the full config it was built
// with, and the config addendum with a reason for each option. It is built
// from Debian's linux-source-6.12 by `make kernel` (./mkkernel); SOURCE
// names the source package and version.
package kernel

import (
	"bufio"
	"bytes"
	"strings"
)

// Required are the options e1kbox needs built in (=y), with why.
var Required = []struct{ Option, Why string }{
	{"CONFIG_BPF_SYSCALL", "the fast path's programs and maps"},
	{"CONFIG_BPF_JIT", "the fast path JIT-compiled, not interpreted"},
	{"CONFIG_NET_XGRESS", "tcx, the fast path's attach point"},
	{"CONFIG_PACKET", "the dataplane's AF_PACKET rings"},
	{"CONFIG_TUN", "the TAP device of the box's own address"},
	{"CONFIG_E1000E", "the NICs e1kbox is made for"},
	{"CONFIG_IPV6", "IPv6 routing"},
	{"CONFIG_SQUASHFS", "the root file system"},
	{"CONFIG_SQUASHFS_ZLIB", "the root file system's compression"},
	{"CONFIG_VFAT_FS", "the boot partition"},
	{"CONFIG_EXT4_FS", "the /perm partition"},
	{"CONFIG_EFI_STUB", "UEFI boot through systemd-boot"},
	{"CONFIG_KEXEC_FILE", "the update's test boot"},
	{"CONFIG_IKCONFIG_PROC", "the appliance reads the kernel's features"},
	{"CONFIG_USB_STORAGE", "booting from a USB stick"},
	{"CONFIG_SATA_AHCI", "booting from a SATA disk"},
	{"CONFIG_BLK_DEV_NVME", "booting from an NVMe disk"},
	{"CONFIG_NET_SCH_CAKE", "SQM"},
	{"CONFIG_NET_SCH_FQ_CODEL", "SQM"},
	{"CONFIG_NET_SCH_HTB", "SQM with fq_codel"},
	{"CONFIG_NET_SCH_FQ", "SQM"},
	{"CONFIG_NET_SCH_INGRESS", "SQM of downloads"},
	{"CONFIG_IFB", "SQM of downloads"},
	{"CONFIG_NET_ACT_MIRRED", "SQM of downloads (redirect into IFB)"},
	{"CONFIG_NET_CLS_U32", "SQM classifiers"},
	{"CONFIG_NET_CLS_MATCHALL", "SQM classifiers"},
	{"CONFIG_NET_CLS_BPF", "SQM classifiers"},
	{"CONFIG_VLAN_8021Q", "VLANs on the WAN and in zones"},
	{"CONFIG_WIREGUARD", "the VPN"},
	{"CONFIG_WATCHDOG", "a hung kernel resets the box"},
	{"CONFIG_ITCO_WDT", "the watchdog of Intel chipsets"},
	{"CONFIG_I6300ESB_WDT", "the watchdog in QEMU"},
	{"CONFIG_SP5100_TCO", "the watchdog of AMD chipsets"},
	{"CONFIG_LPC_ICH", "iTCO behind the LPC bridge"},
	{"CONFIG_I2C_I801", "iTCO on newer Intel chipsets"},
	{"CONFIG_WATCHDOG_SYSFS", "the dashboard reads the watchdog's state"},
	{"CONFIG_DEVTMPFS_MOUNT", "gokrazy's init opens /dev/watchdog before it mounts /dev"},
	{"CONFIG_SENSORS_CORETEMP", "Intel CPU temperature"},
	{"CONFIG_CPU_FREQ_GOV_SCHEDUTIL", "the clock follows load"},
	{"CONFIG_KERNEL_ZSTD", "vmlinuz small enough for the MBR loader"},
}

// Missing lists the Required options config (a .config) does not set to y.
func Missing(config []byte) []string {
	set := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(config))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok && v == "y" {
			set[k] = true
		}
	}
	var missing []string
	for _, r := range Required {
		if !set[r.Option] {
			missing = append(missing, r.Option)
		}
	}
	return missing
}
