package rules

import (
	"fmt"
	"sync/atomic"
)

// LogRecord is one logged match. It is a fixed-size value: workers copy it
// into their ring without allocating.
type LogRecord struct {
	Time   int64  // the now passed to Worker.Lookup
	Table  uint64 // generation of the table whose rule matched
	Key    Key
	Rule   int32
	Bytes  uint32
	Action Action
	Worker uint16
}

// logRing is a single-producer (the worker), single-consumer (ReadLogs,
// under Set.logMu) ring of log records. A full ring drops new records.
type logRing struct {
	head    atomic.Uint64 // next record to read
	tail    atomic.Uint64 // next record to write
	dropped atomic.Uint64
	recs    []LogRecord
	mask    uint64
}

func newLogRing(size int) *logRing {
	n := 1
	for n < size {
		n <<= 1
	}
	return &logRing{recs: make([]LogRecord, n), mask: uint64(n - 1)}
}

func (r *logRing) push(now int64, k *Key, gen uint64, v Verdict, bytes, worker int) {
	tail := r.tail.Load()
	if tail-r.head.Load() == uint64(len(r.recs)) {
		r.dropped.Add(1)
		return
	}
	rec := &r.recs[tail&r.mask]
	*rec = LogRecord{Time: now, Table: gen, Key: *k, Rule: v.Rule, Bytes: uint32(bytes), Action: v.Action, Worker: uint16(worker)}
	r.tail.Store(tail + 1)
}

func (r *logRing) pop(dst *LogRecord) bool {
	head := r.head.Load()
	if head == r.tail.Load() {
		return false
	}
	*dst = r.recs[head&r.mask]
	r.head.Store(head + 1)
	return true
}

// ReadLogs moves up to len(dst) buffered log records into dst, taking from
// the workers in turn, and returns how many it moved. The supervisor calls
// it periodically; records are lost (and counted by LogsDropped) while a
// worker's ring is full.
func (s *Set) ReadLogs(dst []LogRecord) int {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	n := 0
	for idle := 0; n < len(dst) && idle < len(s.workers); {
		w := s.workers[s.next]
		s.next = (s.next + 1) % len(s.workers)
		if w.logs.pop(&dst[n]) {
			n++
			idle = 0
		} else {
			idle++
		}
	}
	return n
}

// LogsDropped returns how many log records were lost to full rings.
func (s *Set) LogsDropped() uint64 {
	var n uint64
	for _, w := range s.workers {
		n += w.logs.dropped.Load()
	}
	return n
}

// FormatLog renders a record as a log line, with the rule's text when the
// record's table is still the current one.
func (s *Set) FormatLog(r *LogRecord) string {
	rule := fmt.Sprintf("rule %d", r.Rule)
	if t := s.Table(); t.gen == r.Table && r.Rule >= 0 && int(r.Rule) < len(t.rules) {
		rule += " (" + t.rules[r.Rule].Chain.String() + ": " + t.rules[r.Rule].String() + ")"
	}
	return fmt.Sprintf("%s %s len=%d %s", rule, r.Action, r.Bytes, r.Key.String())
}
