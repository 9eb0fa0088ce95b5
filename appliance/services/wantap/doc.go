// Package wantap is the WAN clients' packet socket: an AF_PACKET tap on the WAN interface, filtered to the replies a client waits for.
package wantap
