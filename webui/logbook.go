package webui

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Logs is the box's log: the supervisor's slog records and the rule `log`
// action's records, newest last. LogBook implements it.
type Logs interface {
	// Query returns the entries matching q.
	Query(q LogQuery) LogPage
	// Wait blocks until an entry newer than after exists or ctx is done,
	// and reports whether one does.
	Wait(ctx context.Context, after uint64) bool
}

// LogEntry is one log record.
type LogEntry struct {
	// Seq numbers the entries from 1, +1 per entry.
	Seq   uint64    `json:"seq"`
	Time  time.Time `json:"time"`
	Level string    `json:"level"` // debug, info, warn, error
	// Source is "system" (the supervisor) or "rule" (a rule's log action).
	Source  string    `json:"source"`
	Message string    `json:"msg"`
	Attrs   []LogAttr `json:"attrs,omitempty"`
}

// LogAttr is one key=value of a record (groups are dotted: "a.b").
type LogAttr struct {
	Key   string `json:"k"`
	Value string `json:"v"`
}

// Log sources.
const (
	LogSystem = "system"
	LogRule   = "rule"
)

// LogQuery selects entries. Zero fields match everything.
type LogQuery struct {
	// After: only entries with a larger Seq.
	After uint64
	// Level is the lowest level shown: debug, info, warn or error.
	Level string
	// Source is LogSystem or LogRule.
	Source string
	// Text matches the message or an attribute, case-insensitively.
	Text string
	// Limit is the most entries returned: the newest that match.
	Limit int
}

// Limits of a log query.
const (
	DefaultLogLimit = 500
	MaxLogLimit     = 5000
)

// LogPage is the answer of a query (and of GET /api/logs).
type LogPage struct {
	Entries []LogEntry `json:"entries"`
	// Last is the newest entry's Seq (of all, not only the matching):
	// the next query's After for a live tail.
	Last uint64 `json:"last"`
	// First is the oldest Seq the book still holds.
	First uint64 `json:"first"`
	// More: matching entries older than the page's were left out.
	More bool `json:"more"`
}

var levelRank = map[string]int{"debug": 0, "info": 1, "warn": 2, "error": 3}

// ParseLogQuery reads after, level, source, q and limit.
func ParseLogQuery(v url.Values) (LogQuery, error) {
	var q LogQuery
	var err error
	if s := v.Get("after"); s != "" {
		n, perr := intParam(v, "after", 0, 0, 1<<62)
		if perr != nil {
			return q, perr
		}
		q.After = uint64(n)
	}
	q.Level = strings.ToLower(v.Get("level"))
	if _, ok := levelRank[q.Level]; !ok && q.Level != "" {
		return q, fmt.Errorf("level: want debug, info, warn or error, not %q", q.Level)
	}
	q.Source = v.Get("source")
	if q.Source != "" && q.Source != LogSystem && q.Source != LogRule {
		return q, fmt.Errorf("source: want system or rule, not %q", q.Source)
	}
	q.Text = v.Get("q")
	if len(q.Text) > 200 {
		return q, fmt.Errorf("q: at most 200 characters")
	}
	q.Limit, err = intParam(v, "limit", DefaultLogLimit, 1, MaxLogLimit)
	return q, err
}

func (q *LogQuery) match(e *LogEntry) bool {
	if e.Seq <= q.After {
		return false
	}
	if q.Level != "" && levelRank[e.Level] < levelRank[q.Level] {
		return false
	}
	if q.Source != "" && e.Source != q.Source {
		return false
	}
	if q.Text == "" {
		return true
	}
	t := strings.ToLower(q.Text)
	if strings.Contains(strings.ToLower(e.Message), t) {
		return true
	}
	for _, a := range e.Attrs {
		if strings.Contains(strings.ToLower(a.Key+"="+a.Value), t) {
			return true
		}
	}
	return false
}

// LogBook is a bounded ring of log entries: the oldest go when it is full.
// Its Handler feeds it from log/slog.
type LogBook struct {
	mu      sync.Mutex
	ring    []LogEntry
	next    int
	n       int
	seq     uint64
	changed chan struct{} // closed (and replaced) when an entry is added
}

// DefaultLogEntries is the size of the supervisor's log book.
const DefaultLogEntries = 5000

