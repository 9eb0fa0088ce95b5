package vm

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"e1kbox/firmware/instance"
)

// FactoryFile is where an instance config puts the appliance's factory
// config (the appliance package's ExtraFileContents).
const FactoryFile = "/etc/e1kbox/factory.json"

// Port is a data port of the appliance's factory config.
type Port struct {
	Name      string   `json:"name"`
	Interface string   `json:"interface"` // eth1, eth2: the VM's DataTaps in order
	Role      string   `json:"role"`      // "wan" or "lan" in NAT mode, "" on a bridge
	Addresses []string `json:"addresses"`
}

// Factory is what a VM user needs of the appliance's factory config: the
// mode and which interface is which port.
type Factory struct {
	Hostname string `json:"-"` // the instance config's
	Mode     string `json:"mode"`
	Ports    []Port `json:"ports"`
	NAT      struct {
		WANDHCP bool `json:"wanDHCP"`
	} `json:"nat"`
}

// ReadFactory reads the appliance's factory config from the gokrazy
// instance config at path (a config.json or a gok instance directory).
func ReadFactory(path string) (*Factory, error) {
	file, err := instance.ConfigFile(path)
	if err != nil {
		return nil, err
	}
	cfg, err := instance.Load(file)
	if err != nil {
		return nil, err
	}
	js, ok := cfg.PackageConfig["e1kbox/appliance"].ExtraFileContents[FactoryFile]
	if !ok {
		return nil, fmt.Errorf("%s: the appliance has no %s in ExtraFileContents", file, FactoryFile)
	}
	var f Factory
	if err := json.Unmarshal([]byte(js), &f); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", file, FactoryFile, err)
	}
	if len(f.Ports) == 0 {
		return nil, fmt.Errorf("%s: %s lists no ports", file, FactoryFile)
	}
	f.Hostname = cfg.Hostname
	return &f, nil
}

// Port returns the port on interface iface.
func (f *Factory) Port(iface string) (Port, bool) {
	for _, p := range f.Ports {
		if p.Interface == iface {
			return p, true
		}
	}
	return Port{}, false
}

// Describe says what the box does on interface iface, e.g. `WAN port
// "wan" (address by DHCP)` or `LAN port "lan" 192.168.1.1/24`.
func (f *Factory) Describe(iface string) string {
	p, ok := f.Port(iface)
	if !ok {
		return "not in the factory config"
	}
	var s string
	switch p.Role {
	case "":
		s = fmt.Sprintf("%s port %q", f.Mode, p.Name)
	default:
		s = fmt.Sprintf("%s port %q", strings.ToUpper(p.Role), p.Name)
	}
	if len(p.Addresses) > 0 {
		s += " " + strings.Join(p.Addresses, ", ")
	}
	if p.Role == "wan" && f.NAT.WANDHCP {
		s += " (address by DHCP)"
	}
	return s
}

// DataPort returns the port with role and its index in
// Options.DataTaps (0 for eth1, 1 for eth2).
func (f *Factory) DataPort(role string) (int, Port, error) {
	for i := range len(Options{}.DataTaps) {
		if p, ok := f.Port(DataInterface(i)); ok && p.Role == role {
			return i, p, nil
		}
	}
	return 0, Port{}, errors.New("the factory config has no " + role + " port on the data interfaces")
}

// DataMAC is the MAC address of the NIC on Options.DataTaps[i].
func DataMAC(i int) string { return fmt.Sprintf("52:54:00:e1:00:%02x", i+1) }

// DataInterface is the guest's interface on Options.DataTaps[i]: eth1
// for the first (eth0 is the management port).
func DataInterface(i int) string { return fmt.Sprintf("eth%d", i+1) }
