package main

import (
	"cmp"
	"math"
	"slices"
)

// Summarize groups the samples by path and size into rows in the order
// of paths and sizes, with medians and ratios to the kernel bridge row
// (path name baseline) of the same size. placements maps a path to its
// CPU placement text and errs to the reason it has no samples.
func Summarize(samples []Sample, paths []string, sizes []int, baseline, direct string,
	placements, errs map[string]string) ([]Row, []CPURow) {
	type key struct {
		path string
		size int
	}
	tp := map[key][]Sample{}
	cpu := map[key][]Sample{}
	for _, s := range samples {
		k := key{s.Path, s.Size}
		switch s.Kind {
		case KindThroughput:
			tp[k] = append(tp[k], s)
		case KindCPU:
			cpu[k] = append(cpu[k], s)
		}
	}
	var rows []Row
	for _, size := range sizes {
		base := medianOf(tp[key{baseline, size}], func(s Sample) float64 { return s.PPS })
		for _, p := range paths {
			ss := tp[key{p, size}]
			r := Row{Name: RowName(p, size), Path: p, Size: size, Placement: placements[p], Runs: len(ss),
				PPS: math.NaN(), MinPPS: math.NaN(), MaxPPS: math.NaN(), Offered: math.NaN(), Ratio: math.NaN(), Error: errs[p]}
			if len(ss) > 0 {
				r.PPS = medianOf(ss, func(s Sample) float64 { return s.PPS })
				r.Offered = medianOf(ss, func(s Sample) float64 { return s.Offered })
				r.MinPPS, r.MaxPPS = rangeOf(ss, func(s Sample) float64 { return s.PPS })
				r.Ratio = Ratio(r.PPS, base)
				r.GenLimited = r.PPS >= (1-genLimitedLoss)*r.Offered
			}
			rows = append(rows, r)
		}
	}
	var cpuRows []CPURow
	for _, size := range sizes {
		if len(cpu[key{baseline, size}]) == 0 && len(cpu[key{direct, size}]) == 0 {
			found := false
			for _, p := range paths {
				found = found || len(cpu[key{p, size}]) > 0
			}
			if !found {
				continue
			}
		}
		ns := func(p string) float64 {
			return medianOf(cpu[key{p, size}], func(s Sample) float64 { return s.NsPerPacket })
		}
		directNs, baseNs := ns(direct), ns(baseline)
		for _, p := range paths {
			ss := cpu[key{p, size}]
			r := CPURow{Name: RowName(p, size), Path: p, Size: size, Placement: placements[p], Runs: len(ss),
				PPS: math.NaN(), NsPerPkt: math.NaN(), MinNsPerPkt: math.NaN(), MaxNsPerPkt: math.NaN(), TickNsPerPkt: math.NaN(),
				BoxNsPerPkt: math.NaN(), MinBoxNsPerPkt: math.NaN(), MaxBoxNsPerPkt: math.NaN(),
				DiffNsPerPkt: math.NaN(), MinDiffNsPerPkt: math.NaN(), MaxDiffNsPerPkt: math.NaN(), RxIPIs: math.NaN(), Ratio: math.NaN(), Error: errs[p]}
			if len(ss) > 0 {
				r.Rate = ss[0].Rate
				r.PPS = medianOf(ss, func(s Sample) float64 { return s.PPS })
				r.NsPerPkt = ns(p)
				r.MinNsPerPkt, r.MaxNsPerPkt = rangeOf(ss, func(s Sample) float64 { return s.NsPerPacket })
				r.TickNsPerPkt = medianOf(ss, func(s Sample) float64 { return s.TickNsPerPacket })
				if p != direct {
					r.DiffNsPerPkt = r.NsPerPkt - directNs
					if d := pairedBox(ss, cpu[key{direct, size}]); d != nil {
						r.DiffNsPerPkt = Median(d)
						r.MinDiffNsPerPkt, r.MaxDiffNsPerPkt = slices.Min(d), slices.Max(d)
					}
					r.BoxNsPerPkt, r.MinBoxNsPerPkt, r.MaxBoxNsPerPkt = r.DiffNsPerPkt, r.MinDiffNsPerPkt, r.MaxDiffNsPerPkt
					if box := directBox(ss); box != nil {
						r.BoxNsPerPkt = Median(box)
						r.MinBoxNsPerPkt, r.MaxBoxNsPerPkt = slices.Min(box), slices.Max(box)
					}
				}
				if ipis := rxIPIs(ss); ipis != nil {
					r.RxIPIs = Median(ipis)
				}
				r.Ratio = Ratio(r.NsPerPkt, baseNs)
				r.Overloaded = r.PPS < overloadedShare*r.Rate
			}
			cpuRows = append(cpuRows, r)
		}
	}
	return rows, cpuRows
}

