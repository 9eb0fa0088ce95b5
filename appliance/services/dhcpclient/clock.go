package dhcpclient

import "time"

// Clock is the time source of a client's state machine; tests drive a fake
// one.
type Clock interface {
	Now() time.Time
	// Timer fires once at (or after) at; stop releases it.
	Timer(at time.Time) (fire <-chan time.Time, stop func())
}

// RealClock is the wall clock.
type RealClock struct{}

// Now is time.Now.
func (RealClock) Now() time.Time { return time.Now() }

// Timer is a time.Timer for at.
func (RealClock) Timer(at time.Time) (<-chan time.Time, func()) {
	t := time.NewTimer(time.Until(at))
	return t.C, func() { t.Stop() }
}
