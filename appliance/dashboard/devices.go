package dashboard

import (
	"errors"
	"net"
	"net/netip"
	"slices"

	"e1kbox/appliance/config"
	"e1kbox/appliance/dataplane"
	"e1kbox/appliance/services/dhcpd"
	"e1kbox/webui"
)

// The Devices page: the DHCP server's leases with their traffic, and the
// actions on them.

// Devices lists the DHCP server's leases with the bytes each device
// received and sent through the router's live connections; false while no
// DHCP server runs.
func (v *Router) Devices() ([]webui.Device, bool) {
	s := v.dhcpServer()
	if s == nil {
		return nil, false
	}
	leases := s.Leases()
	out := make([]webui.Device, 0, len(leases))
	byIP := make(map[netip.Addr]int, len(leases))
	for _, l := range leases {
		byIP[l.IP] = len(out)
		out = append(out, webui.Device{Hostname: l.Hostname, MAC: l.MAC.String(), Address: l.IP, Expiry: l.Expiry,
			LastSeen: l.LastSeen, Static: l.Static, InConfig: l.InConfig, State: string(l.State), Unproven: l.Unproven})
	}
	if v.conns != nil {
		_ = v.conns(func(c *dataplane.Conn) bool {
			addBytes(out, byIP, c)
			return true
		})
	}
	return out, true
}

// addBytes counts connection c for the device it belongs to: a LAN host
// that opened it (its original source) or that a port forward reaches
// (its reply's source). Bytes are [original, reply].
func addBytes(devs []webui.Device, byIP map[netip.Addr]int, c *dataplane.Conn) {
	if i, ok := byIP[c.Orig.Src.Addr()]; ok {
		devs[i].BytesOut += c.Bytes[0]
		devs[i].BytesIn += c.Bytes[1]
		return
	}
	if i, ok := byIP[c.Reply.Src.Addr()]; ok {
		devs[i].BytesIn += c.Bytes[0]
		devs[i].BytesOut += c.Bytes[1]
	}
}

func (v *Router) dhcpServer() *dhcpd.Server {
	l := v.live()
	if l == nil || l.Config == nil || l.Config.Mode != config.ModeNAT {
		return nil
	}
	return l.DHCP
}

// MakeStatic pins the device's address in the DHCP server's lease file
// (it survives restarts there); a device made static before stays so.
func (v *Router) MakeStatic(mac net.HardwareAddr) error {
	return v.act(mac, (*dhcpd.Server).MakeStatic)
}

// Forget drops the device's leases and its pinned address.
func (v *Router) Forget(mac net.HardwareAddr) error {
	return v.act(mac, (*dhcpd.Server).Forget)
}

func (v *Router) act(mac net.HardwareAddr, fn func(*dhcpd.Server, net.HardwareAddr) error) error {
	s := v.dhcpServer()
	if s == nil {
		return webui.ErrNoDHCPServer
	}
	err := fn(s, slices.Clone(mac))
	switch {
	case errors.Is(err, dhcpd.ErrAlreadyStatic):
		return nil // done before: the device keeps its address
	case errors.Is(err, dhcpd.ErrNoLease):
		return tagged{err, webui.ErrNoLease}
	case errors.Is(err, dhcpd.ErrConfigStatic):
		return tagged{err, webui.ErrStaticInConfig}
	}
	return err
}

// tagged is an error that also matches the dashboard's error tag.
type tagged struct{ err, tag error }

func (t tagged) Error() string   { return t.err.Error() }
func (t tagged) Unwrap() []error { return []error{t.err, t.tag} }
