package webui

import (
	"net/http"
	"net/netip"
	"time"
)

// Health is what the unauthenticated endpoints show: GET /healthz (what
// the over-the-air update's health gate reads) and GET /version.
type Health interface {
	Health() HealthReport
	Version() VersionReport
}

// HealthReport is the answer of GET /healthz: 200 when OK, else 503.
type HealthReport struct {
	OK bool `json:"-"`
	// Status is "ok" or "degraded".
	Status string `json:"status"`
	// Build is the running build's identity (gokrazy's BuildTimestamp).
	Build string `json:"build"`
	// SBOMHash is gokrazy's SBOM hash of the build, when it has one.
	SBOMHash string `json:"sbom_hash,omitempty"`
	// ConfigSource says which stored config runs: "live", "history
	// version 12", "factory", "default".
	ConfigSource  string `json:"config_source"`
	UptimeSeconds int    `json:"uptime_seconds"`
	// Perm is the state of the persistent partition.
	Perm any `json:"perm"`
	// Dataplane is the dataplane's health (per port), or DataplaneError
	// why it does not run.
	Dataplane      any    `json:"dataplane,omitempty"`
	DataplaneError string `json:"dataplane_error,omitempty"`
}

// VersionReport is the answer of GET /version.
type VersionReport struct {
	BuildTimestamp string `json:"build_timestamp"`
	SBOMHash       string `json:"sbom_hash,omitempty"`
	// Identity says where the build identity came from (and the Go
	// build info).
	Identity any    `json:"identity,omitempty"`
	Go       string `json:"go"`
	// Boots is the box's boot history.
	Boots any `json:"boots"`
}

// PublicHandler serves only the unauthenticated endpoints: what the
// supervisor runs when the dashboard cannot start (no password), so that
// the update health gate still sees the box.
func PublicHandler(h Health) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { serveHealth(w, h) })
	mux.HandleFunc("GET /version", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, h.Version()) })
	return securityHeaders(mux)
}

func serveHealth(w http.ResponseWriter, h Health) {
	rep := h.Health()
	code := http.StatusOK
	if !rep.OK {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, rep)
}

// Dataplane is the engine's own detailed state and counters: per port,
// per worker, per ring, every drop reason (GET /api/dataplane).
type Dataplane interface {
	// Detail returns a JSON-encodable snapshot; an error (the dataplane
	// does not run) answers 503.
	Detail() (any, error)
}

// Neighbours is the router's ARP cache and IPv6 neighbour cache (GET
// /api/neighbours, NAT mode).
type Neighbours interface {
	// Neighbours lists the entries; an error (not in NAT mode, not
	// running) answers 409.
	Neighbours() ([]Neighbour, error)
}

// Neighbour is one ARP or IPv6 neighbour cache entry.
type Neighbour struct {
	Side string `json:"side"` // "lan" or "wan"
	// Port is the name of the side's port, where known.
	Port     string     `json:"port,omitempty"`
	IP       netip.Addr `json:"ip"`
	MAC      string     `json:"mac,omitempty"` // empty while unresolved
	Resolved bool       `json:"resolved"`
	// State is an IPv6 entry's: incomplete, reachable or stale (still
	// used while solicited again); empty for ARP entries.
	State string `json:"state,omitempty"`
	// Confirmed is when the neighbour last answered (or the entry was
	// made); zero (absent) for an incomplete IPv6 entry.
	Confirmed time.Time `json:"confirmed,omitzero"`
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) { serveHealth(w, s.opts.Health) }

func (s *Server) handleVersion(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.opts.Health.Version())
}

func (s *Server) handleDataplane(w http.ResponseWriter, r *http.Request) {
	if s.opts.Dataplane == nil {
		notAvailable(w, "the dataplane's detail")
		return
	}
	d, err := s.opts.Dataplane.Detail()
	writeResult(w, d, err, http.StatusServiceUnavailable)
}

func (s *Server) handleNeighbours(w http.ResponseWriter, r *http.Request) {
	if s.opts.Neighbours == nil {
		notAvailable(w, "the neighbour table (NAT mode)")
		return
	}
	ns, err := s.opts.Neighbours.Neighbours()
	writeResult(w, map[string]any{"neighbours": nonNil(ns)}, err, http.StatusConflict)
}
