package dashboard

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"e1kbox/webui"
)

// The kernel's counters the dashboard shows next to the dataplane's.

// readCPUs reads cumulative busy/idle seconds per core from /proc/stat.
func readCPUs(root string) []webui.CPUStat {
	f, err := os.Open(filepath.Join(root, "proc/stat"))
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []webui.CPUStat
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 8 || !strings.HasPrefix(fields[0], "cpu") || fields[0] == "cpu" {
			continue
		}
		n, err := strconv.Atoi(fields[0][3:])
		if err != nil {
			continue
		}
		var v [10]float64
		for i := 1; i < len(fields) && i <= 10; i++ {
			x, _ := strconv.ParseFloat(fields[i], 64)
			v[i-1] = x / 100 // USER_HZ
		}
		idle := v[3] + v[4]
		busy := v[0] + v[1] + v[2] + v[5] + v[6] + v[7]
		out = append(out, webui.CPUStat{CPU: n, BusySeconds: busy, IdleSeconds: idle})
	}
	return out
}

// readIRQs reads the interrupt counts of NIC vectors (named eth* or
// enp*) from /proc/interrupts, in total and per CPU.
func readIRQs(root string) []webui.IRQStat {
	b, err := os.ReadFile(filepath.Join(root, "proc/interrupts"))
	if err != nil {
		return nil
	}
	return parseIRQs(string(b))
}

func parseIRQs(text string) []webui.IRQStat {
	var out []webui.IRQStat
	ncpu := 0
	for i, line := range strings.Split(text, "\n") {
		fields := strings.Fields(line)
		if i == 0 {
			ncpu = len(fields)
			continue
		}
		if len(fields) < ncpu+2 {
			continue
		}
		irq, err := strconv.Atoi(strings.TrimSuffix(fields[0], ":"))
		if err != nil {
			continue
		}
		name := fields[len(fields)-1]
		if !strings.HasPrefix(name, "eth") && !strings.HasPrefix(name, "enp") {
			continue
		}
		v := webui.IRQStat{IRQ: irq, Name: name}
		for _, c := range fields[1 : 1+ncpu] {
			n, _ := strconv.ParseUint(c, 10, 64)
			v.PerCPU = append(v.PerCPU, n)
			v.Count += n
		}
		out = append(out, v)
	}
	return out
}

func linkSpeed(root, iface string) int {
	b, err := os.ReadFile(filepath.Join(root, "sys/class/net", iface, "speed"))
	if err != nil {
		return 0
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n < 0 {
		return 0
	}
	return n
}

func readMeminfo(root string) (total, avail uint64) {
	f, err := os.Open(filepath.Join(root, "proc/meminfo"))
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		n, _ := strconv.ParseUint(fields[1], 10, 64)
		switch fields[0] {
		case "MemTotal:":
			total = n * 1024
		case "MemAvailable:":
			avail = n * 1024
		}
	}
	return total, avail
}
