package sched

import (
	"fmt"
	"strings"
	"testing"
)

// Target keys (docs/design.md, "Per-key limits, priorities and random picks"):
// an IPv4 address limits its /24, an IPv6 address its /48, a tcp://host:port
// target its host's network, anything else itself; every key starts with
// "net:".

func TestTargetKey(t *testing.T) {
	cases := []struct {
		name, target, want string
	}{
		{"IPv4 address", "10.1.2.3", "net:10.1.2.0/24"},
		{"IPv4 network address", "10.1.2.0", "net:10.1.2.0/24"},
		{"IPv4 broadcast", "10.1.2.255", "net:10.1.2.0/24"},
		{"IPv4 lowest", "0.0.0.0", "net:0.0.0.0/24"},
		{"IPv4 highest", "255.255.255.255", "net:255.255.255.0/24"},
		{"IPv4 with spaces", "  10.1.2.3\t", "net:10.1.2.0/24"},
		{"IPv4-mapped IPv6", "::ffff:10.1.2.3", "net:10.1.2.0/24"},
		{"IPv6 address", "2001:db8:1:2::5", "net:2001:db8:1::/48"},
		{"IPv6 last in /48", "2001:db8:1:ffff:ffff:ffff:ffff:ffff", "net:2001:db8:1::/48"},
		{"IPv6 loopback", "::1", "net:::/48"},
		{"IPv6 with zone", "fe80::1%eth0", "net:fe80::/48"},
		{"IPv6 in brackets", "[2001:db8::1]", "net:2001:db8::/48"},
		{"tcp URL with IPv4", "tcp://10.1.2.3:443", "net:10.1.2.0/24"},
		{"tcp URL with IPv6", "tcp://[2001:db8:1:2::1]:22", "net:2001:db8:1::/48"},
		{"tcp URL without port", "tcp://10.9.8.7", "net:10.9.8.0/24"},
		{"udp URL", "udp://192.168.7.9:53", "net:192.168.7.0/24"},
		{"tcp URL with host name", "tcp://example.org:80", "net:example.org"},
		{"IPv4 with port", "10.1.2.3:443", "net:10.1.2.0/24"},
		{"IPv6 in brackets with port", "[2001:db8:1::1]:22", "net:2001:db8:1::/48"},
		{"host name with port", "example.org:80", "net:example.org"},
		{"non-numeric port stays itself", "example.org:http", "net:example.org:http"},
		{"host name", "example.org", "net:example.org"},
		{"CIDR stays itself", "10.1.2.128/25", "net:10.1.2.128/25"},
		{"incomplete IPv4 stays itself", "10.1.2", "net:10.1.2"},
		{"URL without host stays itself", "tcp://", "net:tcp://"},
		{"empty", "", "net:"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := TargetKey(c.target); got != c.want {
				t.Fatalf("TargetKey(%q) = %q, want %q", c.target, got, c.want)
			}
		})
	}
}

func TestTargetKeyGroupsSameNetworkOnly(t *testing.T) {
	same := [][2]string{
		{"10.1.2.3", "10.1.2.200"},
		{"10.1.2.3", "tcp://10.1.2.4:8080"},
		{"2001:db8:1:2::5", "2001:db8:1:ffff::9"},
		{"tcp://[2001:db8:1::1]:22", "2001:db8:1:2::1"},
	}
	for _, p := range same {
		if a, b := TargetKey(p[0]), TargetKey(p[1]); a != b {
			t.Errorf("%s → %s and %s → %s: want one key", p[0], a, p[1], b)
		}
	}
	different := [][2]string{
		{"10.1.2.3", "10.1.3.3"},
		{"2001:db8:1::1", "2001:db8:2::1"},
		{"example.org", "example.com"},
	}
	for _, p := range different {
		if a, b := TargetKey(p[0]), TargetKey(p[1]); a == b {
			t.Errorf("%s and %s share key %s: want different keys", p[0], p[1], a)
		}
	}
}

// FuzzTargetKey checks TargetKey never panics, is deterministic, always
// gives a "net:" key, and gives two IPv4 addresses of one /24 (bare or in a
// tcp:// URL) the same key: that /24.
func FuzzTargetKey(f *testing.F) {
	for _, s := range []string{"10.1.2.3", "2001:db8::1", "tcp://10.1.2.3:443", "tcp://[::1]:22",
		"example.org", "", " ", "[", "tcp://[", "::ffff:1.2.3.4", "fe80::1%eth0", "a://b@c:d/e?f#g"} {
		f.Add(s, byte(10), byte(1), byte(2), byte(3), byte(200))
	}
	f.Fuzz(func(t *testing.T, target string, a, b, c, d, e byte) {
		key := TargetKey(target)
		if again := TargetKey(target); again != key {
			t.Fatalf("TargetKey(%q) gave %q then %q", target, key, again)
		}
		if !strings.HasPrefix(key, "net:") {
			t.Fatalf("TargetKey(%q) = %q, want the net: prefix", target, key)
		}
		x, y := fmt.Sprintf("%d.%d.%d.%d", a, b, c, d), fmt.Sprintf("%d.%d.%d.%d", a, b, c, e)
		want := fmt.Sprintf("net:%d.%d.%d.0/24", a, b, c)
		for _, target := range []string{x, y, "tcp://" + y + ":80"} {
			if got := TargetKey(target); got != want {
				t.Fatalf("TargetKey(%q) = %q, want %q", target, got, want)
			}
		}
	})
}
