package access

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

func request(peer string, headers map[string]string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "http://usher.example/asy", nil)
	r.RemoteAddr = peer
	for k, v := range headers {
		r.Header.Set(k, v)
	}
	return r
}

func mustProxies(t testing.TB, header ProxyHeader, cidrs ...string) Proxies {
	t.Helper()
	p, err := NewProxies(cidrs, header)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The client's address: the peer's unless the peer is a trusted proxy;
// then the rightmost hop that is not trusted. A client that forges the
// header directly, or through a trusted proxy that appends to it, does
// not get to choose its address.
func TestClientAddress(t *testing.T) {
	xff := mustProxies(t, XForwardedFor, "10.0.0.0/8", "::1")
	fwd := mustProxies(t, Forwarded, "10.0.0.0/8")
	for _, c := range []struct {
		name    string
		p       Proxies
		peer    string
		headers map[string]string
		want    string
	}{
		{"no proxy trusted", Proxies{}, "203.0.113.9:5000", map[string]string{"X-Forwarded-For": "1.2.3.4"}, "203.0.113.9"},
		{"untrusted peer forges the header", xff, "203.0.113.9:5000", map[string]string{"X-Forwarded-For": "1.2.3.4"}, "203.0.113.9"},
		{"trusted proxy names the client", xff, "10.1.2.3:80", map[string]string{"X-Forwarded-For": "198.51.100.7"}, "198.51.100.7"},
		{"forged hop left of the real client", xff, "10.1.2.3:80", map[string]string{"X-Forwarded-For": "1.2.3.4, 198.51.100.7"}, "198.51.100.7"},
		{"two trusted hops", xff, "10.1.2.3:80", map[string]string{"X-Forwarded-For": "198.51.100.7, 10.9.9.9"}, "198.51.100.7"},
		{"every hop trusted: the leftmost", xff, "10.1.2.3:80", map[string]string{"X-Forwarded-For": "10.0.0.5, 10.9.9.9"}, "10.0.0.5"},
		{"trusted proxy without a header", xff, "10.1.2.3:80", nil, "10.1.2.3"},
		{"garbage hop stops at the last address", xff, "10.1.2.3:80", map[string]string{"X-Forwarded-For": "198.51.100.7, nonsense"}, "10.1.2.3"},
		{"garbage left of the client", xff, "10.1.2.3:80", map[string]string{"X-Forwarded-For": "nonsense, 198.51.100.7"}, "198.51.100.7"},
		{"IPv6 peer trusted", xff, "[::1]:80", map[string]string{"X-Forwarded-For": "2001:db8::1"}, "2001:db8::1"},
		{"IPv4-mapped peer", xff, "[::ffff:10.1.2.3]:80", map[string]string{"X-Forwarded-For": "198.51.100.7"}, "198.51.100.7"},
		{"hop with a port", xff, "10.1.2.3:80", map[string]string{"X-Forwarded-For": "198.51.100.7:4711"}, "198.51.100.7"},
		{"X-Forwarded-For ignored when Forwarded is the header", fwd, "10.1.2.3:80",
			map[string]string{"X-Forwarded-For": "1.2.3.4", "Forwarded": "for=198.51.100.7"}, "198.51.100.7"},
		{"Forwarded ignored when X-Forwarded-For is the header", xff, "10.1.2.3:80",
			map[string]string{"Forwarded": "for=1.2.3.4", "X-Forwarded-For": "198.51.100.7"}, "198.51.100.7"},
		{"Forwarded chain", fwd, "10.1.2.3:80",
			map[string]string{"Forwarded": `for=1.2.3.4, for="[2001:db8:cafe::17]:4711";proto=https, for=10.0.0.2`}, "2001:db8:cafe::17"},
		{"Forwarded unknown stops the walk", fwd, "10.1.2.3:80", map[string]string{"Forwarded": "for=unknown"}, "10.1.2.3"},
		{"Forwarded obfuscated stops the walk", fwd, "10.1.2.3:80", map[string]string{"Forwarded": "for=_hidden, for=10.0.0.2"}, "10.0.0.2"},
		{"Forwarded malformed element", fwd, "10.1.2.3:80", map[string]string{"Forwarded": `for="1.2.3.4`}, "10.1.2.3"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.p.ClientAddress(request(c.peer, c.headers)); got != c.want {
				t.Fatalf("ClientAddress = %q; want %q", got, c.want)
			}
		})
	}
}

func TestNewProxiesRefusesWhatIsNotACIDR(t *testing.T) {
	for _, bad := range []string{"10.0.0.0/33", "example.org", "10.0.0.1/x", "::1/129"} {
		if _, err := NewProxies([]string{bad}, ""); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("NewProxies(%q) = %v; want an error naming it", bad, err)
		}
	}
	if _, err := ParseProxyHeader("X-Real-IP"); err == nil {
		t.Error("ParseProxyHeader(X-Real-IP) accepted a header it does not read")
	}
}

