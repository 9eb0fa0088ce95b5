// Package pppoepeer makes a test's ordinary namespace peer the access concentrator's end of a static PPPoE session: a tcx program on a veth end frames the IPv4 the namespace sends in the session (RFC 2516), and one on ingress counts the session frames it receives.
package pppoepeer
