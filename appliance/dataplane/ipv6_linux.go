package dataplane

import "e1kbox/appliance/dataplane/route6"

// IPv6 is the NAT router's IPv6 router (NAT.IPv6), nil without one.
func (e *Engine) IPv6() *route6.Router { return e.natp.v6 }
