package access

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// ProxyHeader names the header trusted proxies put the client's address
// in. Only one is read: a proxy that appends to one passes the other from
// the client untouched, so reading both would let a client forge its
// address.
type ProxyHeader string

// The headers a trusted proxy may use.
const (
	XForwardedFor ProxyHeader = "X-Forwarded-For" // nginx's $proxy_add_x_forwarded_for, Caddy
	Forwarded     ProxyHeader = "Forwarded"       // RFC 7239
)

// ParseProxyHeader reads a --proxy-header value (case does not matter).
func ParseProxyHeader(s string) (ProxyHeader, error) {
	switch {
	case strings.EqualFold(s, string(XForwardedFor)):
		return XForwardedFor, nil
	case strings.EqualFold(s, string(Forwarded)):
		return Forwarded, nil
	}
	return "", fmt.Errorf("proxy header %q: use X-Forwarded-For or Forwarded", s)
}

// Proxies are the reverse proxies whose forwarding headers are believed.
// The zero value trusts none: every client is its peer address.
type Proxies struct {
	nets   []netip.Prefix
	header ProxyHeader
}

// NewProxies trusts the peers in the CIDRs (a bare address is a /32 or
// /128) to report the client in header (XForwardedFor when empty).
func NewProxies(cidrs []string, header ProxyHeader) (Proxies, error) {
	p := Proxies{header: header}
	if p.header == "" {
		p.header = XForwardedFor
	}
	for _, c := range cidrs {
		c = strings.TrimSpace(c)
		if c == "" {
			continue
		}
		pfx, err := parsePrefix(c)
		if err != nil {
			return Proxies{}, fmt.Errorf("trusted proxy %q is not a CIDR or an address", c)
		}
		p.nets = append(p.nets, pfx)
	}
	return p, nil
}

func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		return p.Masked(), err
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()), nil
}

// trusts says whether a is one of the trusted proxies.
func (p Proxies) trusts(a netip.Addr) bool {
	a = a.Unmap()
	for _, n := range p.nets {
		if n.Contains(a) {
			return true
		}
	}
	return false
}

// peer is the address of the request's TCP peer.
func peer(r *http.Request) (netip.Addr, bool) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, err := netip.ParseAddr(host)
	return a.Unmap(), err == nil
}

// ClientAddress names the client of r: its peer's IP, or, when the peer
// is a trusted proxy, the rightmost address in the forwarding header that
// is not a trusted proxy itself. Headers from an untrusted peer are never
// read. When every hop is trusted, the leftmost is the client; a hop that
// is not an address (RFC 7239's "unknown" or an obfuscated name, or
// garbage) stops the walk at the last address seen.
func (p Proxies) ClientAddress(r *http.Request) string {
	a, ok := peer(r)
	if !ok {
		return r.RemoteAddr
	}
	if !p.trusts(a) {
		return a.String()
	}
	hops := p.hops(r.Header)
	for i := len(hops) - 1; i >= 0; i-- {
		h, ok := parseNode(hops[i])
		if !ok {
			break
		}
		a = h
		if !p.trusts(h) {
			break
		}
	}
	return a.String()
}

// FromTrustedProxy says whether r's peer is a trusted proxy.
func (p Proxies) FromTrustedProxy(r *http.Request) bool {
	a, ok := peer(r)
	return ok && p.trusts(a)
}

// Secure says whether the client reached the server over TLS: directly,
// or as a trusted proxy reports in X-Forwarded-Proto or Forwarded's proto.
func (p Proxies) Secure(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	if !p.FromTrustedProxy(r) {
		return false
	}
	if p.header == Forwarded {
		els := parseForwarded(r.Header.Values("Forwarded"))
		return len(els) > 0 && strings.EqualFold(els[len(els)-1]["proto"], "https")
	}
	proto := lastListItem(r.Header.Values("X-Forwarded-Proto"))
	return strings.EqualFold(proto, "https")
}

// hops lists the forwarded-for nodes of every header line, in order.
func (p Proxies) hops(h http.Header) []string {
	if p.header == Forwarded {
		var out []string
		for _, el := range parseForwarded(h.Values("Forwarded")) {
			out = append(out, el["for"]) // "" when the element names none: stops the walk
		}
		return out
	}
	var out []string
	for _, line := range h.Values("X-Forwarded-For") {
		for item := range strings.SplitSeq(line, ",") {
			out = append(out, strings.TrimSpace(item))
		}
	}
	return out
}

func lastListItem(lines []string) string {
	if len(lines) == 0 {
		return ""
	}
	items := strings.Split(lines[len(lines)-1], ",")
	return strings.TrimSpace(items[len(items)-1])
}

// parseNode reads one hop: an IPv4 or IPv6 address, bracketed or not,
// with an optional port (RFC 7239's node, and what X-Forwarded-For holds).
func parseNode(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), true
	}
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		s = s[1 : len(s)-1]
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// parseForwarded splits Forwarded header lines (RFC 7239, section 4) into
// their elements, each a map of lower-case parameter names to values with
// quotes removed. A malformed element becomes an empty map, so that a
// walk over the hops stops there.
func parseForwarded(lines []string) []map[string]string {
	var out []map[string]string
	for _, line := range lines {
		for _, el := range splitQuoted(line, ',') {
			out = append(out, parseElement(el))
		}
	}
	return out
}

func parseElement(el string) map[string]string {
	m := map[string]string{}
	for _, pair := range splitQuoted(el, ';') {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		name, value, ok := strings.Cut(pair, "=")
		name = strings.ToLower(strings.TrimSpace(name))
		if !ok || name == "" {
			return map[string]string{}
		}
		v, ok := unquote(strings.TrimSpace(value))
		if !ok {
			return map[string]string{}
		}
		if _, dup := m[name]; dup {
			return map[string]string{} // a parameter may appear once per element
		}
		m[name] = v
	}
	return m
}

// splitQuoted splits s at sep outside quoted strings.
func splitQuoted(s string, sep byte) []string {
	var out []string
	start, quoted := 0, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && quoted:
			i++
		case c == '"':
			quoted = !quoted
		case c == sep && !quoted:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// unquote reads a token or a quoted-string with backslash escapes.
func unquote(v string) (string, bool) {
	if !strings.HasPrefix(v, `"`) {
		return v, !strings.ContainsAny(v, "\" \t")
	}
	if len(v) < 2 || !strings.HasSuffix(v, `"`) {
		return "", false
	}
	var b strings.Builder
	body := v[1 : len(v)-1]
	for i := 0; i < len(body); i++ {
		switch body[i] {
		case '\\':
			if i+1 == len(body) {
				return "", false
			}
			i++
		case '"':
			return "", false
		}
		b.WriteByte(body[i])
	}
	return b.String(), true
}
