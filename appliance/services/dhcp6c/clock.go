package dhcp6c

import "time"

// clock is the time source of the state machine; tests drive a fake one.
type clock interface {
	Now() time.Time
	// Timer fires once at (or after) at; stop releases it.
	Timer(at time.Time) (fire <-chan time.Time, stop func())
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) Timer(at time.Time) (<-chan time.Time, func()) {
	t := time.NewTimer(time.Until(at))
	return t.C, func() { t.Stop() }
}