// NewLogBook returns a book of size entries (DefaultLogEntries if <= 0).
func NewLogBook(size int) *LogBook {
	if size <= 0 {
		size = DefaultLogEntries
	}
	return &LogBook{ring: make([]LogEntry, size), changed: make(chan struct{})}
}

// Add appends an entry (its Seq is set here) and returns its Seq.
func (b *LogBook) Add(e LogEntry) uint64 {
	if e.Source == "" {
		e.Source = LogSystem
	}
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	b.mu.Lock()
	b.seq++
	e.Seq = b.seq
	b.ring[b.next] = e
	b.next = (b.next + 1) % len(b.ring)
	if b.n < len(b.ring) {
		b.n++
	}
	close(b.changed)
	b.changed = make(chan struct{})
	b.mu.Unlock()
	return e.Seq
}

// Query implements Logs.
func (b *LogBook) Query(q LogQuery) LogPage {
	if q.Limit <= 0 || q.Limit > MaxLogLimit {
		q.Limit = DefaultLogLimit
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	p := LogPage{Last: b.seq, Entries: []LogEntry{}}
	if b.n > 0 {
		p.First = b.seq - uint64(b.n) + 1
	}
	// Walk newest to oldest, keep the newest Limit matches.
	for i := 0; i < b.n; i++ {
		e := &b.ring[(b.next-1-i+2*len(b.ring))%len(b.ring)]
		if e.Seq <= q.After {
			break
		}
		if !q.match(e) {
			continue
		}
		if len(p.Entries) == q.Limit {
			p.More = true
			break
		}
		p.Entries = append(p.Entries, *e)
	}
	for i, j := 0, len(p.Entries)-1; i < j; i, j = i+1, j-1 {
		p.Entries[i], p.Entries[j] = p.Entries[j], p.Entries[i]
	}
	return p
}

// Wait implements Logs.
func (b *LogBook) Wait(ctx context.Context, after uint64) bool {
	for {
		b.mu.Lock()
		seq, ch := b.seq, b.changed
		b.mu.Unlock()
		if seq > after {
			return true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

// Handler returns a slog handler that passes records on to next and adds
// those of level info and above to the book. A record with an attribute
// source=rule is a rule's log record (LogRule).
func (b *LogBook) Handler(next slog.Handler) slog.Handler {
	return &bookHandler{book: b, next: next}
}

type bookHandler struct {
	book   *LogBook
	next   slog.Handler
	attrs  []LogAttr
	source string
	group  string // prefix of the attributes added from now on, "a.b."
}

func (h *bookHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelInfo || h.next.Enabled(ctx, l)
}

func (h *bookHandler) Handle(ctx context.Context, r slog.Record) error {
	var err error
	if h.next.Enabled(ctx, r.Level) {
		err = h.next.Handle(ctx, r)
	}
	if r.Level < slog.LevelInfo {
		return err
	}
	e := LogEntry{Time: r.Time, Level: levelName(r.Level), Source: h.source, Message: r.Message,
		Attrs: append([]LogAttr(nil), h.attrs...)}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "source" && h.group == "" && a.Value.String() == LogRule {
			e.Source = LogRule
			return true
		}
		e.Attrs = flatten(e.Attrs, h.group, a)
		return true
	})
	h.book.Add(e)
	return err
}

func (h *bookHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.next = h.next.WithAttrs(as)
	c.attrs = append([]LogAttr(nil), h.attrs...)
	for _, a := range as {
		if a.Key == "source" && h.group == "" && a.Value.String() == LogRule {
			c.source = LogRule
			continue
		}
		c.attrs = flatten(c.attrs, h.group, a)
	}
	return &c
}

func (h *bookHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.next = h.next.WithGroup(name)
	c.group = h.group + name + "."
	return &c
}

// flatten appends a as key=value pairs, groups dotted.
func flatten(dst []LogAttr, prefix string, a slog.Attr) []LogAttr {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		p := prefix
		if a.Key != "" {
			p += a.Key + "."
		}
		for _, g := range v.Group() {
			dst = flatten(dst, p, g)
		}
		return dst
	}
	if a.Key == "" {
		return dst
	}
	return append(dst, LogAttr{Key: prefix + a.Key, Value: v.String()})
}

func levelName(l slog.Level) string {
	switch {
	case l >= slog.LevelError:
		return "error"
	case l >= slog.LevelWarn:
		return "warn"
	case l >= slog.LevelInfo:
		return "info"
	}
	return "debug"
}
