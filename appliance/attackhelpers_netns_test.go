package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"e1kbox/internal/netnstest"
)

// Helper programs and small helpers of the attack tests (see natHelper).

// pacedResult is what helperPaced prints.
type pacedResult struct {
	OK, Failed int
	// Slow counts connections whose connect took a second or more: a SYN
	// or SYN/ACK was lost and retransmitted.
	Slow         int
	P50Ms, MaxMs float64 // connect times
	Errors       []string
}

// helperPaced opens count new connections to addr, evenly spread over
// the duration over (one HTTP/1.0 request each, then closed), and prints
// a pacedResult.
func helperPaced(addr, count, over string) error {
	var n int
	fmt.Sscan(count, &n)
	d, err := time.ParseDuration(over)
	if err != nil {
		return err
	}
	var mu sync.Mutex
	var res pacedResult
	var dials []float64
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		time.Sleep(time.Until(start.Add(d * time.Duration(i) / time.Duration(n))))
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			c, err := net.DialTimeout("tcp", addr, 10*time.Second)
			dial := time.Since(t0)
			var body []byte
			if err == nil {
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				if _, err = io.WriteString(c, "GET / HTTP/1.0\r\n\r\n"); err == nil {
					var resp *http.Response
					if resp, err = http.ReadResponse(bufio.NewReader(c), nil); err == nil {
						body, err = io.ReadAll(resp.Body)
					}
					if err == nil && len(body) == 0 {
						err = errors.New("empty answer")
					}
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				res.Failed++
				if len(res.Errors) < 5 {
					res.Errors = append(res.Errors, err.Error())
				}
				return
			}
			res.OK++
			dials = append(dials, float64(dial)/float64(time.Millisecond))
			if dial >= time.Second {
				res.Slow++
			}
		}()
	}
	wg.Wait()
	if len(dials) > 0 {
		res.P50Ms, res.MaxMs = median(dials), slices.Max(dials)
	}
	b, _ := json.Marshal(res)
	fmt.Println(string(b))
	return nil
}

// helperConn holds one TCP connection to an echo server at addr: it
// prints "local ADDR", then for every line on stdin echoes a line over
// the connection and prints "ok" or "error: ...".
func helperConn(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Println("local", c.LocalAddr())
	r := bufio.NewReader(c)
	in := bufio.NewScanner(os.Stdin)
	for i := 0; in.Scan(); i++ {
		msg := fmt.Sprintf("ping %d\n", i)
		c.SetDeadline(time.Now().Add(3 * time.Second))
		_, err := io.WriteString(c, msg)
		if err == nil {
			var got string
			if got, err = r.ReadString('\n'); err == nil && got != msg {
				err = fmt.Errorf("echo %q, want %q", got, msg)
			}
		}
		if err != nil {
			fmt.Println("error:", err)
		} else {
			fmt.Println("ok")
		}
	}
	return nil
}

// paced runs helperPaced in host ns in the background: count connections
// to addr over d. wait returns its result.
func (l *lab) paced(t *testing.T, ns int, addr string, count int, d time.Duration) (wait func() pacedResult) {
	t.Helper()
	_, _, out := l.helper(t, ns, "paced", addr, fmt.Sprint(count), d.String())
	return func() pacedResult {
		t.Helper()
		var r pacedResult
		s := line(t, out, d+30*time.Second)
		if err := json.Unmarshal([]byte(s), &r); err != nil {
			t.Fatalf("paced connections: %v: %q", err, s)
		}
		return r
	}
}

// macOf returns the link address of dev in namespace ns.
func macOf(t *testing.T, ns *netnstest.Namespace, dev string) [6]byte {
	t.Helper()
	s := strings.TrimSpace(ns.Run(t, "cat", "/sys/class/net/"+dev+"/address"))
	hw, err := net.ParseMAC(s)
	if err != nil || len(hw) != 6 {
		t.Fatalf("address of %s: %q %v", dev, s, err)
	}
	return [6]byte(hw)
}

// ip4 parses a dotted IPv4 address.
func ip4(s string) [4]byte { return [4]byte(net.ParseIP(s).To4()) }
