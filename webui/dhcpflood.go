package webui

import "fmt"

// A DHCP starvation (a flood of made-up devices asking for leases): the
// DHCP server gives back the leases of devices that never used their
// address and limits new devices per LAN port; the status names the
// ports it saw flooding (DHCPStatus.Ports).

var (
	descDHCPUnproven  = desc("dhcp_unproven_leases", "DHCP leases of devices that have not used their address yet, by LAN port.", "port")
	descDHCPReclaimed = desc("dhcp_reclaimed_total", "DHCP leases of devices that never used their address, given to new devices, by LAN port.", "port")
	descDHCPRevived   = desc("dhcp_revived_total", "Reclaimed DHCP leases given back to their devices, seen using the address after all, by LAN port.", "port")
	descDHCPRefused   = desc("dhcp_new_device_refusals_total", "DHCP requests of new devices over their LAN port's limit.", "port")
	descDHCPFlooding  = desc("dhcp_flooding", "Whether a flood of new devices was seen on the LAN port within the last minutes.", "port")
)

// dhcpFloodAlarms are a dhcp_flood alarm per flooding port.
func dhcpFloodAlarms(d DHCPStatus) []Alarm {
	var out []Alarm
	for _, p := range d.Ports {
		if !p.Flooding {
			continue
		}
		where := "port " + p.Port
		if p.Port == "" {
			where = "an unknown port"
		}
		out = append(out, Alarm{Kind: "dhcp_flood", Severity: "warn", Port: p.Port,
			Message: fmt.Sprintf("A flood of new devices asks for DHCP leases on %s (a pool starvation?): %d of its leases are not used yet, "+
				"%d such leases were given to other devices and %d requests refused. Devices that use their address keep it.",
				where, p.Unproven, p.Reclaimed, p.Refused)})
	}
	return out
}

// dhcpPorts exposes the DHCP server's new devices by port ("" for those
// on no known port).
func dhcpPorts(d DHCPStatus, gauge, counter emit) {
	for _, p := range d.Ports {
		gauge(descDHCPUnproven, float64(p.Unproven), p.Port)
		counter(descDHCPReclaimed, float64(p.Reclaimed), p.Port)
		counter(descDHCPRevived, float64(p.Revived), p.Port)
		counter(descDHCPRefused, float64(p.Refused), p.Port)
		gauge(descDHCPFlooding, b2f(p.Flooding), p.Port)
	}
}
