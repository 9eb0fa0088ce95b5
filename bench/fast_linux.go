package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"

	"e1kbox/appliance/dataplane/afpacket"
)

// Established flows for the NAT paths and the fast path's readiness.

// establish makes the NAT path's flows established: the generator's
// frames create a connection per flow, the sink (the gateway, playing
// the server) answers each once, and 2.1 s later the next frames make the
// UDP connections streams (assured), which the e1kbox fast path takes
// over. The router keeps the generator's source ports, so the answers go
// to them. The IPv6 paths open their flows at establishRate6: e1kbox's
// IPv6 is its worker's, and a flow whose first frames a full ring lost
// would have its answer dropped by the firewall.
func (h *harness) establish(ctx context.Context, p Path, pl cpuPlace) error {
	rate := 100000.0
	if p.IPv6 {
		rate = establishRate6
	}
	spec, err := h.genFor(p, pl, minFrame, rate)
	if err != nil {
		return err
	}
	g, err := startGenerator(spec)
	if err != nil {
		return err
	}
	sleep(ctx, time.Duration(float64(h.flows)/rate*float64(time.Second))+100*time.Millisecond)
	if err := g.Stop(); err != nil {
		return err
	}
	replies := make([][]byte, h.flows)
	for i := range replies {
		if p.IPv6 {
			// From the server's discard port to the flow's, untranslated.
			f, err := udpFrame6(minFrame, macS0, macB1, ipv6ServerIP, ipv6GenIP, udpDport, firstSport)
			if err != nil {
				return err
			}
			setDport6(f, i)
			replies[i] = f
			continue
		}
		f, err := udpFrame(minFrame, macS0, macB1, natServerIP, natWAN.Addr())
		if err != nil {
			return err
		}
		setFlow(f, i)
		// Swap the ports: from the server's discard port to the flow's.
		f[sportOff], f[sportOff+1], f[sportOff+2], f[sportOff+3] = 0, udpDport, f[sportOff], f[sportOff+1]
		if p.WANPPPoE {
			f = withPPPoE(f)
		}
		replies[i] = withVLAN(f, p.WANVLAN)
	}
	// In chunks with pauses, and twice: a reply lost in a full ring
	// would leave its flow unreplied.
	for range 2 {
		for i := 0; i < len(replies); i += 512 {
			if err := sendMany(h.t.sink, "s0", replies[i:min(i+512, len(replies))]); err != nil {
				return fmt.Errorf("%s: answers: %w", p.Name, err)
			}
			sleep(ctx, 5*time.Millisecond)
		}
	}
	sleep(ctx, 2100*time.Millisecond)
	return ctx.Err()
}

// withPPPoE is the untagged IPv4 frame f in the bench's PPPoE session
// (the AC's frame to the box: f's MACs, the session header, f's IP
// packet).
func withPPPoE(f []byte) []byte {
	out := append(f[:12:12], 0x88, 0x64, 0x11, 0, byte(benchSession>>8), byte(benchSession&0xff))
	out = binary.BigEndian.AppendUint16(out, uint16(len(f)-ethLen+2))
	out = append(out, 0x00, 0x21)
	return append(out, f[ethLen:]...)
}

// withVLAN is frame f tagged with 802.1Q VLAN vid (f itself for 0):
// sendMany's ring bypasses the sink's tcx egress, where vlanpeer tags.
func withVLAN(f []byte, vid uint16) []byte {
	if vid == 0 {
		return f
	}
	out := append(f[:12:12], 0x81, 0x00, byte(vid>>8), byte(vid))
	return append(out, f[12:]...)
}

