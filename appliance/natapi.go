package main

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"

	"e1kbox/appliance/dataplane"
)

// natAPI serves the router's connection table and ARP cache (NAT mode):
//
//	GET    /api/dataplane/conntrack?proto=&kind=&state=&addr=&port=&cursor=&limit=  a page (dataplane.ConnPage)
//	DELETE /api/dataplane/conntrack/{id}                                             one connection
//	DELETE /api/dataplane/conntrack?proto=...  (at least one filter, or all=true)    the matching ones
//	GET    /api/dataplane/neighbours                                                 the ARP cache
//
// Bridge mode answers 409 Conflict.
func natAPI(mux *http.ServeMux, dp *plane) {
	engine := func(w http.ResponseWriter) *dataplane.Engine {
		e, err := dp.Engine()
		if err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
			return nil
		}
		return e
	}
	fail := func(w http.ResponseWriter, err error) {
		code := http.StatusBadRequest
		if errors.Is(err, dataplane.ErrNotNAT) {
			code = http.StatusConflict
		}
		writeJSON(w, code, map[string]string{"error": err.Error()})
	}
	mux.HandleFunc("GET /api/dataplane/conntrack", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		f, err := connFilter(q)
		if err != nil {
			fail(w, err)
			return
		}
		cursor, err1 := intParam(q, "cursor", 0)
		limit, err2 := intParam(q, "limit", 100)
		if err := errors.Join(err1, err2); err != nil {
			fail(w, err)
			return
		}
		e := engine(w)
		if e == nil {
			return
		}
		page, err := e.Conns(f, cursor, limit)
		if err != nil {
			fail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, page)
	})
	mux.HandleFunc("DELETE /api/dataplane/conntrack/{id}", func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
		if err != nil {
			fail(w, fmt.Errorf("id: %q is not a connection id", r.PathValue("id")))
			return
		}
		e := engine(w)
		if e == nil {
			return
		}
		ok, err := e.DeleteConn(id)
		switch {
		case err != nil:
			fail(w, err)
		case !ok:
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such connection"})
		default:
			writeJSON(w, http.StatusOK, map[string]int{"deleted": 1})
		}
	})
	mux.HandleFunc("DELETE /api/dataplane/conntrack", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		f, err := connFilter(q)
		if err != nil {
			fail(w, err)
			return
		}
		if f == (dataplane.ConnFilter{}) && q.Get("all") != "true" {
			fail(w, errors.New("no filter: name connections with proto, kind, state, addr or port, or pass all=true"))
			return
		}
		e := engine(w)
		if e == nil {
			return
		}
		n, err := e.DeleteConns(f)
		if err != nil {
			fail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]int{"deleted": n})
	})
	mux.HandleFunc("GET /api/dataplane/neighbours", func(w http.ResponseWriter, r *http.Request) {
		e := engine(w)
		if e == nil {
			return
		}
		ns, err := e.Neighbours()
		if err != nil {
			fail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"neighbours": ns})
	})
}

// connFilter reads a connection filter from query parameters.
func connFilter(q url.Values) (dataplane.ConnFilter, error) {
	f := dataplane.ConnFilter{Proto: q.Get("proto"), Kind: q.Get("kind"), State: q.Get("state")}
	if s := q.Get("addr"); s != "" {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return f, fmt.Errorf("addr: %q is not an IP address", s)
		}
		f.Addr = a
	}
	if s := q.Get("port"); s != "" {
		p, err := strconv.ParseUint(s, 10, 16)
		if err != nil {
			return f, fmt.Errorf("port: %q is not a port number", s)
		}
		f.Port = uint16(p)
	}
	return f, nil
}

func intParam(q url.Values, name string, def int) (int, error) {
	s := q.Get(name)
	if s == "" {
		return def, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("%s: %q is not a non-negative integer", name, s)
	}
	return v, nil
}
