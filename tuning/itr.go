package tuning

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// ITR is an e1000e interrupt throttling mode: one of the names below or a
// rate in interrupts per second ("20000"), 100..100000. In JSON it is a
// string or a number. The empty ITR leaves the setting alone.
type ITR string

// ITR modes with e1000e's rx-usecs code.
const (
	ITROff          ITR = "off"                  // rx-usecs 0: every frame interrupts
	ITRDynamic      ITR = "dynamic"              // rx-usecs 1: adaptive, up to 70000 ints/s
	ITRConservative ITR = "dynamic-conservative" // rx-usecs 3: adaptive, up to 20000 (driver default)
	ITRSimplified   ITR = "simplified"           // rx-usecs 4: 2000..8000 ints/s
)

// Limits of a numeric ITR, from e1000e's rx-usecs range 10..10000 µs.
const (
	MinITRRate = 100    // ints/s; rx-usecs 10000
	MaxITRRate = 100000 // ints/s; rx-usecs 10
)

// e1000e's rx-usecs limits (E1000_MIN_ITR_USECS, E1000_MAX_ITR_USECS).
const (
	minRxUsecs = 10
	maxRxUsecs = 10000
)

// UnmarshalJSON accepts a string or a number of interrupts per second.
func (i *ITR) UnmarshalJSON(b []byte) error {
	var n json.Number
	if err := json.Unmarshal(b, &n); err == nil {
		*i = ITR(n.String())
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("itr: want a mode name or interrupts per second: %w", err)
	}
	*i = ITR(s)
	return nil
}

// RxUsecs maps i to the ethtool rx-usecs value e1000e stores and reads
// back: 0, 1, 3, 4 for the modes; for a rate N, 1e6/N rounded, then
// quantised the way e1000e keeps it (itr & ~3), so that the value is
// stable across a set and a get. Invalid modes and rates outside
// 100..100000 (rx-usecs 2, 5..9 or above 10000, which e1000e rejects with
// EINVAL) are errors.
func (i ITR) RxUsecs() (uint32, error) {
	switch i {
	case ITROff:
		return 0, nil
	case ITRDynamic:
		return 1, nil
	case ITRConservative:
		return 3, nil
	case ITRSimplified:
		return 4, nil
	case "":
		return 0, fmt.Errorf("itr: empty")
	}
	n, err := strconv.ParseUint(string(i), 10, 32)
	if err != nil {
		return 0, fmt.Errorf("itr %q: want off, dynamic, dynamic-conservative, simplified or %d..%d interrupts/s", string(i), MinITRRate, MaxITRRate)
	}
	if n < MinITRRate || n > MaxITRRate {
		return 0, fmt.Errorf("itr %d interrupts/s: out of range %d..%d (e1000e rx-usecs 10..10000; use the mode names for off/dynamic/simplified)", n, MinITRRate, MaxITRRate)
	}
	u := uint32(math.Round(1e6 / float64(n)))
	return e1000eRxUsecsReadback(u), nil
}

// e1000eRxUsecsReadback is what e1000e's get_coalesce returns after
// set_coalesce(u): the driver keeps itr = 1e6/u rounded down to a
// multiple of 4 and reports 1e6/itr. The result is a fixed point.
func e1000eRxUsecsReadback(u uint32) uint32 {
	if u < minRxUsecs {
		return u
	}
	itr := (1000000 / u) &^ 3
	return 1000000 / itr
}

// validRxUsecs reports whether e1000e accepts u (e1000_set_coalesce).
func validRxUsecs(u uint32) bool {
	return (u <= 4 && u != 2) || (u >= minRxUsecs && u <= maxRxUsecs)
}

// DescribeRxUsecs explains an e1000e rx-usecs value.
func DescribeRxUsecs(u uint32) string {
	switch {
	case u == 0:
		return "rx-usecs 0 (off)"
	case u == 1:
		return "rx-usecs 1 (dynamic)"
	case u == 3:
		return "rx-usecs 3 (dynamic-conservative)"
	case u == 4:
		return "rx-usecs 4 (simplified)"
	case u >= minRxUsecs:
		return fmt.Sprintf("rx-usecs %d (%d ints/s)", u, 1000000/u)
	}
	return fmt.Sprintf("rx-usecs %d (invalid for e1000e)", u)
}
