package main

import "testing"

func TestLogTail(t *testing.T) {
	crash := "time=1 level=INFO msg=start\npanic: runtime error: invalid memory address\n\ngoroutine 1 [running]:\nmain.f()\n\t/x.go:3\nmain.main()\n\t/x.go:9\n"
	for _, tc := range []struct {
		name, log string
		n         int
		want      string
	}{
		{"last lines", "a\nb\nc\nd\n", 2, "c | d"},
		{"short log", "a\n", 5, "a"},
		{"panic", crash, 3, "panic: runtime error: invalid memory address |  | goroutine 1 [running]: | main.f()"},
		{"fatal", "x\nfatal error: out of memory\ny\n", 1, "fatal error: out of memory | y"},
	} {
		if got := logTail(tc.log, tc.n); got != tc.want {
			t.Errorf("%s: logTail = %q, want %q", tc.name, got, tc.want)
		}
	}
}
