package tuning

import (
	"fmt"

	"github.com/safchain/ethtool"
)

// SysEthtool is the real Ethtool on github.com/safchain/ethtool (ioctl
// SIOCETHTOOL). Its socket belongs to the network namespace of the thread
// that called NewEthtool.
//
// Caveats of the library that this type covers: SetCoalesce and SetRing
// send the whole struct, so both do get-modify-set (e1000e rejects any
// non-zero unsupported coalesce field with EOPNOTSUPP); Change ignores the
// positive ETHTOOL_F_* return flags of SFEATURES, so the knobs read the
// features back after every change.
type SysEthtool struct {
	e *ethtool.Ethtool
}

var _ Ethtool = (*SysEthtool)(nil)

// NewEthtool opens an ethtool ioctl socket.
func NewEthtool() (*SysEthtool, error) {
	e, err := ethtool.NewEthtool()
	if err != nil {
		return nil, fmt.Errorf("ethtool socket: %w", err)
	}
	return &SysEthtool{e: e}, nil
}

// Close closes the socket.
func (s *SysEthtool) Close() error {
	s.e.Close()
	return nil
}

// DriverName implements Ethtool.
func (s *SysEthtool) DriverName(ifname string) (string, error) {
	d, err := s.e.DriverName(ifname)
	if err != nil {
		return "", fmt.Errorf("ethtool drvinfo %s: %w", ifname, err)
	}
	return d, nil
}

// GetCoalesce implements Ethtool.
func (s *SysEthtool) GetCoalesce(ifname string) (uint32, error) {
	c, err := s.e.GetCoalesce(ifname)
	if err != nil {
		return 0, fmt.Errorf("ethtool get coalesce %s: %w", ifname, err)
	}
	return c.RxCoalesceUsecs, nil
}

// SetCoalesce implements Ethtool with get-modify-set.
func (s *SysEthtool) SetCoalesce(ifname string, rxUsecs uint32) error {
	c, err := s.e.GetCoalesce(ifname)
	if err != nil {
		return fmt.Errorf("ethtool get coalesce %s: %w", ifname, err)
	}
	c.RxCoalesceUsecs = rxUsecs
	if _, err := s.e.SetCoalesce(ifname, c); err != nil {
		return fmt.Errorf("ethtool set coalesce %s rx-usecs %d: %w", ifname, rxUsecs, err)
	}
	return nil
}

// GetRing implements Ethtool.
func (s *SysEthtool) GetRing(ifname string) (Ring, error) {
	r, err := s.e.GetRing(ifname)
	if err != nil {
		return Ring{}, fmt.Errorf("ethtool get ring %s: %w", ifname, err)
	}
	return Ring{RX: r.RxPending, TX: r.TxPending, RXMax: r.RxMaxPending, TXMax: r.TxMaxPending}, nil
}

// SetRing implements Ethtool with get-modify-set.
func (s *SysEthtool) SetRing(ifname string, rx, tx uint32) error {
	r, err := s.e.GetRing(ifname)
	if err != nil {
		return fmt.Errorf("ethtool get ring %s: %w", ifname, err)
	}
	r.RxPending, r.TxPending = rx, tx
	if _, err := s.e.SetRing(ifname, r); err != nil {
		return fmt.Errorf("ethtool set ring %s rx %d tx %d: %w", ifname, rx, tx, err)
	}
	return nil
}

// Features implements Ethtool.
func (s *SysEthtool) Features(ifname string) (map[string]Feature, error) {
	fs, err := s.e.FeaturesWithState(ifname)
	if err != nil {
		return nil, fmt.Errorf("ethtool features %s: %w", ifname, err)
	}
	out := make(map[string]Feature, len(fs))
	for name, st := range fs {
		out[name] = Feature{Active: st.Active, Changeable: st.Available}
	}
	return out, nil
}

// Change implements Ethtool.
func (s *SysEthtool) Change(ifname string, want map[string]bool) error {
	if err := s.e.Change(ifname, want); err != nil {
		return fmt.Errorf("ethtool set features %s %v: %w", ifname, want, err)
	}
	return nil
}
