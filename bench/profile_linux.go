package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// profile runs each e1kbox path at the CPU table's rate (full speed
// without one) with the first frame size and profiles it: with the appliance's pprof endpoint if its dashboard
// serves /debug/pprof/, else with perf (the appliance process, and the
// whole system for the kernel's share). Profiles go to o.profile; the top
// functions are printed to w and written next to them.
func (h *harness) profile(ctx context.Context, o *options, paths []Path, w io.Writer) error {
	if err := os.MkdirAll(o.profile, 0o755); err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	var errs []error
	for _, p := range paths {
		if p.Kind == kindDirect || ctx.Err() != nil {
			continue
		}
		if err := h.profilePath(ctx, o, p, w); err != nil {
			errs = append(errs, fmt.Errorf("profile %s: %w", p.Name, err))
		}
	}
	return errors.Join(errs...)
}

// slug makes a file name from a path name.
func slug(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		case b.Len() > 0 && !strings.HasSuffix(b.String(), "-"):
			b.WriteByte('-')
		}
	}
	return strings.TrimSuffix(b.String(), "-")
}

func (h *harness) profilePath(ctx context.Context, o *options, p Path, w io.Writer) (err error) {
	pl, err := placeFor(p, h.cpus)
	if err != nil {
		return err
	}
	b, err := h.setup(ctx, p, pl)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := b.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	if err := h.ready(ctx, p, pl, b); err != nil {
		return err
	}
	// As the measured runs: NAT connections established, the fast path
	// holding the flows.
	if p.NAT {
		if err := h.establishChecked(ctx, p, pl, "profile "+p.Name, w); err != nil {
			return err
		}
	}
	if _, err := h.warmFast(ctx, p, pl); err != nil {
		return err
	}
	size := o.sizes[0]
	spec, err := h.genFor(p, pl, size, o.rate) // the CPU table's rate (0: full speed)
	if err != nil {
		return err
	}
	if err := h.learn(); err != nil {
		return err
	}
	g, err := startGenerator(spec)
	if err != nil {
		return err
	}
	defer g.Stop()
	sleep(ctx, o.warmup)
	secs := max(1, int(o.cpuWindow.Round(time.Second)/time.Second))
	name := slug(RowName(p.Name, size))
	speed := "full speed"
	if o.rate > 0 {
		speed = fmt.Sprintf("%.3f Mpps offered", o.rate/1e6)
	}
	fmt.Fprintf(w, "\nprofile of %s (%d s at %s, %s):\n", RowName(p.Name, size), secs, speed, pl)

	if p.Kind != kindE1kbox {
		return h.perfProfile(ctx, 0, pl.RX, name, secs, o.profile, w)
	}
	base := "http://" + applianceListen + "/debug/pprof/"
	if code, _, err := httpGetIn(h.t.box, base, 5*time.Second); err == nil && code == http.StatusOK {
		return h.pprofProfile(ctx, base, name, secs, o.profile, w)
	}
	return h.perfProfile(ctx, b.appliance.Process.Pid, pl.RX, name, secs, o.profile, w)
}

// pprofProfile fetches a CPU profile from the appliance's pprof endpoint.
func (h *harness) pprofProfile(ctx context.Context, base, name string, secs int, dir string, w io.Writer) error {
	code, body, err := httpGetIn(h.t.box, base+"profile?seconds="+strconv.Itoa(secs), time.Duration(secs+10)*time.Second)
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("pprof: HTTP %d: %s", code, lastLines(string(body), 3))
	}
	file := filepath.Join(dir, name+".pprof")
	if err := os.WriteFile(file, body, 0o644); err != nil {
		return fmt.Errorf("pprof: %w", err)
	}
	out, err := run(ctx, "go", "tool", "pprof", "-top", "-nodecount=25", h.appliance, file)
	if err != nil {
		return err
	}
	return report(w, filepath.Join(dir, name+".top.txt"), "pprof "+file, out)
}

