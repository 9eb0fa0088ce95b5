package webui

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"time"
)

// Diagnostics runs network tests from the box itself.
type Diagnostics interface {
	// Sources are where a test can run from: "" (the kernel's routing)
	// first, then interfaces a test may be bound to.
	Sources() []DiagSource
	// Ping sends req.Count echo requests, calls reply for each answer or
	// timeout, and returns the summary.
	Ping(ctx context.Context, req PingRequest, reply func(PingReply)) (PingSummary, error)
	// Traceroute probes with rising TTLs and calls hop for each TTL.
	Traceroute(ctx context.Context, req TraceRequest, hop func(TraceHop)) error
	// Lookup asks a DNS server.
	Lookup(ctx context.Context, req LookupRequest) (LookupResult, error)
}

// DiagSource is where a test runs from.
type DiagSource struct {
	// ID is the interface a test binds to; "" for the kernel's routing.
	ID    string `json:"id"`
	Label string `json:"label"`
}

// PingRequest is the body of POST /api/diag/ping.
type PingRequest struct {
	Host   string `json:"host"`
	Source string `json:"source,omitempty"`
	// Count is 1..100 (default 4); Size the payload bytes, 0..1472
	// (default 56).
	Count int `json:"count,omitempty"`
	Size  int `json:"size,omitempty"`
	// Interval between requests (default 1 s, at least 0.2 s); Timeout
	// per answer (default 2 s).
	Interval Duration `json:"interval_s,omitempty"`
	Timeout  Duration `json:"timeout_s,omitempty"`
}

// PingReply is one echo reply or a timeout.
type PingReply struct {
	Seq   int        `json:"seq"`
	From  netip.Addr `json:"from,omitzero"`
	Bytes int        `json:"bytes,omitempty"`
	TTL   int        `json:"ttl,omitempty"`
	RTT   Duration   `json:"rtt_s"`
	// Error is "timeout" or what came back instead of a reply.
	Error string `json:"error,omitempty"`
}

// PingSummary is the end of a ping.
type PingSummary struct {
	Target   netip.Addr `json:"target"`
	Sent     int        `json:"sent"`
	Received int        `json:"received"`
	Min      Duration   `json:"min_s"`
	Avg      Duration   `json:"avg_s"`
	Max      Duration   `json:"max_s"`
}

// TraceRequest is the body of POST /api/diag/traceroute.
type TraceRequest struct {
	Host   string `json:"host"`
	Source string `json:"source,omitempty"`
	// MaxHops is 1..64 (default 30); Probes per hop 1..5 (default 3).
	MaxHops int      `json:"max_hops,omitempty"`
	Probes  int      `json:"probes,omitempty"`
	Timeout Duration `json:"timeout_s,omitempty"` // per probe, default 1 s
}

// TraceHop is what one TTL found.
type TraceHop struct {
	TTL int `json:"ttl"`
	// Addr answered (invalid: no answer, "*").
	Addr netip.Addr `json:"addr,omitzero"`
	// RTTs per probe; a lost probe is -1.
	RTTs []Duration `json:"rtts_s"`
	// Reached: Addr is the target.
	Reached bool `json:"reached"`
}

// LookupRequest is the body of POST /api/diag/lookup.
type LookupRequest struct {
	Name string `json:"name"`
	// Type is A (default), AAAA, MX, TXT, NS, CNAME, PTR, SOA, SRV or ANY.
	Type string `json:"type,omitempty"`
	// Server is host[:port]; "" asks the box's own resolver.
	Server string `json:"server,omitempty"`
	Source string `json:"source,omitempty"`
}

// LookupResult is a DNS answer.
type LookupResult struct {
	Server    string   `json:"server"`
	RCode     string   `json:"rcode"`
	RTT       Duration `json:"rtt_s"`
	Answer    []string `json:"answer"`
	Authority []string `json:"authority"`
}

// Capture records the frames of a port into a pcapng file.
type Capture interface {
	// Capture writes the pcapng file to w as the frames come, until one of
	// req's bounds is reached or ctx is done. An error before anything was
	// written (no such interface, a bad filter) leaves w untouched.
	Capture(ctx context.Context, req CaptureRequest, w io.Writer) (CaptureResult, error)
}

// CaptureRequest is what to capture (the body of POST /api/capture, where
// Port may be a port's name; the server turns it into Interface).
type CaptureRequest struct {
	Port      string `json:"port"`
	Interface string `json:"-"`
	// Filter: frames with this address as source or destination, this TCP
	// or UDP port, this protocol (tcp, udp, icmp, arp); zero: any.
	Host  netip.Addr `json:"host,omitzero"`
	L4    uint16     `json:"l4port,omitempty"`
	Proto string     `json:"proto,omitempty"`
	// Bounds: MaxPackets 1..100000 (default 1000), MaxBytes of file up
	// to 64 MiB (default), Duration up to 300 s (default 30 s), Snaplen
	// 64..65535 (default 65535).
	MaxPackets int      `json:"count,omitempty"`
	MaxBytes   int64    `json:"max_bytes,omitempty"`
	Duration   Duration `json:"seconds,omitempty"`
	Snaplen    int      `json:"snaplen,omitempty"`
}

