// Package vlanpeer makes a test's ordinary namespace peer speak 802.1Q on its wire: tcx programs on a veth end push a VLAN tag on egress and accept only that VLAN on ingress, popping its tag and counting what they saw.
package vlanpeer