// Secure: TLS to usher itself, or https reported by a trusted proxy; an
// untrusted peer cannot claim it.
func TestSecure(t *testing.T) {
	xff := mustProxies(t, XForwardedFor, "10.0.0.0/8")
	fwd := mustProxies(t, Forwarded, "10.0.0.0/8")
	tlsReq := request("203.0.113.9:1", nil)
	tlsReq.TLS = &tls.ConnectionState{}
	for _, c := range []struct {
		name string
		p    Proxies
		r    *http.Request
		want bool
	}{
		{"plain", xff, request("203.0.113.9:1", nil), false},
		{"tls", xff, tlsReq, true},
		{"untrusted peer claims https", xff, request("203.0.113.9:1", map[string]string{"X-Forwarded-Proto": "https"}), false},
		{"trusted proxy says https", xff, request("10.0.0.1:1", map[string]string{"X-Forwarded-Proto": "https"}), true},
		{"trusted proxy says http", xff, request("10.0.0.1:1", map[string]string{"X-Forwarded-Proto": "http"}), false},
		{"Forwarded proto", fwd, request("10.0.0.1:1", map[string]string{"Forwarded": "for=1.2.3.4;proto=https"}), true},
	} {
		if got := c.p.Secure(c.r); got != c.want {
			t.Errorf("%s: Secure = %v; want %v", c.name, got, c.want)
		}
	}
}

// Whatever the headers say, the client is a valid address; it is the
// peer when the peer is not trusted, and otherwise the peer or an address
// the header names.
func FuzzClientAddress(f *testing.F) {
	for _, s := range []string{"1.2.3.4", "1.2.3.4, 10.0.0.1", "for=1.2.3.4", `for="[::1]:80";proto=https, for=10.0.0.1`,
		"unknown", `for="\"`, ",,,", "for=_x;for=1.2.3.4", "[2001:db8::1]:1, 2001:db8::2"} {
		f.Add(s, "10.0.0.1", false)
		f.Add(s, "203.0.113.1", true)
	}
	p := mustProxies(f, XForwardedFor, "10.0.0.0/8")
	pf := mustProxies(f, Forwarded, "10.0.0.0/8")
	f.Fuzz(func(t *testing.T, header, peerIP string, forwarded bool) {
		peerAddr, err := netip.ParseAddr(peerIP)
		if err != nil || peerAddr.Zone() != "" {
			return
		}
		r := request(netip.AddrPortFrom(peerAddr, 1234).String(), nil)
		r.Header["X-Forwarded-For"] = []string{header}
		r.Header["Forwarded"] = []string{header}
		proxies := p
		if forwarded {
			proxies = pf
		}
		got := proxies.ClientAddress(r)
		a, err := netip.ParseAddr(got)
		if err != nil {
			t.Fatalf("ClientAddress = %q, not an address", got)
		}
		if !proxies.trusts(peerAddr) {
			if a != peerAddr.Unmap() {
				t.Fatalf("untrusted peer %s named %s from its header", peerAddr, got)
			}
			return
		}
		if a != peerAddr.Unmap() && !strings.Contains(header, strings.TrimPrefix(a.String(), "::ffff:")) && !mentions(header, a) {
			t.Fatalf("client %s is neither the peer nor in the header %q", got, header)
		}
	})
}

// mentions says whether some hop in the header is the address a (it may
// be written another way, as IPv6 allows).
func mentions(header string, a netip.Addr) bool {
	for _, part := range strings.FieldsFunc(header, func(r rune) bool { return strings.ContainsRune(",;= \"", r) }) {
		if h, ok := parseNode(part); ok && h == a {
			return true
		}
	}
	return false
}

// A Forwarded element written from parameters reads back as them.
func FuzzForwardedRoundTrip(f *testing.F) {
	f.Add("1.2.3.4", "https", "by-x")
	f.Add("[2001:db8::1]:80", "http", `we"ird\`)
	f.Fuzz(func(t *testing.T, forVal, proto, by string) {
		quote := func(s string) string {
			return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
		}
		line := "for=" + quote(forVal) + ";proto=" + quote(proto) + ";by=" + quote(by)
		els := parseForwarded([]string{line})
		if len(els) != 1 {
			t.Fatalf("%q: %d elements", line, len(els))
		}
		if els[0]["for"] != forVal || els[0]["proto"] != proto || els[0]["by"] != by {
			t.Fatalf("%q read back as %q", line, els[0])
		}
	})
}
