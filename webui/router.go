package webui

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"time"
)

// Router is the NAT router's services: the WAN address (DHCP client or
// static), the LAN's DHCP server, the DNS forwarder and the clock.
// RouterStatus reports false while the box runs no router (bridge mode;
// the mode changes live). It is called by the API, by /metrics and every
// few seconds by the publisher (for the overview's alarms): it must be
// cheap (no scan of the connection table) and must not wait for a config
// change to finish.
type Router interface {
	RouterStatus() (RouterStatus, bool)
}

// RouterStatus is what the router's services are doing.
type RouterStatus struct {
	WAN  WANStatus  `json:"wan"`
	DHCP DHCPStatus `json:"dhcp"`
	DNS  DNSStatus  `json:"dns"`
	Time TimeStatus `json:"time"`
	// IPv6 is nil while the router routes no IPv6 (ipv6.enabled off).
	IPv6 *IPv6Status `json:"ipv6,omitempty"`
}

// WAN address modes and lease states.
const (
	WANModeDHCP   = "dhcp"
	WANModeStatic = "static"
	WANModePPPoE  = "pppoe" // the address is the PPPoE session's (IPCP)

	WANBound     = "bound"     // a lease (or a static address) is in use
	WANRenewing  = "renewing"  // past T1, asking the server that granted it
	WANRebinding = "rebinding" // past T2, asking any server
	WANInit      = "init"      // looking for a lease (no address)
	WANNone      = "none"      // no WAN address at all
)

// WANStatus is the WAN side: its address and where it came from.
type WANStatus struct {
	// Port is the WAN port's name (its rates are the WAN's download and
	// upload on the overview).
	Port string `json:"port"`
	// Mode is WANModeDHCP, WANModeStatic or WANModePPPoE.
	Mode string `json:"mode"`
	// State is one of the WAN* states; a static address is WANBound.
	State string `json:"state"`
	// Address is the WAN address with its prefix length; invalid when
	// there is none.
	Address netip.Prefix `json:"address,omitzero"`
	Gateway netip.Addr   `json:"gateway,omitzero"`
	// DNS are the lease's name servers (option 6).
	DNS    []netip.Addr `json:"dns"`
	Domain string       `json:"domain,omitempty"`
	// MTU is the lease's interface MTU (option 26), 0 if none.
	MTU int `json:"mtu,omitempty"`
	// Server is the DHCP server that granted the lease.
	Server netip.Addr `json:"server,omitzero"`
	// Obtained, T1, T2 and Expiry are the lease's times (zero for a
	// static address).
	Obtained time.Time `json:"obtained,omitzero"`
	T1       time.Time `json:"t1,omitzero"`
	T2       time.Time `json:"t2,omitzero"`
	Expiry   time.Time `json:"expiry,omitzero"`
	// Internet is the last reachability probe.
	Internet Reachability `json:"internet"`
	// Link is the WAN's link stack from its port up.
	Link WANLink `json:"link"`
}

// WANLink is the WAN's link stack from its port up (DESIGN §10): the
// port's interface, and the VLAN on it when the WAN is tagged.
type WANLink struct {
	Interface string `json:"interface,omitempty"`
	// VLAN is nil for an untagged WAN.
	VLAN *WANVLAN `json:"vlan,omitempty"`
	// PPPoE is the PPPoE session over the port (or VLAN); nil when the
	// WAN is no PPPoE link.
	PPPoE *WANPPPoE `json:"pppoe,omitempty"`
}

// WANPPPoE is the WAN's PPPoE client: its phase, the access concentrator
// and the session.
type WANPPPoE struct {
	// State is the client's phase: down, discovery, lcp, auth, network
	// or up.
	State     string `json:"state"`
	ACName    string `json:"ac_name,omitempty"`
	ACMAC     string `json:"ac_mac,omitempty"`
	SessionID uint16 `json:"session_id,omitempty"`
	// EchoRTT is the round trip of the last answered LCP echo.
	EchoRTT Duration  `json:"echo_rtt_s"`
	UpSince time.Time `json:"up_since,omitzero"`
	// Reconnects counts the redials after a drop; LastDownReason says why
	// the last session (or attempt) ended.
	Reconnects     int    `json:"reconnects"`
	LastDownReason string `json:"last_down_reason,omitempty"`
}

// WANVLAN is the WAN's 802.1Q VLAN and the priorities its frames carry.
type WANVLAN struct {
	ID         uint16 `json:"id"`
	PCP        uint8  `json:"pcp"`
	ControlPCP uint8  `json:"control_pcp"`
}

// Reachability is the result of the last probe of the Internet.
type Reachability struct {
	// Reachable: the last probe got an answer.
	Reachable bool `json:"reachable"`
	// Probe says what was probed, e.g. "ping 1.1.1.1"; empty when nothing
	// probes.
	Probe   string    `json:"probe"`
	Checked time.Time `json:"checked,omitzero"`
	// RTT is the answer's round-trip time.
	RTT   Duration `json:"rtt_s"`
	Error string   `json:"error,omitempty"`
}

