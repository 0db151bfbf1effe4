package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// warmRender renders the figure the cached hits ask for and returns its
// permanent URL.
func warmRender(ctx context.Context, base string) (string, error) {
	status, loc, err := postRender(ctx, base, figure(-1))
	if err != nil {
		return "", err
	}
	if status != http.StatusOK || loc == "" {
		return "", fmt.Errorf("POST /api/render answered %d with Content-Location %q", status, loc)
	}
	return base + loc, nil
}

// postRender renders src as svg; it returns the status and the result's
// permanent URL path.
func postRender(ctx context.Context, base, src string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/render?format=svg", strings.NewReader(src))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "text/plain")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Location"), err
}

// renderClient alternates cached hits (nine in ten) with misses until ctx
// ends.
func renderClient(ctx context.Context, base, cached string, id int, st *stats) {
	for n := 0; ctx.Err() == nil; n++ {
		if n%10 == 9 {
			status, _, err := postRender(context.WithoutCancel(ctx), base, figure(-2-id*1_000_000-n))
			switch {
			case err != nil || status >= 500 && status != http.StatusServiceUnavailable:
				st.add(&st.renderFailed)
			case status == http.StatusOK:
				st.add(&st.renderMisses)
			default:
				st.add(&st.renderDenied)
			}
			continue
		}
		start := time.Now()
		resp, err := http.Get(cached)
		if err != nil {
			st.add(&st.renderFailed)
			continue
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			st.add(&st.renderFailed)
			continue
		}
		st.hit(time.Since(start))
	}
}
