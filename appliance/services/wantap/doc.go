// Package wantap is the WAN clients' packet socket: an AF_PACKET socket on the WAN interface, bound to IPv4 or IPv6 behind tcx ingress and filtered to the replies a client waits for.
package wantap