// perfProfile samples the appliance process (pid; 0 for a kernel path)
// and the box's receive CPU rx with perf record (software cpu-clock:
// works in VMs without a PMU). The receive CPU's profile of a kernel path
// and of an e1kbox path compare where the box CPU of the CPU table goes.
func (h *harness) perfProfile(ctx context.Context, pid, rx int, name string, secs int, dir string, w io.Writer) error {
	appData := filepath.Join(dir, name+".perf.data")
	rxData := filepath.Join(dir, name+"-rx.perf.data")
	sleepArg := strconv.Itoa(secs)
	type rec struct {
		cmd *exec.Cmd
		out strings.Builder
	}
	var recs []*rec
	if pid > 0 {
		recs = append(recs, &rec{cmd: exec.CommandContext(ctx, "perf", "record", "-q", "-e", "cpu-clock", "-F", "999", "-g", "-o", appData, "-p", strconv.Itoa(pid), "--", "sleep", sleepArg)})
	}
	recs = append(recs, &rec{cmd: exec.CommandContext(ctx, "perf", "record", "-q", "-e", "cpu-clock", "-F", "999", "-g", "-C", strconv.Itoa(rx), "-o", rxData, "--", "sleep", sleepArg)})
	for i, r := range recs {
		r.cmd.Stdout, r.cmd.Stderr = &r.out, &r.out
		if err := r.cmd.Start(); err != nil {
			for _, s := range recs[:i] {
				s.cmd.Wait()
			}
			return fmt.Errorf("perf record: %w", err)
		}
	}
	var errs []error
	for _, r := range recs {
		if err := r.cmd.Wait(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w: %s", strings.Join(r.cmd.Args[:10], " "), err, lastLines(r.out.String(), 3)))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	files := []struct{ data, title, fields string }{
		{rxData, fmt.Sprintf("perf, the receive CPU (cpu%d) %s", rx, rxData), "overhead,comm,dso,sym"},
	}
	if pid > 0 {
		files = append(files, struct{ data, title, fields string }{appData, "perf, e1kbox process " + appData, "overhead,dso,sym"})
	}
	for _, f := range files {
		out, err := run(ctx, "perf", "report", "-i", f.data, "--stdio", "--no-children", "-g", "none",
			"-F", f.fields, "--percent-limit", "1")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, report(w, strings.TrimSuffix(f.data, ".perf.data")+".top.txt", f.title, topLines(out, 25)))
	}
	return errors.Join(errs...)
}

// topLines drops perf report's comment lines and keeps the first n others.
func topLines(s string, n int) string {
	var out []string
	for line := range strings.SplitSeq(s, "\n") {
		if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
			continue
		}
		if out = append(out, strings.TrimRight(line, " ")); len(out) == n {
			break
		}
	}
	return strings.Join(out, "\n") + "\n"
}

// report prints a top list and saves it.
func report(w io.Writer, file, title, text string) error {
	fmt.Fprintf(w, "-- %s\n%s", title, text)
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	return nil
}

// httpGetIn GETs url from inside namespace ns: the connection is dialed on
// a thread in ns, the request runs over it.
func httpGetIn(ns, url string, timeout time.Duration) (int, []byte, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	var conn net.Conn
	if err := inNetns(ns, func() error {
		c, err := net.DialTimeout("tcp", req.URL.Host, 2*time.Second)
		conn = c
		return err
	}); err != nil {
		return 0, nil, fmt.Errorf("GET %s in %s: %w", url, ns, err)
	}
	return httpGetConn(conn, req, timeout)
}

// httpGetConn runs req over an established connection.
func httpGetConn(conn net.Conn, req *http.Request, timeout time.Duration) (int, []byte, error) {
	used := false
	tr := &http.Transport{DisableKeepAlives: true, DialContext: func(context.Context, string, string) (net.Conn, error) {
		if used {
			return nil, errors.New("connection already used")
		}
		used = true
		return conn, nil
	}}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: timeout}).Do(req)
	if err != nil {
		conn.Close()
		return 0, nil, fmt.Errorf("GET %s: %w", req.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, nil, fmt.Errorf("GET %s: %w", req.URL, err)
	}
	return resp.StatusCode, body, nil
}
