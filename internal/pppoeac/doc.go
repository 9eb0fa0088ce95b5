// Package pppoeac is a small PPPoE access concentrator and PPP server (RFC 2516, 1661, 1332, 1334) for the bench and tests: one session at a time, PAP with any credentials, a fixed IPv4 address over IPCP, LCP echo replies.
package pppoeac