// DHCPStatus is the LAN's DHCP server.
type DHCPStatus struct {
	Enabled     bool       `json:"enabled"`
	PoolStart   netip.Addr `json:"pool_start,omitzero"`
	PoolEnd     netip.Addr `json:"pool_end,omitzero"`
	LeasesInUse int        `json:"leases_in_use"` // bound, unexpired (static ones too)
	PoolSize    int        `json:"pool_size"`
	// Messages by type since the start.
	Discovers uint64 `json:"discovers"`
	Offers    uint64 `json:"offers"`
	Requests  uint64 `json:"requests"`
	Acks      uint64 `json:"acks"`
	Naks      uint64 `json:"naks"`
	Declines  uint64 `json:"declines"`
	Releases  uint64 `json:"releases"`
	// Unproven are the leases of devices that have not used their
	// address yet (no traffic through the box); Reclaimed of such leases
	// went to new devices, Refused requests of new devices were over
	// their port's limit (since the start).
	Unproven  int    `json:"unproven"`
	Reclaimed uint64 `json:"reclaimed"`
	Refused   uint64 `json:"refused"`
	// Ports are the LAN ports with such leases, reclaims or refusals.
	Ports []DHCPPort `json:"ports,omitempty"`
}

// DHCPPort is what the DHCP server saw of new devices on a LAN port: a
// flood of them (a pool starvation) shows here.
type DHCPPort struct {
	Port      string `json:"port"` // "" for devices on no known port
	Unproven  int    `json:"unproven"`
	Reclaimed uint64 `json:"reclaimed"`
	// Revived of the reclaimed went back to their devices, seen using
	// their address after all.
	Revived uint64 `json:"revived"`
	Refused uint64 `json:"refused"`
	// Flooding: the port hit its new-device limit or the share of
	// unproven leases within the last minutes.
	Flooding bool `json:"flooding"`
}

// DNSStatus is the LAN's DNS forwarder and cache.
type DNSStatus struct {
	Enabled bool `json:"enabled"`
	// Listen are the addresses it answers on (the router's LAN address).
	Listen []netip.AddrPort `json:"listen"`
	// Upstreams are the servers it forwards to; UpstreamsFrom says whether
	// they are "config" or from the "wan" lease.
	Upstreams        []netip.AddrPort `json:"upstreams"`
	UpstreamsFrom    string           `json:"upstreams_from,omitempty"`
	Queries          uint64           `json:"queries"`
	CacheHits        uint64           `json:"cache_hits"`
	CacheEntries     int              `json:"cache_entries"`
	UpstreamFailures uint64           `json:"upstream_failures"`
	// LatencyP50 and LatencyP99 are the upstream round-trip times.
	LatencyP50 Duration `json:"latency_p50_s"`
	LatencyP99 Duration `json:"latency_p99_s"`
}

// TimeStatus is the NTP client.
type TimeStatus struct {
	Synced bool `json:"synced"`
	// Server is the server of the last good sync.
	Server string `json:"server,omitempty"`
	// Offset is the clock's offset from the server at the last sync.
	Offset   Duration  `json:"offset_s"`
	LastSync time.Time `json:"last_sync,omitzero"`
}

// Duration is a time.Duration written as seconds (a JSON number).
type Duration time.Duration

// MarshalJSON writes the duration in seconds.
func (d Duration) MarshalJSON() ([]byte, error) {
	return strconv.AppendFloat(nil, time.Duration(d).Seconds(), 'f', -1, 64), nil
}

// UnmarshalJSON reads seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s float64
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration: want seconds: %w", err)
	}
	*d = Duration(s * float64(time.Second))
	return nil
}

// Devices is the LAN's devices as the DHCP server knows them (NAT mode).
type Devices interface {
	// Devices lists every lease the server keeps, static ones included;
	// false while no DHCP server runs.
	Devices() ([]Device, bool)
	// MakeStatic pins the address the device holds to it. Errors may wrap
	// ErrNoLease (404), ErrStaticInConfig (409) or ErrNoDHCPServer (404).
	MakeStatic(mac net.HardwareAddr) error
	// Forget removes the device's leases and its pinned address. Errors may
	// wrap ErrNoLease (404), ErrStaticInConfig (409) or ErrNoDHCPServer
	// (404).
	Forget(mac net.HardwareAddr) error
}

// Errors of Devices' actions.
var (
	ErrNoLease        = errors.New("no lease for this device")
	ErrStaticInConfig = errors.New("the device has a static lease in the config")
	ErrNoDHCPServer   = errors.New("no DHCP server runs (NAT mode with dhcp.enabled)")
)

// Device states.
const (
	DeviceBound    = "bound"
	DeviceOffered  = "offered"
	DeviceExpired  = "expired"
	DeviceReleased = "released"
	DeviceReserved = "reserved" // a static lease not taken yet
)