// medianOf is the median of f over the samples.
func medianOf(ss []Sample, f func(Sample) float64) float64 {
	xs := make([]float64, len(ss))
	for i, s := range ss {
		xs[i] = f(s)
	}
	return Median(xs)
}

// rangeOf is the least and the greatest of f over the samples, which are
// not none, in cmp.Compare's order (a NaN is the least).
func rangeOf(ss []Sample, f func(Sample) float64) (lo, hi float64) {
	lo, hi = f(ss[0]), f(ss[0])
	for _, s := range ss[1:] {
		v := f(s)
		if cmp.Compare(v, lo) < 0 {
			lo = v
		}
		if cmp.Compare(v, hi) > 0 {
			hi = v
		}
	}
	return lo, hi
}

// rxIPIs is the receive CPU's IPIs per second of the samples that have
// a reading, nil for none.
func rxIPIs(ss []Sample) []float64 {
	var out []float64
	for _, s := range ss {
		if s.RxIRQs > 0 {
			out = append(out, s.RxIPIs)
		}
	}
	return out
}

// pairedBox is each CPU sample of ss minus the direct path's sample of
// the same repetition, nil unless every sample has one.
func pairedBox(ss, direct []Sample) []float64 {
	byRep := map[int]float64{}
	for _, d := range direct {
		byRep[d.Rep] = d.NsPerPacket
	}
	var out []float64
	for _, s := range ss {
		d, ok := byRep[s.Rep]
		if !ok {
			return nil
		}
		out = append(out, s.NsPerPacket-d)
	}
	return out
}

// directBox is the box's CPU per packet read directly in each sample of
// ss, nil unless every sample has it.
func directBox(ss []Sample) []float64 {
	var out []float64
	for _, s := range ss {
		if s.BoxNsPerPacket <= 0 {
			return nil
		}
		out = append(out, s.BoxNsPerPacket)
	}
	return out
}

// BoxSpread is the spread of a row's box CPU per packet over its
// repetitions, (max − min) / median; NaN without paired repetitions.
func (r *CPURow) BoxSpread() float64 {
	if r.Runs < 2 || math.IsNaN(r.MinBoxNsPerPkt) || r.BoxNsPerPkt <= 0 {
		return math.NaN()
	}
	return (r.MaxBoxNsPerPkt - r.MinBoxNsPerPkt) / r.BoxNsPerPkt
}

// Rebase takes the ratios of the rows of the paths in bases against the
// row of their baseline path at the same size instead (NaN without one)
// and records the baseline in the rows.
func Rebase(rows []Row, cpuRows []CPURow, bases map[string]string) {
	type key struct {
		path string
		size int
	}
	pps, ns := map[key]float64{}, map[key]float64{}
	for _, r := range rows {
		if r.Runs > 0 {
			pps[key{r.Path, r.Size}] = r.PPS
		}
	}
	for _, r := range cpuRows {
		if r.Runs > 0 {
			ns[key{r.Path, r.Size}] = r.NsPerPkt
		}
	}
	lookup := func(m map[key]float64, k key) float64 {
		if v, ok := m[k]; ok {
			return v
		}
		return math.NaN()
	}
	for i := range rows {
		if b, ok := bases[rows[i].Path]; ok {
			rows[i].Baseline = b
			rows[i].Ratio = Ratio(rows[i].PPS, lookup(pps, key{b, rows[i].Size}))
		}
	}
	for i := range cpuRows {
		if b, ok := bases[cpuRows[i].Path]; ok {
			cpuRows[i].Baseline = b
			cpuRows[i].Ratio = Ratio(cpuRows[i].NsPerPkt, lookup(ns, key{b, cpuRows[i].Size}))
		}
	}
}
