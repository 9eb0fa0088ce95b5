package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
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
	"time"
)

// The helper programs the netns tests run in the labs' namespaces: this
// test binary started again (lab.helper) with E1KBOX_NAT_HELPER naming the
// program; each talks to the test over its stdin and stdout.

// natHelper runs a helper program in a namespace (this test binary,
// started by lab.helper) and returns the exit code.
func natHelper(mode string, args []string) int {
	var err error
	switch mode {
	case "serve":
		err = helperServe(args[0], args[1], args[2])
	case "conns":
		err = helperConns(args[0], args[1])
	case "hold":
		err = helperHold(args[0], args[1])
	case "udp":
		err = helperUDP(args[0], args[1], args[2])
	case "udpecho":
		err = helperUDPEcho(args[0])
	case "udpc":
		err = helperUDPClient(args[0])
	case "paced":
		err = helperPaced(args[0], args[1], args[2])
	case "conn":
		err = helperConn(args[0])
	default:
		err = fmt.Errorf("unknown helper %q", mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	return 0
}

func init() {
	if mode := os.Getenv("E1KBOX_NAT_HELPER"); mode != "" {
		os.Exit(natHelper(mode, os.Args[1:]))
	}
}

// helperServe answers HTTP with the client's address (and logs it) and
// echoes lines on a TCP port, until stdin closes.
func helperServe(httpAddr, echoAddr, logPath string) error {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	var mu sync.Mutex
	hl, err := net.Listen("tcp", httpAddr)
	if err != nil {
		return err
	}
	el, err := net.Listen("tcp", echoAddr)
	if err != nil {
		return err
	}
	go http.Serve(hl, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		fmt.Fprintln(logf, r.RemoteAddr)
		mu.Unlock()
		io.WriteString(w, r.RemoteAddr)
	}))
	go func() {
		for {
			c, err := el.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	fmt.Println("serving")
	io.Copy(io.Discard, os.Stdin)
	return nil
}

// helperConns opens n connections to addr at once, says "dialed n", waits
// for a line on stdin, then makes one HTTP/1.0 request on each and prints
// how many completed and the client addresses the server reported.
func helperConns(addr, count string) error {
	var n int
	fmt.Sscan(count, &n)
	conns := make([]net.Conn, n)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []string
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.DialTimeout("tcp", addr, 15*time.Second)
			if err != nil {
				mu.Lock()
				errs = append(errs, err.Error())
				mu.Unlock()
				return
			}
			conns[i] = c
		}()
	}
	wg.Wait()
	dialed := 0
	for _, c := range conns {
		if c != nil {
			dialed++
		}
	}
	fmt.Printf("dialed %d\n", dialed)
	bufio.NewReader(os.Stdin).ReadString('\n')
	res := struct {
		OK      int
		Remotes map[string]int
		Errors  []string
	}{Remotes: map[string]int{}}
	for _, c := range conns {
		if c == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			c.SetDeadline(time.Now().Add(15 * time.Second))
			_, err := io.WriteString(c, "GET / HTTP/1.0\r\n\r\n")
			var body []byte
			if err == nil {
				var resp *http.Response
				if resp, err = http.ReadResponse(bufio.NewReader(c), nil); err == nil {
					body, err = io.ReadAll(resp.Body)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err.Error())
				return
			}
			res.OK++
			host, _, _ := net.SplitHostPort(string(body))
			res.Remotes[host]++
		}()
	}
	wg.Wait()
	res.Errors = errs[:min(len(errs), 5)]
	b, _ := json.Marshal(res)
	fmt.Println(string(b))
	return nil
}

// helperHold opens n echo connections, checks a line on each, says
// "ready n", waits for a line on stdin, checks another line on each and
// prints how many still worked.
func helperHold(addr, count string) error {
	var n int
	fmt.Sscan(count, &n)
	type conn struct {
		c net.Conn
		r *bufio.Reader
	}
	var conns []conn
	echo := func(c conn, msg string) bool {
		c.c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(c.c, msg+"\n"); err != nil {
			return false
		}
		s, err := c.r.ReadString('\n')
		return err == nil && s == msg+"\n"
	}
	for i := range n {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			return err
		}
		cc := conn{c, bufio.NewReader(c)}
		if !echo(cc, fmt.Sprint("hello ", i)) {
			return fmt.Errorf("connection %d: no echo", i)
		}
		conns = append(conns, cc)
	}
	fmt.Printf("ready %d\n", len(conns))
	bufio.NewReader(os.Stdin).ReadString('\n')
	ok := 0
	for i, c := range conns {
		if echo(c, fmt.Sprint("again ", i)) {
			ok++
		}
		c.c.Close()
	}
	fmt.Printf("{\"OK\": %d}\n", ok)
	return nil
}

// helperUDP sends one datagram to addr from each of n source ports
// starting at first, and says "sent n".
func helperUDP(addr, first, count string) error {
	var port, n int
	fmt.Sscan(first, &port)
	fmt.Sscan(count, &n)
	dst, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return err
	}
	for i := range n {
		c, err := net.ListenUDP("udp", &net.UDPAddr{Port: port + i})
		if err != nil {
			return err
		}
		if _, err := c.WriteTo([]byte("ping"), dst); err != nil {
			c.Close()
			return err
		}
		c.Close()
		if i%50 == 49 {
			time.Sleep(5 * time.Millisecond) // stay under the router's rates
		}
	}
	fmt.Printf("sent %d\n", n)
	return nil
}

// helperUDPEcho answers every datagram on addr, until stdin closes:
// "whoami" with "you ADDR:PORT" (the source it saw), anything else with
// itself.
func helperUDPEcho(addr string) error {
	c, err := net.ListenPacket("udp4", addr)
	if err != nil {
		return err
	}
	go func() {
		io.Copy(io.Discard, os.Stdin)
		c.Close()
	}()
	fmt.Println("serving")
	buf := make([]byte, 65536)
	for {
		n, from, err := c.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		reply := buf[:n]
		if string(reply) == "whoami" {
			reply = []byte("you " + from.String())
		}
		c.WriteTo(reply, from)
	}
}

// helperUDPClient sends from local port port what stdin says ("send
// ADDR:PORT SIZE": the test payload; "whoami ADDR:PORT") and prints every
// datagram it receives: "recv FROM SIZE DIGEST", or "recv FROM TEXT" for
// a whoami answer.
func helperUDPClient(port string) error {
	var p int
	fmt.Sscan(port, &p)
	c, err := net.ListenUDP("udp4", &net.UDPAddr{Port: p})
	if err != nil {
		return err
	}
	go func() {
		buf := make([]byte, 65536)
		for {
			n, from, err := c.ReadFrom(buf)
			if err != nil {
				return
			}
			if s := string(buf[:n]); strings.HasPrefix(s, "you ") {
				fmt.Printf("recv %s %s\n", from, strings.TrimPrefix(s, "you "))
				continue
			}
			d := sha256.Sum256(buf[:n])
			fmt.Printf("recv %s %d %s\n", from, n, hex.EncodeToString(d[:8]))
		}
	}()
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		var verb, to string
		var n int
		fmt.Sscan(sc.Text(), &verb, &to, &n)
		dst, err := net.ResolveUDPAddr("udp4", to)
		if err != nil {
			return err
		}
		b := []byte("whoami")
		if verb == "send" {
			b, _ = payload(n)
		}
		if _, err := c.WriteTo(b, dst); err != nil {
			return err
		}
	}
	return nil
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
