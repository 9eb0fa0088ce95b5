// Package dnsd is the router's DNS forwarder and cache for the LAN: local names, a bounded cache, upstream failover.
package dnsd
