package dashboard

import (
	"net/netip"

	"e1kbox/appliance/router"
	"e1kbox/appliance/services/pppoe"
	"e1kbox/webui"
)

// pppoeWAN fills w for a PPPoE WAN from the client's status: bound with
// the session's IPCP address (a /32), the peer as gateway, its DNS
// servers and MTU while the session is up, init otherwise.
func pppoeWAN(w *webui.WANStatus, l *router.Live) { pppoeView(w, l.PPPoEStatus()) }

// pppoeView fills w from st (nil: no client runs).
func pppoeView(w *webui.WANStatus, st *pppoe.Status) {
	w.Mode, w.State = webui.WANModePPPoE, webui.WANInit
	if st == nil {
		w.State = webui.WANNone
		w.Link.PPPoE = &webui.WANPPPoE{State: pppoe.PhaseDown.String()}
		return
	}
	p := &webui.WANPPPoE{State: st.Phase.String(), ACName: st.ACName, SessionID: st.SessionID,
		EchoRTT: webui.Duration(st.EchoRTT), UpSince: st.UpSince, Reconnects: st.Reconnects, LastDownReason: st.LastDownReason}
	if len(st.ACMAC) == 6 {
		p.ACMAC = st.ACMAC.String()
	}
	w.Link.PPPoE = p
	if st.Phase != pppoe.PhaseUp || !st.LocalIPv4.Is4() {
		return
	}
	w.State = webui.WANBound
	w.Address, w.Gateway, w.MTU = netip.PrefixFrom(st.LocalIPv4, 32), st.PeerIPv4, st.MTU
	for _, a := range []netip.Addr{st.DNS1, st.DNS2} {
		if a.IsValid() && !a.IsUnspecified() {
			w.DNS = append(w.DNS, a)
		}
	}
	w.Obtained = st.UpSince
}
