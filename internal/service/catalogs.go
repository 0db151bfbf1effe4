package service

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/usherhq/usher/internal/asysyms"
	"github.com/usherhq/usher/internal/examples"
	"github.com/usherhq/usher/internal/texinfo"
)

// The editor's catalogs (docs/api.md): asy's symbols, the TeX packages
// and fonts, the examples. Each is made once at start-up and served as
// fixed bytes with an ETag, gzip-compressed for clients that take it.

// catalogs are the three documents, or for each the reason it is missing.
type catalogs struct {
	symbols, tex, examples *staticJSON
}

// pendingCatalogs are the catalogs while they are made: asking asy and
// the TeX tree takes seconds, once, and holds up neither the server's
// start nor its readiness; a request for a catalog waits for them.
type pendingCatalogs struct {
	ready chan struct{}
	c     catalogs
}

// startCatalogs makes the catalogs in the background. They outlive ctx's
// cancellation (asy's listing has its own time limit).
func startCatalogs(ctx context.Context, asy, version string, log interface{ Info(string, ...any) }) *pendingCatalogs {
	p := &pendingCatalogs{ready: make(chan struct{})}
	ctx = context.WithoutCancel(ctx)
	go func() {
		p.c = loadCatalogs(ctx, asy, version, log)
		close(p.ready)
	}()
	return p
}

// handler serves the catalog pick chooses, once they are made.
func (p *pendingCatalogs) handler(pick func(catalogs) *staticJSON) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-p.ready:
			pick(p.c).ServeHTTP(w, r)
		case <-r.Context().Done():
		}
	})
}

// loadCatalogs asks asy and the TeX installation, at the same time, and
// reads the examples; what cannot be had is served as a 503 saying why.
func loadCatalogs(ctx context.Context, asy, version string, log interface{ Info(string, ...any) }) catalogs {
	start := time.Now()
	var c catalogs
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		cat, err := asysyms.Load(ctx, asy, version)
		c.symbols = newStaticJSON(cat, err)
	}()
	go func() {
		defer wg.Done()
		cat, err := texinfo.Load(ctx)
		c.tex = newStaticJSON(cat, err)
	}()
	all, err := examples.All()
	c.examples = newStaticJSON(all, err)
	wg.Wait()
	log.Info("editor catalogs ready", "took", time.Since(start).Round(time.Millisecond),
		"symbols", c.symbols.status(), "tex", c.tex.status(), "examples", c.examples.status())
	return c
}

// staticJSON is one JSON document made at start-up: its bytes, their
// gzip, its ETag; or the error that kept it from being made.
type staticJSON struct {
	body, gz []byte
	etag     string
	err      error
}

// staticCacheControl lets browsers and proxies keep a catalog for an hour
// and then ask again with its ETag; it changes only when the server
// restarts with another asy or TeX.
const staticCacheControl = "public, max-age=3600"

func newStaticJSON(v any, err error) *staticJSON {
	if err != nil {
		return &staticJSON{err: err}
	}
	body, err := json.Marshal(v)
	if err != nil {
		return &staticJSON{err: fmt.Errorf("encode: %w", err)}
	}
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	_, _ = zw.Write(body)
	_ = zw.Close()
	sum := sha256.Sum256(body)
	return &staticJSON{body: body, gz: gz.Bytes(), etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
}

func (s *staticJSON) status() string {
	if s.err != nil {
		return s.err.Error()
	}
	return fmt.Sprintf("%d bytes", len(s.body))
}

// ServeHTTP answers 503 with the reason when the document is missing;
// 304 to a matching If-None-Match; the gzip bytes to a client that
// accepts gzip.
func (s *staticJSON) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.err != nil {
		writeError(w, http.StatusServiceUnavailable, s.err.Error())
		return
	}
	h := w.Header()
	h.Set("ETag", s.etag)
	h.Set("Cache-Control", staticCacheControl)
	h.Set("Vary", "Accept-Encoding")
	if etagMatches(r.Header.Get("If-None-Match"), s.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Type", "application/json")
	body := s.body
	if acceptsGzip(r.Header.Get("Accept-Encoding")) {
		h.Set("Content-Encoding", "gzip")
		body = s.gz
	}
	h.Set("Content-Length", fmt.Sprint(len(body)))
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

func etagMatches(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == etag || t == "*" {
			return true
		}
	}
	return false
}

func acceptsGzip(header string) bool {
	for _, part := range strings.Split(header, ",") {
		coding, params, _ := strings.Cut(part, ";")
		if strings.TrimSpace(coding) == "gzip" && strings.ReplaceAll(strings.TrimSpace(params), " ", "") != "q=0" {
			return true
		}
	}
	return false
}