// establishChecked is establish; on the e1kbox IPv6 paths it then asks
// the appliance whether its firewall dropped answers (flows whose first
// frames were lost on the way, for example to a full ring or neighbour
// queue on a busy machine, are not open) and establishes again, up to
// three times. what names the path in the progress output.
func (h *harness) establishChecked(ctx context.Context, p Path, pl cpuPlace, what string, progress io.Writer) error {
	if !p.IPv6 || p.Kind != kindE1kbox {
		return h.establish(ctx, p, pl)
	}
	dropped := func() (uint64, error) {
		var st ipv6State
		if err := h.applianceGet(ctx, "/api/dataplane", &st); err != nil {
			return 0, fmt.Errorf("%s: %w", p.Name, err)
		}
		if st.IPv6 == nil {
			return 0, fmt.Errorf("%s: the appliance routes no IPv6", p.Name)
		}
		return st.IPv6.Drops["firewall"], nil
	}
	for try := 1; ; try++ {
		before, err := dropped()
		if err != nil {
			return err
		}
		if err := h.establish(ctx, p, pl); err != nil {
			return err
		}
		after, err := dropped()
		if err != nil {
			return err
		}
		if after == before {
			return nil
		}
		if try == 3 {
			return fmt.Errorf("%s: the IPv6 firewall dropped %d answers in the last of 3 tries to open the flows", p.Name, after-before)
		}
		fmt.Fprintf(progress, "%s: the IPv6 firewall dropped %d answers: opening the flows again\n", what, after-before)
	}
}

// establishRate6 is the rate (frames/s) at which the IPv6 paths open
// their flows.
const establishRate6 = 20000

// sendMany sends frames from iface in ns through a TX ring, flushing as
// it fills.
func sendMany(ns, iface string, frames [][]byte) error {
	return inNetns(ns, func() error {
		s, err := afpacket.Open(iface, afpacket.Config{NoRX: true, TxFrames: 1024, TxCopy: true})
		if err != nil {
			return err
		}
		defer s.Close()
		for _, f := range frames {
			if !s.Append(f) {
				if err := s.Flush(); err != nil {
					return err
				}
				if !s.Append(f) {
					return fmt.Errorf("frame of %d bytes not queued", len(f))
				}
			}
		}
		return s.Flush()
	})
}

