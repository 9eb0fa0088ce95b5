package tuning

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"
)

// Status is the outcome of applying or checking one knob.
type Status string

// Statuses of a Report.
const (
	// StatusOK: the knob already had the wanted value (Apply) or has it (Read).
	StatusOK Status = "ok"
	// StatusChanged: Apply changed the knob and read the wanted value back.
	StatusChanged Status = "changed"
	// StatusDiffers: Read found a value other than the planned one.
	StatusDiffers Status = "differs"
	// StatusUnavailable: the knob does not exist for this NIC or kernel.
	// It is not an error: the plan asks for something this box cannot do.
	StatusUnavailable Status = "unavailable"
	// StatusError: the knob exists but could not be read or set, the wanted
	// value was rejected, or the read-back value is not the wanted one.
	StatusError Status = "error"
)

// Report says what one knob looked like before, what was wanted, and what
// it looked like afterwards.
type Report struct {
	Knob       string `json:"knob"`
	Target     string `json:"target"`
	Before     string `json:"before,omitempty"`
	Wanted     string `json:"wanted,omitempty"`
	After      string `json:"after,omitempty"`
	Status     Status `json:"status"`
	Message    string `json:"message,omitempty"`
	ResetsLink bool   `json:"resetsLink,omitempty"`
}

func (r Report) String() string {
	s := fmt.Sprintf("%s %s: %s", r.Target, r.Knob, r.Status)
	if r.Before != "" || r.After != "" {
		s += fmt.Sprintf(" (%s -> %s, wanted %s)", r.Before, r.After, r.Wanted)
	}
	if r.Message != "" {
		s += ": " + r.Message
	}
	return s
}

// Knob is one tunable: a value in sysfs, procfs or behind an ethtool call.
type Knob interface {
	// Name identifies the knob, e.g. "itr", "rings", "rx-gro",
	// "net.ipv4.conf.eth1.forwarding".
	Name() string
	// Target is what the knob belongs to: a port, an IRQ vector, a driver.
	Target() string
	// ResetsLink says whether changing the knob resets the NIC (the link
	// drops for about 2 s on e1000e).
	ResetsLink() bool
	// Read returns the current value in the knob's display form.
	Read() (string, error)
	// Check compares the current value with want without changing
	// anything. The status is ok, differs, unavailable or error.
	Check(want string) Report
	// Apply sets want if the current value differs and reads it back.
	// It is idempotent: a second Apply reports ok, "already set".
	Apply(want string) Report
}

// ErrUnavailable marks a knob that does not exist for a NIC or kernel.
var ErrUnavailable = errors.New("unavailable")

func unavailable(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUnavailable, fmt.Sprintf(format, args...))
}

// isUnavailable reports whether err means "this knob does not exist here"
// rather than "it exists and failed".
func isUnavailable(err error) bool {
	return errors.Is(err, ErrUnavailable) ||
		errors.Is(err, syscall.EOPNOTSUPP) ||
		errors.Is(err, fs.ErrNotExist)
}

// typed is the inside of a knob: parse a wanted value, get, compare, set,
// format. The generic helpers below turn it into Read, Check and Apply.
type typed[T any] interface {
	Name() string
	Target() string
	ResetsLink() bool
	// parse validates want and returns the value as it will read back,
	// and a note when it differs from want (rounding).
	parse(want string) (T, string, error)
	get() (T, error)
	// set changes cur to want and may return a note (side effects).
	set(cur, want T) (string, error)
	same(cur, want T) bool
	format(v T) string
}

// knob is the Knob made of a typed inside: Read, Check and Apply are the
// generic helpers' over its methods.
type knob[T any] struct{ typed[T] }

func (k knob[T]) Read() (string, error)    { return readTyped(k.typed) }
func (k knob[T]) Check(want string) Report { return checkTyped(k.typed, want) }
func (k knob[T]) Apply(want string) Report { return applyTyped(k.typed, want) }

// noter is implemented by knobs that have something to say about a state
// that matches the plan (e.g. an IRQ whose effective CPU has not moved yet).
type noter[T any] interface {
	note(v, want T) string
}

func newReport[T any](k typed[T], want string) Report {
	return Report{Knob: k.Name(), Target: k.Target(), Wanted: want, ResetsLink: k.ResetsLink()}
}

func (r Report) failed(err error) Report {
	r.Status = StatusError
	if isUnavailable(err) {
		r.Status = StatusUnavailable
	}
	r.Message = err.Error()
	if errors.Is(err, ErrUnavailable) {
		r.Message = strings.Replace(r.Message, ErrUnavailable.Error()+": ", "", 1)
	}
	return r
}

func joinNotes(notes ...string) string {
	var out []string
	for _, n := range notes {
		if n != "" {
			out = append(out, n)
		}
	}
	return strings.Join(out, "; ")
}

func noteOf[T any](k typed[T], v, want T) string {
	if n, ok := k.(noter[T]); ok {
		return n.note(v, want)
	}
	return ""
}

func readTyped[T any](k typed[T]) (string, error) {
	v, err := k.get()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", k.Target(), k.Name(), err)
	}
	return k.format(v), nil
}

func checkTyped[T any](k typed[T], want string) Report {
	r := newReport(k, want)
	w, pnote, err := k.parse(want)
	if err != nil {
		return r.failed(err)
	}
	r.Wanted = k.format(w)
	cur, err := k.get()
	if err != nil {
		return r.failed(err)
	}
	r.Before = k.format(cur)
	r.After = r.Before
	if k.same(cur, w) {
		r.Status = StatusOK
		r.Message = joinNotes(pnote, noteOf(k, cur, w))
		return r
	}
	r.Status = StatusDiffers
	r.Message = pnote
	return r
}

func applyTyped[T any](k typed[T], want string) Report {
	r := newReport(k, want)
	w, pnote, err := k.parse(want)
	if err != nil {
		return r.failed(fmt.Errorf("rejected %q: %w", want, err))
	}
	r.Wanted = k.format(w)
	cur, err := k.get()
	if err != nil {
		return r.failed(err)
	}
	r.Before = k.format(cur)
	if k.same(cur, w) {
		r.After = r.Before
		r.Status = StatusOK
		r.Message = joinNotes("already set", pnote, noteOf(k, cur, w))
		return r
	}
	snote, serr := k.set(cur, w)
	after, gerr := k.get()
	if gerr == nil {
		r.After = k.format(after)
	}
	switch {
	case errors.Is(serr, ErrUnavailable):
		return r.failed(serr)
	case serr != nil:
		return r.failed(fmt.Errorf("set %s: %w", r.Wanted, serr))
	case gerr != nil:
		r = r.failed(fmt.Errorf("read back: %w", gerr))
		r.Status = StatusError
		return r
	case !k.same(after, w):
		r.Status = StatusError
		r.Message = joinNotes(fmt.Sprintf("read back %s, wanted %s", r.After, r.Wanted), snote)
		return r
	}
	r.Status = StatusChanged
	r.Message = joinNotes(pnote, snote, noteOf(k, after, w))
	return r
}
