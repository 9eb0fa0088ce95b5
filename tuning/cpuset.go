package tuning

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// maxCPU bounds CPU numbers accepted by the parsers (the kernel's
// NR_CPUS is at most 8192).
const maxCPU = 8191

// CPUSet is a sorted set of CPU numbers without duplicates.
type CPUSet []int

// NewCPUSet returns the sorted set of cpus.
func NewCPUSet(cpus ...int) CPUSet {
	s := slices.Clone(cpus)
	slices.Sort(s)
	return slices.Compact(s)
}

// Contains reports whether cpu is in s.
func (s CPUSet) Contains(cpu int) bool {
	_, ok := slices.BinarySearch(s, cpu)
	return ok
}

// Equal reports whether s and o hold the same CPUs.
func (s CPUSet) Equal(o CPUSet) bool { return slices.Equal(s, o) }

// String formats s as a kernel CPU list ("0-3,6"); the empty set is "".
func (s CPUSet) String() string {
	var b strings.Builder
	for i := 0; i < len(s); {
		j := i
		for j+1 < len(s) && s[j+1] == s[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(s[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(s[j]))
		}
		i = j + 1
	}
	return b.String()
}

// Mask formats s as a kernel hex CPU mask in comma-separated 32-bit groups
// (the format of rps_cpus and smp_affinity); the empty set is "0".
func (s CPUSet) Mask() string {
	if len(s) == 0 {
		return "0"
	}
	words := make([]uint32, s[len(s)-1]/32+1)
	for _, c := range s {
		words[c/32] |= 1 << (c % 32)
	}
	var b strings.Builder
	for i := len(words) - 1; i >= 0; i-- {
		if i == len(words)-1 {
			fmt.Fprintf(&b, "%x", words[i])
		} else {
			fmt.Fprintf(&b, ",%08x", words[i])
		}
	}
	return b.String()
}

// ParseCPUList parses a kernel CPU list such as "0-3,6" (the format of
// smp_affinity_list, effective_affinity_list and cpu/online). White space
// around it is ignored; the empty string is the empty set.
func ParseCPUList(s string) (CPUSet, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return CPUSet{}, nil
	}
	var cpus []int
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := parseCPU(lo)
		if err != nil {
			return nil, fmt.Errorf("cpu list %q: %w", s, err)
		}
		b := a
		if isRange {
			if b, err = parseCPU(hi); err != nil {
				return nil, fmt.Errorf("cpu list %q: %w", s, err)
			}
			if b < a {
				return nil, fmt.Errorf("cpu list %q: range %s is backwards", s, part)
			}
		}
		for c := a; c <= b; c++ {
			cpus = append(cpus, c)
		}
	}
	return NewCPUSet(cpus...), nil
}

func parseCPU(s string) (int, error) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("bad cpu number %q", s)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n > maxCPU {
		return 0, fmt.Errorf("cpu number %q out of range 0..%d", s, maxCPU)
	}
	return n, nil
}

// ParseCPUMask parses a kernel hex CPU mask such as "3" or "ff,00000001"
// (the format of rps_cpus and smp_affinity).
func ParseCPUMask(s string) (CPUSet, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, fmt.Errorf("cpu mask: empty")
	}
	groups := strings.Split(s, ",")
	if len(groups)*32 > maxCPU+1 {
		return nil, fmt.Errorf("cpu mask %q: too long", s)
	}
	var cpus []int
	for i, g := range groups {
		if g == "" || len(g) > 8 {
			return nil, fmt.Errorf("cpu mask %q: bad group %q", s, g)
		}
		w, err := strconv.ParseUint(g, 16, 32)
		if err != nil {
			return nil, fmt.Errorf("cpu mask %q: %w", s, err)
		}
		base := (len(groups) - 1 - i) * 32
		for bit := range 32 {
			if w&(1<<bit) != 0 {
				cpus = append(cpus, base+bit)
			}
		}
	}
	return NewCPUSet(cpus...), nil
}