// applianceGet GETs path from the appliance's API in the box namespace
// into v.
func (h *harness) applianceGet(ctx context.Context, path string, v any) error {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (conn net.Conn, err error) {
			nerr := inNetns(h.t.box, func() error {
				conn, err = (&net.Dialer{}).DialContext(ctx, network, addr)
				return nil
			})
			if nerr != nil {
				return nil, nerr
			}
			return conn, err
		},
		DisableKeepAlives: true,
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+applianceListen+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", basicAuth("gokrazy", dashboardPassword))
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("GET %s: %s: %s", path, resp.Status, b)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// fastState is the part of /api/dataplane the harness reads.
type fastState struct {
	FastPath *struct {
		Mode       string            `json:"mode"`
		Reason     string            `json:"reason"`
		NATFlows   int               `json:"natFlows"`
		Pairs      int               `json:"pairs"`
		Microflows int               `json:"microflows"`
		IPv6Flows  int               `json:"ipv6Flows"`
		Packets    uint64            `json:"packets"`
		Installed  uint64            `json:"installed"`
		Evicted    uint64            `json:"evicted"`
		Refused    uint64            `json:"refused"`
		Dropped    uint64            `json:"dropped"`
		Punts      map[string]uint64 `json:"punts"`
	} `json:"fastPath"`
	// Drops are the dataplane's drops by reason (a failure says them).
	Drops map[string]uint64 `json:"drops"`
}

// fastFlows is how many flows the fast path must hold before an e1kbox
// path with it is measured: one per generator flow (NAT connections,
// routed IPv6 connections, bridge microflows under address rules), or the
// one bridged pair.
func (h *harness) fastFlows(p Path) int {
	if p.NAT || p.Rules > 0 {
		return h.flows
	}
	return 1
}

// warmFast runs traffic through an e1kbox path until its fast path holds
// every flow (the flows go to the kernel as their frames reach the
// appliance); it returns the fast path's state. A path with the fast path
// off returns at once.
func (h *harness) warmFast(ctx context.Context, p Path, pl cpuPlace) (fastState, error) {
	var st fastState
	if p.Kind != kindE1kbox || p.workerForwards() {
		return st, nil
	}
	spec, err := h.genFor(p, pl, minFrame, 100000)
	if err != nil {
		return st, err
	}
	if !p.NAT {
		if err := h.learn(); err != nil {
			return st, err
		}
	}
	g, err := startGenerator(spec)
	if err != nil {
		return st, err
	}
	defer g.Stop()
	want := h.fastFlows(p)
	deadline := time.Now().Add(15 * time.Second)
	for {
		sleep(ctx, 200*time.Millisecond)
		if err := h.applianceGet(ctx, "/api/dataplane", &st); err != nil {
			if time.Now().After(deadline) {
				return st, fmt.Errorf("%s: %w", p.Name, err)
			}
			continue
		}
		fs := st.FastPath
		switch {
		case fs == nil || fs.Mode == "off":
			return st, fmt.Errorf("%s: the fast path is off: %+v", p.Name, fs)
		case fs.NATFlows+fs.Pairs+fs.Microflows+fs.IPv6Flows >= want*99/100:
			return st, nil
		case time.Now().After(deadline) || ctx.Err() != nil:
			for k, v := range st.Drops {
				if v == 0 {
					delete(st.Drops, k)
				}
			}
			return st, fmt.Errorf("%s: the fast path holds %d NAT flows, %d pairs, %d microflows, %d IPv6 flows after 15 s; want %d "+
				"(punts %v; installed %d, evicted %d, refused %d, offers dropped %d; dataplane drops %v)",
				p.Name, fs.NATFlows, fs.Pairs, fs.Microflows, fs.IPv6Flows, want, fs.Punts, fs.Installed, fs.Evicted, fs.Refused, fs.Dropped, st.Drops)
		}
	}
}

// ipv6State is the part of /api/dataplane the IPv6 paths read: the
// appliance's IPv6 router.
type ipv6State struct {
	IPv6 *struct {
		LAN     []string          `json:"lan"`
		Gateway string            `json:"gateway"`
		Conns   int               `json:"conns"`
		Actions map[string]uint64 `json:"actions"`
		Drops   map[string]uint64 `json:"drops"`
	} `json:"ipv6"`
}

// check says whether the appliance routed the IPv6 path as the harness
// set it up: the static prefix's first /64 on the LAN, the sink as the
// next hop and a connection for (nearly) every flow.
func (s ipv6State) check(flows int) error {
	v := s.IPv6
	lan := netip.PrefixFrom(ipv6Prefix.Addr(), 64).String()
	switch {
	case v == nil:
		return errors.New("the appliance routes no IPv6")
	case len(v.LAN) != 1 || v.LAN[0] != lan:
		return fmt.Errorf("the appliance's IPv6 LAN prefixes are %v, want %s", v.LAN, lan)
	case v.Gateway != ipv6Gateway.String():
		return fmt.Errorf("the appliance's IPv6 next hop is %q, want %s", v.Gateway, ipv6Gateway)
	case v.Conns < flows*99/100:
		return fmt.Errorf("the appliance's IPv6 router tracks %d connections, want %d (drops %v)", v.Conns, flows, v.Drops)
	}
	return nil
}

// fastCount is what the fast path of an e1kbox path had forwarded and
// left to the rings at one time (nil: the path has no fast path).
type fastCount struct {
	packets uint64
	punts   map[string]uint64
}

// fastCounts reads p's fast path counters (nil for a path without one,
// or when the appliance does not answer).
func (h *harness) fastCounts(ctx context.Context, p Path) *fastCount {
	if p.Kind != kindE1kbox || p.FastPath == "off" {
		return nil
	}
	var st fastState
	if err := h.applianceGet(ctx, "/api/dataplane", &st); err != nil || st.FastPath == nil {
		return nil
	}
	return &fastCount{packets: st.FastPath.Packets, punts: st.FastPath.Punts}
}

// since says how many of sent frames the fast path forwarded between
// before and c, and what it left to the rings meanwhile ("" without
// both counts).
func (c *fastCount) since(before *fastCount, sent uint64) string {
	if c == nil || before == nil {
		return ""
	}
	var punts []string
	for k, v := range c.punts {
		if d := v - before.punts[k]; d > 0 {
			punts = append(punts, fmt.Sprintf("%s %d", k, d))
		}
	}
	slices.Sort(punts)
	return fmt.Sprintf("; fast path %d of %d sent, left to the rings: %s", c.packets-before.packets, sent, strings.Join(punts, ", "))
}