// Device is one lease of the DHCP server.
type Device struct {
	Hostname string     `json:"hostname"`
	MAC      string     `json:"mac"` // "52:54:00:12:34:56"
	Address  netip.Addr `json:"address"`
	// Expiry is the end of the lease or offer; zero for a reserved static.
	Expiry   time.Time `json:"expiry,omitzero"`
	LastSeen time.Time `json:"last_seen,omitzero"`
	// Static: the device always gets Address (config or made static).
	Static bool `json:"static"`
	// InConfig: Static from a static lease of the config, which only a
	// config change drops (Forget answers ErrStaticInConfig).
	InConfig bool   `json:"in_config,omitempty"`
	State    string `json:"state"`
	// Unproven: bound, but the device has not used its address yet (no
	// traffic through the box): such leases go first when the pool runs
	// short.
	Unproven bool `json:"unproven,omitempty"`
	// BytesIn and BytesOut are what the device received and sent through
	// the router's live connections (conntrack).
	BytesIn  uint64 `json:"bytes_in"`
	BytesOut uint64 `json:"bytes_out"`
}

// online reports whether a device counts as online: a bound lease.
func (d *Device) online(now time.Time) bool {
	return d.State == DeviceBound && (d.Expiry.IsZero() || now.Before(d.Expiry))
}

func (s *Server) handleRouter(w http.ResponseWriter, r *http.Request) {
	st, ok := s.routerNow()
	if !ok {
		notAvailable(w, "the router's services (NAT mode)")
		return
	}
	fillNil(&st)
	writeJSON(w, http.StatusOK, st)
}

// fillNil makes lists empty rather than null in JSON.
func fillNil(st *RouterStatus) {
	st.WAN.DNS, st.DNS.Listen, st.DNS.Upstreams = nonNil(st.WAN.DNS), nonNil(st.DNS.Listen), nonNil(st.DNS.Upstreams)
	if st.IPv6 != nil {
		v6 := *st.IPv6 // the implementation's may be shared
		fillNilIPv6(&v6)
		st.IPv6 = &v6
	}
}

// routerNow asks the router for its status: false without one.
func (s *Server) routerNow() (RouterStatus, bool) {
	if s.opts.Router == nil {
		return RouterStatus{}, false
	}
	return s.opts.Router.RouterStatus()
}

// devicesNow reports whether the device list has something to show.
func (s *Server) devicesNow() bool {
	if s.opts.Devices == nil {
		return false
	}
	_, ok := s.opts.Devices.Devices()
	return ok
}

// DevicesAnswer is the answer of GET /api/devices.
type DevicesAnswer struct {
	Online  int      `json:"online"`
	Devices []Device `json:"devices"`
}

func (s *Server) handleDevices(w http.ResponseWriter, r *http.Request) {
	var ds []Device
	ok := false
	if s.opts.Devices != nil {
		ds, ok = s.opts.Devices.Devices()
	}
	if !ok {
		notAvailable(w, "the device list (NAT mode with the DHCP server)")
		return
	}
	ds = nonNil(ds)
	slices.SortStableFunc(ds, func(a, b Device) int { return a.Address.Compare(b.Address) })
	now := time.Now()
	a := DevicesAnswer{Devices: ds}
	for i := range ds {
		if ds[i].online(now) {
			a.Online++
		}
	}
	writeJSON(w, http.StatusOK, a)
}

// deviceAction runs MakeStatic or Forget for the {mac} of the path.
func (s *Server) deviceAction(w http.ResponseWriter, r *http.Request, what string, act func(net.HardwareAddr) error) {
	if s.opts.Devices == nil {
		notAvailable(w, "the device list (NAT mode with the DHCP server)")
		return
	}
	mac, err := net.ParseMAC(r.PathValue("mac"))
	if err != nil || len(mac) != 6 {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("bad MAC address %q: want 52:54:00:12:34:56", r.PathValue("mac")))
		return
	}
	if err := act(mac); err != nil {
		status := http.StatusInternalServerError
		switch {
		case errors.Is(err, ErrNoLease), errors.Is(err, ErrNotFound), errors.Is(err, ErrNoDHCPServer):
			status = http.StatusNotFound
		case errors.Is(err, ErrStaticInConfig):
			status = http.StatusConflict
		}
		writeError(w, status, err.Error())
		return
	}
	s.log.Info("device "+what, "mac", mac.String())
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleMakeStatic(w http.ResponseWriter, r *http.Request) {
	s.deviceAction(w, r, "made static", func(m net.HardwareAddr) error { return s.opts.Devices.MakeStatic(m) })
}

func (s *Server) handleForget(w http.ResponseWriter, r *http.Request) {
	s.deviceAction(w, r, "forgotten", func(m net.HardwareAddr) error { return s.opts.Devices.Forget(m) })
}
