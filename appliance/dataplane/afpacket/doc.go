// Package afpacket drives AF_PACKET TPACKET_V3 receive and transmit rings on golang.org/x/sys/unix.
package afpacket
