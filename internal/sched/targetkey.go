package sched

import (
	"net"
	"net/netip"
	"net/url"
	"strings"
)

// TargetKey derives the limit key of a scan target
// (docs/design.md, "Per-key limits, priorities and random picks"): an IPv4
// address gives its /24, an IPv6 address its /48, tcp://host:port (any
// scheme) or host:port gives the key of its host, and anything else is its
// own network. Keys carry the prefix "net:" so that one pattern ("net:*")
// limits them all. Surrounding spaces are ignored.
//
//	10.1.2.3             → net:10.1.2.0/24
//	2001:db8:1:2::5      → net:2001:db8:1::/48
//	tcp://10.1.2.3:443   → net:10.1.2.0/24
//	tcp://[2001:db8::1]:22 → net:2001:db8::/48
//	10.1.2.3:443         → net:10.1.2.0/24
//	example.org:443      → net:example.org
//	example.org          → net:example.org
func TargetKey(target string) string {
	t := strings.TrimSpace(target)
	if i := strings.Index(t, "://"); i > 0 {
		if u, err := url.Parse(t); err == nil && u.Hostname() != "" {
			t = u.Hostname()
		}
	}
	return "net:" + network(t)
}

// network maps an address to its network and leaves anything else alone.
// A numeric port after a host or an address is dropped.
func network(host string) string {
	if h, port, err := net.SplitHostPort(host); err == nil && port != "" && strings.Trim(port, "0123456789") == "" {
		host = h
	}
	addr, err := netip.ParseAddr(strings.Trim(host, "[]"))
	if err != nil {
		return host
	}
	addr = addr.Unmap().WithZone("")
	bits := 48
	if addr.Is4() {
		bits = 24
	}
	return netip.PrefixFrom(addr, bits).Masked().String()
}