// CaptureResult says what a capture got and why it ended.
type CaptureResult struct {
	Packets int   `json:"packets"`
	Bytes   int64 `json:"bytes"`
	// Ended is "count", "size", "time" or "cancelled".
	Ended string `json:"ended"`
}

// Capture bounds.
const (
	MaxCapturePackets = 100000
	MaxCaptureBytes   = 64 << 20
	MaxCaptureTime    = 300 * time.Second
)

// Diagnostic bounds.
const (
	maxDiagRunning = 4
	maxDiagTime    = 3 * time.Minute
)

func (r *CaptureRequest) normalize() error {
	switch {
	case r.MaxPackets == 0:
		r.MaxPackets = 1000
	case r.MaxPackets < 0 || r.MaxPackets > MaxCapturePackets:
		return fmt.Errorf("count: want 1-%d", MaxCapturePackets)
	}
	switch {
	case r.MaxBytes == 0:
		r.MaxBytes = MaxCaptureBytes
	case r.MaxBytes < 4096 || r.MaxBytes > MaxCaptureBytes:
		return fmt.Errorf("max_bytes: want 4096-%d", MaxCaptureBytes)
	}
	switch {
	case r.Duration == 0:
		r.Duration = Duration(30 * time.Second)
	case r.Duration < 0 || time.Duration(r.Duration) > MaxCaptureTime:
		return fmt.Errorf("seconds: want up to %v", MaxCaptureTime.Seconds())
	}
	switch {
	case r.Snaplen == 0:
		r.Snaplen = 65535
	case r.Snaplen < 64 || r.Snaplen > 65535:
		return errors.New("snaplen: want 64-65535")
	}
	r.Proto = strings.ToLower(r.Proto)
	switch r.Proto {
	case "", "tcp", "udp", "icmp", "arp":
	default:
		return fmt.Errorf("proto: want tcp, udp, icmp or arp, not %q", r.Proto)
	}
	if r.L4 != 0 && r.Proto != "" && r.Proto != "tcp" && r.Proto != "udp" {
		return fmt.Errorf("l4port: only with tcp or udp, not %s", r.Proto)
	}
	return nil
}

// decodeStrict decodes one JSON object with no unknown fields.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("data after the JSON object")
	}
	return nil
}

// diagStart checks the feature and the number of tests running, and reads
// the body into v; done must be called when the test ends.
func (s *Server) diagStart(w http.ResponseWriter, r *http.Request, v any) (context.Context, func(), bool) {
	if s.opts.Diagnostics == nil {
		notAvailable(w, "diagnostics")
		return nil, nil, false
	}
	b, ok := readBody(w, r)
	if !ok {
		return nil, nil, false
	}
	if err := decodeStrict(b, v); err != nil {
		writeError(w, http.StatusBadRequest, "decoding the request: "+err.Error())
		return nil, nil, false
	}
	select {
	case s.diagSlots <- struct{}{}:
	default:
		writeError(w, http.StatusTooManyRequests, fmt.Sprintf("%d diagnostics are running already", maxDiagRunning))
		return nil, nil, false
	}
	ctx, cancel := context.WithTimeout(r.Context(), maxDiagTime)
	return ctx, func() { cancel(); <-s.diagSlots }, true
}

// ndjson streams one JSON object per line.
type ndjson struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	started bool
}

func (n *ndjson) send(typ string, v any) {
	if !n.started {
		n.started = true
		n.w.Header().Set("Content-Type", "application/x-ndjson")
		n.w.Header().Set("Cache-Control", "no-store")
		n.w.WriteHeader(http.StatusOK)
	}
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(map[string]string{"error": err.Error()})
	}
	// {"type": typ, ...fields}
	line := append([]byte(`{"type":`+jsonString(typ)), ',')
	if len(b) > 2 {
		line = append(line, b[1:]...)
	} else {
		line[len(line)-1] = '}'
	}
	n.w.Write(append(line, '\n'))
	n.rc.Flush()
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// fail reports an error: as the status of the answer while nothing was
// sent, as the stream's last line after.
func (n *ndjson) fail(err error) {
	if !n.started {
		writeError(n.w, http.StatusBadRequest, err.Error())
		return
	}
	n.send("error", map[string]string{"error": err.Error()})
}

