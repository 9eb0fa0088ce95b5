package dataplane

import (
	"fmt"
	"time"

	"e1kbox/appliance/dataplane/nat"
)

// connChunk is how many connections a listing reads from the table at a time.
const connChunk = 1024

// Conns lists the live connections matching f, at most limit of them
// (1..MaxConnPage; 0 means MaxConnPage) from table position cursor (0 for
// the first page); ConnPage.Next continues the listing. Paging through a
// changing table neither repeats nor skips a connection that lives
// throughout. Connections past their timeout that the sweep has not
// removed yet are left out, as the router no longer matches them.
func (e *Engine) Conns(f ConnFilter, cursor, limit int) (ConnPage, error) {
	return e.connsAt(f, cursor, limit, time.Now().UnixNano())
}

// connsAt is Conns at time now (Unix ns).
func (e *Engine) connsAt(f ConnFilter, cursor, limit int, now int64) (ConnPage, error) {
	if e.natr == nil {
		return ConnPage{}, ErrNotNAT
	}
	nf, err := f.natFilter()
	if err != nil {
		return ConnPage{}, fmt.Errorf("dataplane: connection filter: %w", err)
	}
	if limit <= 0 || limit > MaxConnPage {
		limit = MaxConnPage
	}
	page := ConnPage{Conns: []Conn{}}
	buf := make([]nat.Conn, 0, connChunk)
	// Total: every live match, in chunks.
	for c := 0; ; {
		buf, c = e.natr.Conns(nf, c, connChunk, now, buf[:0])
		for i := range buf {
			if buf[i].ExpiresIn > 0 {
				page.Total++
			}
		}
		if c == 0 {
			break
		}
	}
	// The page, from the cursor.
	for c := max(cursor, 0); ; {
		buf, c = e.natr.Conns(nf, c, limit-len(page.Conns), now, buf[:0])
		for i := range buf {
			if buf[i].ExpiresIn > 0 {
				page.Conns = append(page.Conns, connOf(&buf[i]))
			}
		}
		if c == 0 || len(page.Conns) == limit {
			page.Next = c
			break
		}
	}
	return page, nil
}

// DeleteConn deletes the connection id (Conn.ID); false when it no longer
// exists. Its next packet starts a new connection (a TCP packet other than
// a SYN is dropped as invalid).
func (e *Engine) DeleteConn(id uint64) (bool, error) {
	if e.natr == nil {
		return false, ErrNotNAT
	}
	return e.natr.DeleteConn(nat.ConnID(id)), nil
}

// DeleteConns deletes the connections matching f and returns how many.
func (e *Engine) DeleteConns(f ConnFilter) (int, error) {
	if e.natr == nil {
		return 0, ErrNotNAT
	}
	nf, err := f.natFilter()
	if err != nil {
		return 0, fmt.Errorf("dataplane: connection filter: %w", err)
	}
	return e.natr.DeleteConns(nf), nil
}

// Neighbours lists the router's ARP cache.
func (e *Engine) Neighbours() ([]Neighbour, error) {
	if e.natr == nil {
		return nil, ErrNotNAT
	}
	ns := e.natr.Neighbours()
	out := make([]Neighbour, len(ns))
	for i := range ns {
		out[i] = neighbourOf(&ns[i])
	}
	return out, nil
}

// NAT returns the router in NAT mode, nil in bridge mode.
func (e *Engine) NAT() *nat.Router { return e.natr }
