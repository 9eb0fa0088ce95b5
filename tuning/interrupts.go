package tuning

import (
	"bufio"
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Interrupt is one numbered line of /proc/interrupts.
type Interrupt struct {
	IRQ    int
	Counts []uint64 // per online CPU, in header order
	Chip   string   // e.g. "PCI-MSIX-0000:00:05.0 0-edge"
	Names  []string // action names, e.g. ["eth2-rx-0"]
}

// hwirqRE matches the "<hwirq>-<flow handler>" token that ends the chip
// part of a line ("0-edge", "10-fasteoi").
var hwirqRE = regexp.MustCompile(`^[0-9]+-[A-Za-z]+$`)

// ParseInterrupts parses /proc/interrupts. Only numbered lines are
// returned; the per-CPU architecture lines (NMI, LOC, ...) are skipped.
func ParseInterrupts(data []byte) ([]Interrupt, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	if !sc.Scan() {
		return nil, fmt.Errorf("interrupts: no header")
	}
	header := strings.Fields(sc.Text())
	if len(header) == 0 {
		return nil, fmt.Errorf("interrupts: empty header")
	}
	for _, h := range header {
		if !strings.HasPrefix(h, "CPU") {
			return nil, fmt.Errorf("interrupts: header field %q is not CPUn", h)
		}
	}
	ncpu := len(header)
	var out []Interrupt
	for sc.Scan() {
		line := sc.Text()
		head, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		irq, err := strconv.Atoi(strings.TrimSpace(head))
		if err != nil || irq < 0 {
			continue // NMI, LOC, ERR, ...
		}
		f := strings.Fields(rest)
		if len(f) < ncpu {
			return nil, fmt.Errorf("interrupts: irq %d: %d counts for %d CPUs", irq, len(f), ncpu)
		}
		in := Interrupt{IRQ: irq, Counts: make([]uint64, ncpu)}
		for i := range ncpu {
			if in.Counts[i], err = strconv.ParseUint(f[i], 10, 64); err != nil {
				return nil, fmt.Errorf("interrupts: irq %d: count %q: %w", irq, f[i], err)
			}
		}
		desc := f[ncpu:]
		// The action names follow the "<hwirq>-<handler>" token; older
		// kernels have a single chip token ("PCI-MSI-edge") instead.
		split := min(1, len(desc))
		for i, tok := range desc {
			if hwirqRE.MatchString(tok) {
				split = i + 1
				break
			}
		}
		in.Chip = strings.Join(desc[:split], " ")
		for _, n := range strings.Split(strings.Join(desc[split:], " "), ",") {
			if n = strings.TrimSpace(n); n != "" {
				in.Names = append(in.Names, n)
			}
		}
		out = append(out, in)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("interrupts: %w", err)
	}
	return out, nil
}

// irqByName finds the interrupt whose action is named name, first in
// /proc/interrupts, then among the device's MSI IRQs by the action
// directory /proc/irq/N/<name>. IRQ numbers depend on probe order, so they
// are looked up at every apply. how says which source answered.
func (r root) irqByName(ifname, name string) (irq int, how string, err error) {
	data, err := r.read("/proc/interrupts")
	if err != nil {
		return 0, "", err
	}
	ints, err := ParseInterrupts([]byte(data))
	if err != nil {
		return 0, "", err
	}
	for _, in := range ints {
		if slices.Contains(in.Names, name) {
			return in.IRQ, "/proc/interrupts", nil
		}
	}
	msi, err := r.msiIRQs(ifname)
	if err != nil {
		return 0, "", fmt.Errorf("no IRQ named %q in /proc/interrupts and %w", name, err)
	}
	for _, n := range msi {
		if r.exists(fmt.Sprintf("/proc/irq/%d/%s", n, name)) {
			return n, "msi_irqs", nil
		}
	}
	return 0, "", fmt.Errorf("no IRQ named %q in /proc/interrupts or among msi_irqs %v (is %s up? e1000e requests its vectors when the interface is opened)", name, msi, ifname)
}

// msiIRQs lists /sys/class/net/<if>/device/msi_irqs in ascending order.
func (r root) msiIRQs(ifname string) ([]int, error) {
	names, err := r.readDir("/sys/class/net/" + ifname + "/device/msi_irqs")
	if err != nil {
		return nil, err
	}
	var irqs []int
	for _, n := range names {
		if i, err := strconv.Atoi(n); err == nil {
			irqs = append(irqs, i)
		}
	}
	slices.Sort(irqs)
	return irqs, nil
}
