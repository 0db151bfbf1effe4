package access

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// Origins are the web origins that may use the server from their pages:
// open /asy WebSockets, call the render API and the share API, and embed
// figures. The zero value allows only the server's own origin (the
// request's Host).
type Origins struct {
	any     bool
	allowed map[string]bool // "scheme://host[:port]", lower case
}

// NewOrigins reads an --allowed-origins list: "*" for any origin, else
// origins such as https://forum.example.org (scheme, host and a port when
// it is not the scheme's default). The server's own origin is always
// allowed.
func NewOrigins(list []string) (Origins, error) {
	o := Origins{allowed: map[string]bool{}}
	for _, s := range list {
		s = strings.TrimSpace(s)
		switch {
		case s == "":
			continue
		case s == "*":
			o.any = true
			continue
		}
		norm, ok := normalizeOrigin(s)
		if !ok {
			return Origins{}, fmt.Errorf("allowed origin %q: give scheme://host[:port] (no path), or *", s)
		}
		o.allowed[norm] = true
	}
	return o, nil
}

// Any says whether every origin is allowed.
func (o Origins) Any() bool { return o.any }

// normalizeOrigin reduces an origin to "scheme://host[:port]" in lower
// case, without the scheme's default port.
func normalizeOrigin(s string) (string, bool) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return "", false
	}
	host := strings.ToLower(u.Host)
	if port := u.Port(); (u.Scheme == "http" && port == "80") || (u.Scheme == "https" && port == "443") {
		host = strings.ToLower(u.Hostname())
		if strings.Contains(host, ":") {
			host = "[" + host + "]"
		}
	}
	return u.Scheme + "://" + host, true
}

// RequestOrigin is the origin a request comes from as the browser tells
// it: the Origin header, else the scheme and host of the Referer (an
// <img> load sends no Origin). ok is false when the browser told neither;
// a non-browser client, or a page whose referrer policy hides it.
func RequestOrigin(r *http.Request) (origin string, ok bool) {
	if o := r.Header.Get("Origin"); o != "" {
		return o, true
	}
	ref := r.Header.Get("Referer")
	if ref == "" {
		return "", false
	}
	u, err := url.Parse(ref)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return ref, true // unreadable: checked as it stands, and refused
	}
	return u.Scheme + "://" + u.Host, true
}

// Allows says whether a page of origin may use the server reached at
// host (the request's Host): the same host, a listed origin, or any when
// "*" is given. "null" (sandboxed frames, file: pages) is allowed only by
// "*".
func (o Origins) Allows(origin, host string) bool {
	if o.any {
		return true
	}
	norm, ok := normalizeOrigin(origin)
	if !ok {
		return false
	}
	if o.allowed[norm] {
		return true
	}
	u, _ := url.Parse(norm)
	return sameHost(u, host)
}

// sameHost compares an origin's host with a request's Host, with the
// scheme's default port added to whichever lacks one.
func sameHost(u *url.URL, host string) bool {
	if strings.EqualFold(u.Host, host) {
		return true
	}
	def := map[string]string{"http": "80", "https": "443"}[u.Scheme]
	withPort := func(h string) string {
		if strings.HasSuffix(h, "]") || !strings.Contains(h, ":") {
			return h + ":" + def
		}
		return h
	}
	return strings.EqualFold(withPort(u.Host), withPort(host))
}

// Check returns nil when r may go on: it names no origin (not a browser's
// cross-site request), or one that is allowed. Else the error's text is
// the client's.
func (o Origins) Check(r *http.Request) error {
	origin, told := RequestOrigin(r)
	if !told || o.Allows(origin, r.Host) {
		return nil
	}
	return fmt.Errorf("origin %s may not use this server (see --allowed-origins)", quoteOrigin(origin))
}

// quoteOrigin shows a client's origin in an error, cut short.
func quoteOrigin(s string) string {
	const most = 200
	if len(s) > most {
		s = s[:most] + "…"
	}
	return fmt.Sprintf("%q", s)
}
