package asyclient_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/asyclient"
	"github.com/usherhq/usher/internal/sandbox"
	"github.com/usherhq/usher/internal/sandbox/sandboxtest"
	"github.com/usherhq/usher/internal/service"
)

// server runs the real service with one sandboxed backend.
func server(t *testing.T) string {
	t.Helper()
	svc, err := service.New(service.Config{
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		DataPath: filepath.Join(t.TempDir(), "usher.db"), LocalBackends: 1,
		Sandbox: sandbox.Config{WorkRoot: sandboxtest.WorkRoot(t)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(svc.Handler())
	t.Cleanup(srv.Close)
	return "ws" + strings.TrimPrefix(srv.URL, "http") + "/asy"
}

func TestCompile(t *testing.T) {
	url := server(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	files := []asyclient.File{
		{Name: "main.asy", Data: []byte("import lib; draw((0,0)--(x,1));\n"), Main: true},
		{Name: "lib.asy", Data: []byte("real x = 2;\n")},
	}
	tests := []struct {
		name    string
		opts    asyclient.Options
		verb    string
		success bool
		error   string
		format  string
	}{
		{name: "default svg", verb: "complete", success: true, format: "svg"},
		{name: "png in the fast tier", opts: asyclient.Options{Timeout: 3 * time.Second, Format: "png"}, verb: "complete", success: true, format: "png"},
		{name: "a timeout that is no tier", opts: asyclient.Options{Timeout: 5 * time.Second}, verb: "denied", error: `"timeout" must be one of 3000, 10000 or 30000`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			msgs, err := asyclient.Compile(ctx, url, files, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			last := msgs[len(msgs)-1]
			if last.Verb != tc.verb || last.Success != tc.success || !strings.Contains(last.Error, tc.error) {
				t.Fatalf("ended with %s success=%v %q; want %s success=%v containing %q", last.Verb, last.Success, last.Error, tc.verb, tc.success, tc.error)
			}
			if tc.format == "" {
				return
			}
			var got []string
			for _, m := range msgs {
				if m.Verb == "result" {
					got = append(got, m.Format)
					if len(m.Payload) == 0 {
						t.Fatal("empty result")
					}
				}
			}
			if len(got) != 1 || got[0] != tc.format {
				t.Fatalf("results %v, want one %s", got, tc.format)
			}
		})
	}
}

func TestDialFailsClearly(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := asyclient.Dial(ctx, "ws://127.0.0.1:1/asy")
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("Dial to a closed port: %v, want an error naming the address", err)
	}
}
