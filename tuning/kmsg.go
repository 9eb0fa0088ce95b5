package tuning

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// KmsgRecord is one record of /dev/kmsg.
type KmsgRecord struct {
	Facility int
	Level    int
	Seq      uint64
	Usec     uint64 // since boot
	Message  string // unescaped; may contain newlines
}

// ParseKmsg parses one /dev/kmsg record:
// "<prio>,<seq>,<usec>,<flags>[,...];<message>\n" followed by optional
// " KEY=value" dictionary lines. The message's \xNN escapes are decoded.
func ParseKmsg(rec []byte) (KmsgRecord, error) {
	head, body, ok := strings.Cut(string(rec), ";")
	if !ok {
		return KmsgRecord{}, fmt.Errorf("kmsg record: no ';'")
	}
	f := strings.Split(head, ",")
	if len(f) < 4 {
		return KmsgRecord{}, fmt.Errorf("kmsg record: header %q has %d fields, want at least 4", head, len(f))
	}
	prio, err := strconv.ParseUint(f[0], 10, 32)
	if err != nil {
		return KmsgRecord{}, fmt.Errorf("kmsg record: priority %q: %w", f[0], err)
	}
	var r KmsgRecord
	r.Facility, r.Level = int(prio>>3), int(prio&7)
	if r.Seq, err = strconv.ParseUint(f[1], 10, 64); err != nil {
		return KmsgRecord{}, fmt.Errorf("kmsg record: sequence %q: %w", f[1], err)
	}
	if r.Usec, err = strconv.ParseUint(f[2], 10, 64); err != nil {
		return KmsgRecord{}, fmt.Errorf("kmsg record: timestamp %q: %w", f[2], err)
	}
	msg, _, _ := strings.Cut(body, "\n") // dictionary lines follow
	r.Message = unescapeKmsg(msg)
	return r, nil
}

// unescapeKmsg decodes the \xNN escapes /dev/kmsg uses for
// non-printable bytes and the backslash.
func unescapeKmsg(s string) string {
	if !strings.Contains(s, `\x`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && s[i+1] == 'x' {
			if n, err := strconv.ParseUint(s[i+2:i+4], 16, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

const hangText = "Detected Hardware Unit Hang"

// HangPort returns the interface named in e1000e's "Detected Hardware Unit
// Hang" kernel message ("e1000e 0000:00:19.0 eth0: Detected Hardware Unit
// Hang:\n  TDH <...>"), and false for any other message.
func HangPort(message string) (string, bool) {
	prefix, _, ok := strings.Cut(message, ": "+hangText)
	if !ok {
		return "", false
	}
	// "e1000e <bus id> <ifname>", from netdev_err.
	if !strings.HasPrefix(prefix, "e1000e ") || strings.HasSuffix(prefix, "(unnamed net_device)") {
		return "", false
	}
	ifname := prefix[strings.LastIndexByte(prefix, ' ')+1:]
	if !validIfname(ifname) {
		return "", false
	}
	return ifname, true
}

// hangMitigation is the known workaround for e1000e's TX hang: no
// segmentation offload (ethtool -K <if> tso off gso off).
var hangMitigation = []string{"tx-tcp-segmentation", "tx-tcp6-segmentation", "tx-generic-segmentation"}

// WatchHangs reads kernel log records from kmsg (one record per Read, as
// /dev/kmsg returns them; see OpenKmsg) until ctx ends or the reader does.
// On e1000e's "Detected Hardware Unit Hang" for a port (only kernel
// messages count, not user-space writes to /dev/kmsg) it turns the port's
// segmentation offloads off and emits a "hang-mitigation" report followed
// by the feature reports. ports limits the watch; nil watches every
// interface. kmsg is closed when ctx ends. Lost records (EPIPE, the ring
// overwrote them) are skipped.
func (t *Tuner) WatchHangs(ctx context.Context, kmsg io.ReadCloser, ports []string, emit func(Report)) error {
	stop := context.AfterFunc(ctx, func() { kmsg.Close() })
	defer stop()
	buf := make([]byte, 16*1024)
	for {
		n, err := kmsg.Read(buf)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, io.EOF) {
				return nil
			}
			if errors.Is(err, syscall.EPIPE) {
				continue
			}
			return fmt.Errorf("read kernel log: %w", err)
		}
		rec, err := ParseKmsg(buf[:n])
		if err != nil || rec.Facility != 0 {
			continue
		}
		ifname, ok := HangPort(rec.Message)
		if !ok || ports != nil && !slices.Contains(ports, ifname) {
			continue
		}
		for _, r := range t.MitigateHang(ifname) {
			emit(r)
		}
	}
}

// MitigateHang turns the port's segmentation offloads off and returns a
// "hang-mitigation" report followed by one report per feature.
func (t *Tuner) MitigateHang(ifname string) []Report {
	sum := Report{Knob: "hang-mitigation", Target: ifname, Wanted: strings.Join(hangMitigation, ",") + " off"}
	pt, err := t.port(ifname)
	if err != nil {
		sum.Status, sum.Message = StatusError, "kernel: "+hangText+"; "+err.Error()
		return []Report{sum}
	}
	var reps []Report
	sum.Status = StatusOK
	var changed []string
	for _, name := range hangMitigation {
		r := applyTyped[Feature](&featureKnob{p: pt, name: name}, "off")
		t.logReport(r)
		switch r.Status {
		case StatusChanged:
			changed = append(changed, name)
			sum.Status = StatusChanged
		case StatusError:
			sum.Status = StatusError
		}
		reps = append(reps, r)
	}
	sum.Message = "kernel: " + hangText + "; "
	switch {
	case sum.Status == StatusError:
		sum.Message += "the mitigation (segmentation offloads off) failed, see the feature reports"
	case len(changed) > 0:
		sum.Message += "turned off " + strings.Join(changed, ", ") + " (known e1000e mitigation)"
	default:
		sum.Message += "segmentation offloads were already off"
	}
	t.log().Warn("tuning: e1000e hardware unit hang", "port", ifname, "mitigation", sum.Status)
	return append([]Report{sum}, reps...)
}
