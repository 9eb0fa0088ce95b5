package tuning

import "fmt"

// Ethtool is the part of the ethtool API the knobs use. The real one
// (NewEthtool, Linux) is an ioctl client bound to the network namespace it
// was created in; tests use a fake that follows e1000e's rules.
type Ethtool interface {
	// DriverName returns the driver's name (ETHTOOL_GDRVINFO), e.g. "e1000e", "veth".
	DriverName(ifname string) (string, error)
	// GetCoalesce returns rx-usecs (ETHTOOL_GCOALESCE).
	GetCoalesce(ifname string) (rxUsecs uint32, err error)
	// SetCoalesce sets rx-usecs and keeps every other coalesce field.
	SetCoalesce(ifname string, rxUsecs uint32) error
	// GetRing returns the ring sizes and their maxima (ETHTOOL_GRINGPARAM).
	GetRing(ifname string) (Ring, error)
	// SetRing sets the RX and TX ring sizes (ETHTOOL_SRINGPARAM).
	SetRing(ifname string, rx, tx uint32) error
	// Features returns every feature of the kernel's feature string set by
	// its real name ("rx-gro", "tx-tcp-segmentation", ...).
	Features(ifname string) (map[string]Feature, error)
	// Change requests features by name (ETHTOOL_SFEATURES). The kernel may
	// silently adjust dependent features; read them back.
	Change(ifname string, want map[string]bool) error
}

// Ring holds ring sizes in descriptors.
type Ring struct {
	RX, TX       uint32
	RXMax, TXMax uint32
}

// Feature is the state of one netdev feature.
type Feature struct {
	Active     bool // currently on
	Changeable bool // in the device's hw_features: user-changeable, not fixed
}

// noEthtool stands in when there is no ethtool socket: every ethtool knob
// reports unavailable instead of failing.
type noEthtool struct{}

var errNoEthtool = fmt.Errorf("no ethtool socket: %w", ErrUnavailable)

func (noEthtool) DriverName(string) (string, error)           { return "", errNoEthtool }
func (noEthtool) GetCoalesce(string) (uint32, error)          { return 0, errNoEthtool }
func (noEthtool) SetCoalesce(string, uint32) error            { return errNoEthtool }
func (noEthtool) GetRing(string) (Ring, error)                { return Ring{}, errNoEthtool }
func (noEthtool) SetRing(string, uint32, uint32) error        { return errNoEthtool }
func (noEthtool) Features(string) (map[string]Feature, error) { return nil, errNoEthtool }
func (noEthtool) Change(string, map[string]bool) error        { return errNoEthtool }