// diagStream runs a diagnostic that reports what it finds as it goes:
// each find a line of type typ, then the result a line of type end, or
// the error.
func diagStream[Req, Find, Result any](s *Server, w http.ResponseWriter, r *http.Request, typ, end string,
	run func(context.Context, Req, func(Find)) (Result, error)) {
	var req Req
	ctx, done, ok := s.diagStart(w, r, &req)
	if !ok {
		return
	}
	defer done()
	out := &ndjson{w: w, rc: http.NewResponseController(w)}
	res, err := run(ctx, req, func(f Find) { out.send(typ, f) })
	if err != nil {
		out.fail(err)
		return
	}
	out.send(end, res)
}

func (s *Server) handlePing(w http.ResponseWriter, r *http.Request) {
	diagStream(s, w, r, "reply", "summary", func(ctx context.Context, req PingRequest, f func(PingReply)) (PingSummary, error) {
		return s.opts.Diagnostics.Ping(ctx, req, f)
	})
}

func (s *Server) handleTraceroute(w http.ResponseWriter, r *http.Request) {
	diagStream(s, w, r, "hop", "done", func(ctx context.Context, req TraceRequest, f func(TraceHop)) (struct{}, error) {
		return struct{}{}, s.opts.Diagnostics.Traceroute(ctx, req, f)
	})
}

func (s *Server) handleLookup(w http.ResponseWriter, r *http.Request) {
	var req LookupRequest
	ctx, done, ok := s.diagStart(w, r, &req)
	if !ok {
		return
	}
	defer done()
	res, err := s.opts.Diagnostics.Lookup(ctx, req)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	res.Answer, res.Authority = nonNil(res.Answer), nonNil(res.Authority)
	writeJSON(w, http.StatusOK, res)
}

func (s *Server) handleDiagSources(w http.ResponseWriter, r *http.Request) {
	if s.opts.Diagnostics == nil {
		notAvailable(w, "diagnostics")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"sources": nonNil(s.opts.Diagnostics.Sources()), "capture": s.opts.Capture != nil})
}

// lazyWriter sets the download headers on the first write.
type lazyWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	name    string
	written int64
}

func (l *lazyWriter) Write(b []byte) (int, error) {
	if l.written == 0 {
		h := l.w.Header()
		h.Set("Content-Type", "application/x-pcapng")
		h.Set("Content-Disposition", attachment(l.name))
		h.Set("Cache-Control", "no-store")
		l.w.WriteHeader(http.StatusOK)
	}
	n, err := l.w.Write(b)
	l.written += int64(n)
	l.rc.Flush()
	return n, err
}

// captureInterface names the interface of a port (by its name or its
// interface) from the newest sample, or of a NIC.
func (s *Server) captureInterface(port string) (string, bool) {
	s.mu.Lock()
	var ports []PortStats
	if s.prev != nil {
		ports = s.prev.Ports
	}
	s.mu.Unlock()
	for _, p := range ports {
		if p.Name == port || p.Interface == port {
			return p.Interface, true
		}
	}
	if s.opts.NICs != nil {
		for _, n := range s.opts.NICs.NICs() {
			if n.Name == port {
				return n.Name, true
			}
		}
	}
	return "", false
}

func (s *Server) handleCapture(w http.ResponseWriter, r *http.Request) {
	if s.opts.Capture == nil {
		notAvailable(w, "packet capture")
		return
	}
	b, ok := readBody(w, r)
	if !ok {
		return
	}
	var req CaptureRequest
	if err := decodeStrict(b, &req); err != nil {
		writeError(w, http.StatusBadRequest, "decoding the request: "+err.Error())
		return
	}
	if err := req.normalize(); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	iface, ok := s.captureInterface(req.Port)
	if !ok {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("port %q: no such port or interface", req.Port))
		return
	}
	req.Interface = iface
	if !s.captureMu.TryLock() {
		writeError(w, http.StatusConflict, "a capture is running already")
		return
	}
	defer s.captureMu.Unlock()
	ctx, cancel := context.WithTimeout(r.Context(), time.Duration(req.Duration)+5*time.Second)
	defer cancel()
	lw := &lazyWriter{w: w, rc: http.NewResponseController(w),
		name: fmt.Sprintf("e1kbox-%s-%s.pcapng", req.Port, time.Now().UTC().Format("20060102-150405"))}
	s.log.Info("capture started", "port", req.Port, "iface", iface, "proto", req.Proto, "host", req.Host, "l4port", req.L4)
	res, err := s.opts.Capture.Capture(ctx, req, lw)
	if err != nil && lw.written == 0 {
		writeError(w, http.StatusBadRequest, "capture: "+err.Error())
		return
	}
	if err != nil {
		s.log.Warn("capture ended with an error", "err", err)
	}
	s.log.Info("capture done", "port", req.Port, "packets", res.Packets, "bytes", res.Bytes, "ended", res.Ended)
}
