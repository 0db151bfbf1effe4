package service

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"maps"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/usherhq/usher/internal/access"
	"github.com/usherhq/usher/internal/asyqueue"
	"github.com/usherhq/usher/internal/testwait"
	"github.com/usherhq/usher/internal/wire"
)

// nginxConf is the nginx configuration docs/operations.md prints.
const nginxConf = "../../docs/nginx-usher.conf"

// The configuration the proxy test runs is the one the docs print.
func TestOperationsDocPrintsTheNginxConfig(t *testing.T) {
	conf, err := os.ReadFile(nginxConf)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "```nginx\n"+string(conf)+"```\n") {
		t.Fatalf("docs/operations.md does not print %s verbatim in an nginx code block", nginxConf)
	}
}

// nginxSite is nginx running the documented configuration.
type nginxSite struct {
	https   string         // host:port of the TLS server
	http    string         // host:port of the plain-HTTP server
	roots   *x509.CertPool // trusts the TLS server's certificate
	webroot string         // where the plain-HTTP server finds ACME challenge files
}

// startNginx runs Debian's nginx with the documented configuration, the
// lines that name this machine replaced: both servers listen on free
// ports, the TLS server holds a certificate the test makes, challenge
// files come from a directory of the test, and the proxy goes to
// upstream (host:port).
func startNginx(t *testing.T, upstream string) *nginxSite {
	t.Helper()
	bin, err := exec.LookPath("nginx")
	if err != nil {
		if bin, err = exec.LookPath("/usr/sbin/nginx"); err != nil {
			t.Fatal("nginx is not installed (scripts/deps.sh installs it)")
		}
	}
	conf, err := os.ReadFile(nginxConf)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cert, key, roots := testCertificate(t, dir)
	site := &nginxSite{roots: roots, webroot: filepath.Join(dir, "webroot")}
	httpPort, httpsPort := freePort(t), freePort(t)
	site.http, site.https = "127.0.0.1:"+httpPort, "127.0.0.1:"+httpsPort
	_, upPort, _ := net.SplitHostPort(upstream)
	text := string(conf)
	for _, r := range []struct{ line, with string }{
		{"listen 80;", "listen " + httpPort + ";"},
		{"root /var/www/html;", "root " + site.webroot + ";"},
		{"listen 443 ssl http2;", "listen " + httpsPort + " ssl http2;"},
		{"ssl_certificate /etc/letsencrypt/live/usher.example.org/fullchain.pem;", "ssl_certificate " + cert + ";"},
		{"ssl_certificate_key /etc/letsencrypt/live/usher.example.org/privkey.pem;", "ssl_certificate_key " + key + ";"},
		{"proxy_pass http://127.0.0.1:8080;", "proxy_pass http://127.0.0.1:" + upPort + ";"},
	} {
		if n := strings.Count(text, r.line); n != 1 {
			t.Fatalf("%s has the line %q %d times; the test replaces it and needs it once", nginxConf, r.line, n)
		}
		text = strings.Replace(text, r.line, r.with, 1)
	}
	write := func(name, s string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("usher.conf", text)
	// The main context around the documented file: one process in the
	// foreground, everything it writes in the test's directory.
	write("nginx.conf", fmt.Sprintf(`daemon off;
master_process off;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log info;
events { worker_connections 512; }
http {
    access_log %[1]s/access.log;
    client_body_temp_path %[1]s/body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
    include %[1]s/usher.conf;
}
`, dir))
	cmd := exec.Command(bin, "-p", dir, "-c", filepath.Join(dir, "nginx.conf"), "-e", filepath.Join(dir, "error.log"))
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	err = testwait.Until(10*time.Second, func() bool {
		select {
		case <-exited:
			return true
		default:
		}
		return accepts(site.https) && accepts(site.http)
	}, "nginx listening on %s and %s", site.https, site.http)
	select {
	case <-exited:
		log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
		t.Fatalf("nginx exited: %s\n%s", out, log)
	default:
	}
	if err != nil {
		t.Fatal(err)
	}
	return site
}

// accepts says whether a TCP connection to addr is accepted.
func accepts(addr string) bool {
	c, err := net.Dial("tcp", addr)
	if err == nil {
		c.Close()
	}
	return err == nil
}

// testCertificate makes a self-signed certificate for 127.0.0.1 and
// localhost, writes it and its key as PEM files into dir, and returns
// their paths and a pool that trusts the certificate.
func testCertificate(t *testing.T, dir string) (certFile, keyFile string, roots *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "localhost"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "fullchain.pem"), filepath.Join(dir, "privkey.pem")
	for file, block := range map[string]*pem.Block{
		certFile: {Type: "CERTIFICATE", Bytes: der},
		keyFile:  {Type: "PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(file, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	roots = x509.NewCertPool()
	roots.AddCert(cert)
	return certFile, keyFile, roots
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// transportFrom connects from the loopback address from (one other than
// 127.0.0.1 stands for another machine) and trusts the certificates of
// roots only.
func transportFrom(from string, roots *x509.CertPool) *http.Transport {
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	return &http.Transport{
		DialContext:       dialer.DialContext,
		TLSClientConfig:   &tls.Config{RootCAs: roots},
		ForceAttemptHTTP2: true, // as a browser does; a WebSocket still asks for HTTP/1.1
	}
}

// dialFrom opens /asy at base (ws:// or wss:// and host:port) from the
// local address from, trusting roots, with extra headers.
func dialFrom(t *testing.T, base, from string, roots *x509.CertPool, header http.Header) *client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	hc := &http.Client{Transport: transportFrom(from, roots)}
	ws, resp, err := websocket.Dial(ctx, base+"/asy", &websocket.DialOptions{HTTPClient: hc, HTTPHeader: header})
	if err != nil {
		status := ""
		if resp != nil {
			status = resp.Status
		}
		t.Fatalf("dial %s from %s: %v %s", base, from, err, status)
	}
	ws.SetReadLimit(64 << 20)
	t.Cleanup(func() { ws.CloseNow() })
	return &client{t: t, ctx: ctx, conn: wire.NewConn(ws, 1<<20, "queue", "missing", "result", "output", "complete", "denied")}
}

// admitted submits a quick task (the n-th, so none is cached) on c and says whether it was queued (a
// `queue` message) rather than denied `queue full`.
func admitted(t *testing.T, c *client, n int) bool {
	t.Helper()
	c.compile(fmt.Sprintf("%s// task %d\n", quickFigure, n), map[string]any{"timeout": 3000}) // not in the result cache
	m, ok := c.next()
	switch {
	case ok && m.verb == "queue" && m.body["passed"] != true:
		return true
	case ok && m.verb == "denied" && m.body["error"] == asyqueue.ErrQueueFull.Error():
		return false
	}
	t.Fatalf("first message %s %v (connection open: %v); want a queue position or denied queue full", m.verb, m.body, ok)
	return false
}

// Behind nginx with the documented configuration: the WebSocket upgrade
// works over TLS; clients on different addresses (127.0.0.2, 127.0.0.3) get their
// own per-client queue caps, also when one forges X-Forwarded-For through
// the proxy; a client that reaches usher directly and forges
// X-Forwarded-For stays one client with one cap.
func TestBehindNginxEachClientHasItsOwnCap(t *testing.T) {
	const perClient = 2
	ts := startService(t, 1, func(c *Config) {
		c.Caps = asyqueue.Caps{MaxQueuedPerClient: perClient}
		p, err := access.NewProxies([]string{"127.0.0.1"}, access.XForwardedFor)
		if err != nil {
			t.Fatal(err)
		}
		c.Access.Proxies = p
	})
	direct := strings.TrimPrefix(ts.srv.URL, "http://")
	site := startNginx(t, direct)
	proxy := "wss://" + site.https

	compileOK(t, dialFrom(t, proxy, "127.0.0.2", site.roots, nil)) // the upgrade passes nginx

	spinner := dialFrom(t, proxy, "127.0.0.9", site.roots, nil)
	spinner.compile(spinForever, map[string]any{"timeout": 30000})
	if _, q := spinner.until("queue"); q.body["passed"] != true {
		t.Fatalf("spinner: %v", q.body)
	}
	// From here on every task waits behind the spinner.
	n := 0
	for _, c := range []struct {
		name, from, via string
		forge           func(i int) string
	}{
		{"127.0.0.2 through nginx", "127.0.0.2", proxy, nil},
		{"127.0.0.3 through nginx, forging X-Forwarded-For", "127.0.0.3", proxy, func(i int) string { return "192.0.2." + strconv.Itoa(i+1) }},
		{"127.0.0.5 directly, forging X-Forwarded-For", "127.0.0.5", "ws://" + direct, func(i int) string { return "192.0.2." + strconv.Itoa(i+10) }},
	} {
		for i := range perClient + 1 {
			var h http.Header
			if c.forge != nil {
				h = http.Header{"X-Forwarded-For": {c.forge(i)}}
			}
			n++
			if got, want := admitted(t, dialFrom(t, c.via, c.from, site.roots, h), n), i < perClient; got != want {
				t.Fatalf("%s: task %d admitted %v; want %v (cap %d per client)", c.name, i+1, got, want, perClient)
			}
		}
	}
	spinner.close()
}

// httpFrom is an HTTP client whose connections come from the loopback
// address from and that trusts roots only. It does not follow redirects.
func httpFrom(from string, roots *x509.CertPool) *http.Client {
	return &http.Client{
		Transport:     transportFrom(from, roots),
		Timeout:       time.Minute,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// The render API works through nginx's TLS server: a figure is rendered, its permanent
// URL is served with its ETag and revalidated with 304, and the render
// rate counts each client behind the proxy on its own.
func TestBehindNginxTheRenderAPIWorks(t *testing.T) {
	ts := startService(t, 1, func(c *Config) {
		p, err := access.NewProxies([]string{"127.0.0.1"}, access.XForwardedFor)
		if err != nil {
			t.Fatal(err)
		}
		c.Access.Proxies = p
		c.Access.RenderRate = access.Rate{N: 1, Per: time.Hour}
	})
	site := startNginx(t, strings.TrimPrefix(ts.srv.URL, "http://"))
	proxy := "https://" + site.https
	post := func(from string) *http.Response {
		t.Helper()
		resp, err := httpFrom(from, site.roots).Post(proxy+"/api/render?format=svg", "text/plain", strings.NewReader(quickFigure))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	first := post("127.0.0.2")
	loc := first.Header.Get("Content-Location")
	if first.StatusCode != http.StatusOK || first.Header.Get("Content-Type") != "image/svg+xml" || loc == "" {
		t.Fatalf("POST through nginx: %d %q, Content-Location %q", first.StatusCode, first.Header.Get("Content-Type"), loc)
	}
	if again := post("127.0.0.2"); again.StatusCode != http.StatusTooManyRequests || again.Header.Get("Retry-After") == "" {
		t.Fatalf("a second render from 127.0.0.2 within the rate: %d", again.StatusCode)
	}
	if other := post("127.0.0.3"); other.StatusCode != http.StatusOK {
		t.Fatalf("a render from 127.0.0.3, another client behind the proxy: %d", other.StatusCode)
	}
	byID, err := httpFrom("127.0.0.2", site.roots).Get(proxy + loc)
	if err != nil {
		t.Fatal(err)
	}
	byID.Body.Close()
	etag := byID.Header.Get("ETag")
	if byID.StatusCode != http.StatusOK || etag == "" || byID.Header.Get("Content-Security-Policy") == "" {
		t.Fatalf("GET %s through nginx: %d, ETag %q, CSP %q", loc, byID.StatusCode, etag, byID.Header.Get("Content-Security-Policy"))
	}
	req, _ := http.NewRequest(http.MethodGet, proxy+loc, nil)
	req.Header.Set("If-None-Match", etag)
	cond, err := httpFrom("127.0.0.2", site.roots).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	cond.Body.Close()
	if cond.StatusCode != http.StatusNotModified {
		t.Fatalf("revalidating %s through nginx: %d; want 304", loc, cond.StatusCode)
	}
}

// The plain-HTTP server sends every request to the same host, path and
// query on https with a permanent redirect, and none reaches usher over
// plain HTTP, WebSocket upgrades included; only ACME challenge files, which
// Let's Encrypt fetches over plain HTTP to renew the certificate, are
// served there.
func TestBehindNginxPlainHTTPRedirectsToHTTPS(t *testing.T) {
	ts := startService(t, 0, nil)
	site := startNginx(t, strings.TrimPrefix(ts.srv.URL, "http://"))
	const token = "Xq3-challenge_token"
	challenge := filepath.Join(site.webroot, ".well-known", "acme-challenge")
	if err := os.MkdirAll(challenge, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(challenge, token), []byte(token+".thumbprint"), 0o600); err != nil {
		t.Fatal(err)
	}
	wsUpgrade := http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"},
		"Sec-Websocket-Version": {"13"}, "Sec-Websocket-Key": {"dGhlIHNhbXBsZSBub25jZQ=="}}
	for _, c := range []struct {
		name, method, path string
		header             http.Header
		status             int
		location, body     string // the Location of a redirect, the body of a 200
	}{
		{"the editor", "GET", "/", nil, http.StatusMovedPermanently, "https://usher.example.org/", ""},
		{"a share link with a query", "GET", "/s/abc123?x=1&y=%2F", nil, http.StatusMovedPermanently, "https://usher.example.org/s/abc123?x=1&y=%2F", ""},
		{"a render request", "POST", "/api/render?format=svg", nil, http.StatusMovedPermanently, "https://usher.example.org/api/render?format=svg", ""},
		{"a WebSocket upgrade", "GET", "/asy", wsUpgrade, http.StatusMovedPermanently, "https://usher.example.org/asy", ""},
		{"a challenge file", "GET", "/.well-known/acme-challenge/" + token, nil, http.StatusOK, "", token + ".thumbprint"},
		{"a challenge file that is not there", "GET", "/.well-known/acme-challenge/gone", nil, http.StatusNotFound, "", ""},
	} {
		req, err := http.NewRequest(c.method, "http://"+site.http+c.path, strings.NewReader(quickFigure))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = "usher.example.org"
		maps.Copy(req.Header, c.header)
		resp, err := httpFrom("127.0.0.2", site.roots).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || resp.Header.Get("Location") != c.location || (c.body != "" && string(body) != c.body) {
			t.Errorf("%s: %s http://usher.example.org%s answered %s, Location %q, body %.80q; want %d, Location %q",
				c.name, c.method, c.path, resp.Status, resp.Header.Get("Location"), body, c.status, c.location)
		}
	}
}

// Every answer over TLS, errors included, tells the browser to come back
// only over https (HSTS), whether the browser speaks TLS 1.2 or 1.3; the
// browser gets HTTP/2.
func TestBehindNginxTLSAnswersCarryHSTS(t *testing.T) {
	ts := startService(t, 0, nil)
	site := startNginx(t, strings.TrimPrefix(ts.srv.URL, "http://"))
	for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		for _, c := range []struct {
			path   string
			status int
		}{
			{"/livez", http.StatusOK},
			{"/api/dashboard", http.StatusUnauthorized}, // an operator view, without a token
		} {
			tr := transportFrom("127.0.0.2", site.roots)
			tr.TLSClientConfig.MinVersion, tr.TLSClientConfig.MaxVersion = version, version
			resp, err := (&http.Client{Transport: tr, Timeout: time.Minute}).Get("https://" + site.https + c.path)
			if err != nil {
				t.Fatalf("%s over %s: %v", c.path, tls.VersionName(version), err)
			}
			resp.Body.Close()
			tr.CloseIdleConnections()
			if resp.StatusCode != c.status || resp.TLS.Version != version || resp.ProtoMajor != 2 {
				t.Errorf("GET %s over %s: %s over %s, %s; want %d over HTTP/2", c.path, tls.VersionName(version),
					resp.Status, tls.VersionName(resp.TLS.Version), resp.Proto, c.status)
			}
			if got := resp.Header.Get("Strict-Transport-Security"); got != "max-age=63072000" {
				t.Errorf("GET %s over %s (%d): Strict-Transport-Security %q; want max-age=63072000",
					c.path, tls.VersionName(version), resp.StatusCode, got)
			}
		}
	}
}

// Logging in through nginx's TLS server sets a Secure login cookie: nginx
// tells usher the client's scheme (X-Forwarded-Proto), so the browser
// never sends the token over plain HTTP. The login page's origin check
// sees the Host the browser sent over HTTP/2.
func TestBehindNginxTheLoginCookieIsSecure(t *testing.T) {
	ts := startService(t, 0, func(c *Config) {
		p, err := access.NewProxies([]string{"127.0.0.1"}, access.XForwardedFor)
		if err != nil {
			t.Fatal(err)
		}
		c.Access.Proxies = p
	})
	site := startNginx(t, strings.TrimPrefix(ts.srv.URL, "http://"))
	form := url.Values{"token": {ts.admin}, "next": {"/dashboard"}}
	req, err := http.NewRequest(http.MethodPost, "https://"+site.https+"/login", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://"+site.https)
	resp, err := httpFrom("127.0.0.2", site.roots).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/dashboard" || resp.ProtoMajor != 2 {
		t.Fatalf("login through nginx: %s over %s, Location %q; want 303 to /dashboard over HTTP/2", resp.Status, resp.Proto, resp.Header.Get("Location"))
	}
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == access.CookieName {
			cookie = c
		}
	}
	if cookie == nil || !cookie.Secure || !cookie.HttpOnly || cookie.Value != ts.admin {
		if cookie == nil {
			t.Fatalf("login through nginx's TLS: no %s cookie", access.CookieName)
		}
		t.Fatalf("login through nginx's TLS: %s Secure %v, HttpOnly %v, holds the token %v; want all three",
			access.CookieName, cookie.Secure, cookie.HttpOnly, cookie.Value == ts.admin)
	}
}
