package service

import (
	"context"
	"fmt"
	"net"
	"net/http"
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

// startNginx runs Debian's nginx with the documented configuration, its
// ports replaced: it listens on a free port and proxies to upstream
// (host:port). It returns nginx's address.
func startNginx(t *testing.T, upstream string) string {
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
	port := freePort(t)
	_, upPort, _ := net.SplitHostPort(upstream)
	text := strings.Replace(string(conf), "listen 80;", "listen "+port+";", 1)
	text = strings.Replace(text, "proxy_pass http://127.0.0.1:8080;", "proxy_pass http://127.0.0.1:"+upPort+";", 1)
	if text == string(conf) || strings.Count(text, port) != 1 {
		t.Fatalf("%s no longer has the listen and proxy_pass lines the test templates", nginxConf)
	}
	dir := t.TempDir()
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
	addr := "127.0.0.1:" + port
	err = testwait.Until(10*time.Second, func() bool {
		select {
		case <-exited:
			return true
		default:
		}
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	}, "nginx listening on %s", addr)
	select {
	case <-exited:
		log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
		t.Fatalf("nginx exited: %s\n%s", out, log)
	default:
	}
	if err != nil {
		t.Fatal(err)
	}
	return addr
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

// dialFrom opens /asy at addr from the local address from (a loopback
// address other than 127.0.0.1 stands for another machine), with extra
// headers.
func dialFrom(t *testing.T, addr, from string, header http.Header) *client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	hc := &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext}}
	ws, resp, err := websocket.Dial(ctx, "ws://"+addr+"/asy", &websocket.DialOptions{HTTPClient: hc, HTTPHeader: header})
	if err != nil {
		status := ""
		if resp != nil {
			status = resp.Status
		}
		t.Fatalf("dial %s from %s: %v %s", addr, from, err, status)
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
// works; clients on different addresses (127.0.0.2, 127.0.0.3) get their
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
	proxy := startNginx(t, direct)

	compileOK(t, dialFrom(t, proxy, "127.0.0.2", nil)) // the upgrade passes nginx

	spinner := dialFrom(t, proxy, "127.0.0.9", nil)
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
		{"127.0.0.5 directly, forging X-Forwarded-For", "127.0.0.5", direct, func(i int) string { return "192.0.2." + strconv.Itoa(i+10) }},
	} {
		for i := range perClient + 1 {
			var h http.Header
			if c.forge != nil {
				h = http.Header{"X-Forwarded-For": {c.forge(i)}}
			}
			n++
			if got, want := admitted(t, dialFrom(t, c.via, c.from, h), n), i < perClient; got != want {
				t.Fatalf("%s: task %d admitted %v; want %v (cap %d per client)", c.name, i+1, got, want, perClient)
			}
		}
	}
	spinner.close()
}

// httpFrom is an HTTP client whose connections come from the loopback
// address from.
func httpFrom(from string) *http.Client {
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	return &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext}, Timeout: time.Minute}
}

// The render API works through nginx: a figure is rendered, its permanent
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
	proxy := "http://" + startNginx(t, strings.TrimPrefix(ts.srv.URL, "http://"))
	post := func(from string) *http.Response {
		t.Helper()
		resp, err := httpFrom(from).Post(proxy+"/api/render?format=svg", "text/plain", strings.NewReader(quickFigure))
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
	byID, err := httpFrom("127.0.0.2").Get(proxy + loc)
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
	cond, err := httpFrom("127.0.0.2").Do(req)
	if err != nil {
		t.Fatal(err)
	}
	cond.Body.Close()
	if cond.StatusCode != http.StatusNotModified {
		t.Fatalf("revalidating %s through nginx: %d; want 304", loc, cond.StatusCode)
	}
}
