package router

import (
	"encoding/json"
	"net"
	"path/filepath"

	"e1kbox/appliance/services/dhcp6c"
	"e1kbox/appliance/services/wanclient"
)

// wanClientConfig is the WAN DHCPv4 client's config on the WAN port's
// interface with mac: nat.wan.dhcp's options, whose hostname and client
// identifier override the box's hostname and the MAC-based identifier.
// The key changes with every option, so that a change restarts the
// client (and only it).
func (r *Router) wanClientConfig(iface string, mac net.HardwareAddr) (wanclient.Config, string) {
	d := &r.cfg.NAT.WAN.DHCP
	c := wanclient.Config{Interface: iface, MAC: mac, Hostname: r.opts.Hostname, ClientID: d.ClientID,
		LeaseFile: filepath.Join(r.opts.State, "wan-lease.json"), VendorClass: d.VendorClass, UserClass: d.UserClass}
	if d.Hostname != "" {
		c.Hostname = d.Hostname
	}
	for _, o := range d.Options {
		c.Options = append(c.Options, wanclient.Option{Code: uint8(o.Code), Value: o.Hex})
	}
	return c, optionsKey(d)
}

// dhcp6Options puts nat.wan.dhcpv6's options into the DHCPv6 client's
// config c and returns their key (see wanClientConfig).
func (r *Router) dhcp6Options(c *dhcp6c.Config) string {
	d := &r.cfg.NAT.WAN.DHCPv6
	for _, u := range d.UserClass {
		c.UserClass = append(c.UserClass, []byte(u))
	}
	if vc := d.VendorClass; vc != nil {
		c.VendorClass = &dhcp6c.VendorClass{Enterprise: vc.Enterprise}
		for _, s := range vc.Data {
			c.VendorClass.Data = append(c.VendorClass.Data, []byte(s))
		}
	}
	for _, o := range d.Options {
		c.Options = append(c.Options, dhcp6c.Option{Code: o.Code, Value: o.Hex})
	}
	return optionsKey(d)
}

// optionsKey is the options' JSON, for a client's binding key.
func optionsKey(v any) string {
	b, err := json.Marshal(v)
	if err != nil { // cannot happen: plain strings, numbers and bytes
		return err.Error()
	}
	return string(b)
}
