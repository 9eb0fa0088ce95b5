package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// ratioCell writes a ratio, naming its baseline when it is not the
// kernel bridge.
func ratioCell(r float64, baseline string) string {
	if baseline == "" {
		return FormatRatio(r)
	}
	return FormatRatio(r) + " vs " + baseline
}

// noData is the cell of a row without samples.
func noData(err string) string {
	if err != "" {
		return "failed"
	}
	return "no data"
}

// standIn describes a receive stand-in for the report.
func standIn(rx string) string {
	switch rx {
	case "napi":
		return "b0's threaded NAPI pinned to it at SCHED_FIFO, polling again 50 µs after a poll that found frames"
	case "rps", "":
		return "RPS on b0"
	}
	return rx
}

// WriteMarkdown writes the report as markdown: a header with the host and
// settings, the throughput table, the CPU table and the notes.
func WriteMarkdown(w io.Writer, r *Report) error {
	var b strings.Builder
	fmt.Fprintf(&b, "### e1kbox bench, %s\n\n", r.Started.UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "Kernel %s, CPUs %s", r.Host.Kernel, r.Host.CPUs)
	if r.Host.Model != "" {
		fmt.Fprintf(&b, " (%s)", r.Host.Model)
	}
	if j := jitText(r.Host.BPFJIT); j != "" {
		fmt.Fprintf(&b, ", %s", j)
	}
	fmt.Fprintf(&b, ", %.0f%% busy before the run. %s; UDP/IPv4, %d flows; medians of %d runs of %s after %s warm-up.\n\n",
		100*r.Host.IdleBusy, r.Settings.Generator, r.Settings.Flows, r.Settings.Reps, r.Settings.Duration, r.Settings.Warmup)
	b.WriteString("| path | CPU placement | pps (median) | vs kernel bridge | min – max | offered |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|\n")
	limited := false
	for _, row := range r.Rows {
		if row.Runs == 0 {
			fmt.Fprintf(&b, "| %s | %s | %s | n/a | | |\n", row.Name, row.Placement, noData(row.Error))
			continue
		}
		mark := ""
		if row.GenLimited {
			mark, limited = "*", true
		}
		fmt.Fprintf(&b, "| %s | %s | %s%s | %s | %s – %s | %s |\n", row.Name, row.Placement, FormatPPS(row.PPS), mark,
			ratioCell(row.Ratio, row.Baseline), FormatPPS(row.MinPPS), FormatPPS(row.MaxPPS), FormatPPS(row.Offered))
	}
	if limited {
		fmt.Fprintf(&b, "\n\\* under %.0f%% loss: the generator, not the path, set this rate; the path can forward more.\n", 100*genLimitedLoss)
	}
	if len(r.CPURows) > 0 {
		fmt.Fprintf(&b, "\nCPU cost per packet at a fixed offered rate of %s: busy time of all CPUs over %s (wall time minus "+
			"idle from /proc/stat) per packet received, generator and sink included; \"box\" is the box's own CPU time per packet, read "+
			"directly: the busy time of the box's receive CPU (where the kernel's forwarding, the fast path, the rings' copies and "+
			"the appliance's housekeeping run) plus the run time of the appliance's threads that cannot run there (its workers), "+
			"minus the generator's thread where it shares the receive CPU (median over the repetitions; spread: (max − min) / median); "+
			"\"all CPUs − direct\" subtracts the direct path's all-CPU cost of the same repetition instead (median of the differences); "+
			"\"rx wakes\" are the function-call IPIs a second (the receive stand-in, %s, waking it for the frames) the box's receive CPU took (median):\n\n",
			FormatPPS(r.Settings.Rate), r.Settings.CPUWindow, standIn(r.Settings.RxStandIn))
		b.WriteString("| path | CPU placement | received | ns/pkt all CPUs | vs kernel bridge | min – max | ns/pkt box | box min – max (spread) | all CPUs − direct | rx wakes/s |\n")
		b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		over := false
		for _, row := range r.CPURows {
			if row.Runs == 0 {
				fmt.Fprintf(&b, "| %s | %s | %s | | n/a | | | | | |\n", row.Name, row.Placement, noData(row.Error))
				continue
			}
			mark := ""
			if row.Overloaded {
				mark, over = "†", true
			}
			boxSpread := ""
			if sp := row.BoxSpread(); !math.IsNaN(sp) {
				boxSpread = fmt.Sprintf("%s – %s (%.0f%%)", formatNs(row.MinBoxNsPerPkt), formatNs(row.MaxBoxNsPerPkt), 100*sp)
			}
			fmt.Fprintf(&b, "| %s | %s | %s%s | %s | %s | %s – %s | %s | %s | %s | %s |\n", row.Name, row.Placement, FormatPPS(row.PPS), mark,
				formatNs(row.NsPerPkt), ratioCell(row.Ratio, row.Baseline), formatNs(row.MinNsPerPkt), formatNs(row.MaxNsPerPkt),
				formatNs(row.BoxNsPerPkt), boxSpread, formatNs(row.DiffNsPerPkt), formatNs(row.RxIPIs))
		}
		if over {
			fmt.Fprintf(&b, "\n† did not carry the offered rate (under %.0f%% received): its cost per packet includes the frames dropped on the way.\n",
				100*overloadedShare)
		}
	}
	writeLatency(&b, r)
	writeTargets(&b, r)
	var errs []string
	for _, row := range r.Rows {
		if row.Error != "" && !slices.Contains(errs, row.Path+": "+row.Error) {
			errs = append(errs, row.Path+": "+row.Error)
		}
	}
	if len(r.Notes)+len(errs) > 0 {
		b.WriteString("\n")
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
		for _, e := range errs {
			fmt.Fprintf(&b, "- failed: %s\n", e)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// jitText describes HostInfo.BPFJIT for the report's first line.
func jitText(jit string) string {
	switch jit {
	case "":
		return ""
	case "1", "2":
		return "BPF JIT on"
	case "0":
		return "BPF JIT off (the interpreter runs the fast path)"
	case "absent":
		return "no BPF JIT (the interpreter runs the fast path)"
	}
	return "BPF JIT " + jit
}
