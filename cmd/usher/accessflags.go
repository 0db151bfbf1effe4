package main

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/usherhq/usher/internal/access"
)

// accessFlags are `usher serve`'s flags of who may use what
// (docs/operations.md, "Hosting for the public").
type accessFlags struct {
	trustedProxies, allowedOrigins []string
	proxyHeader                    string
	login                          bool
	shareRate, renderRate          access.Rate
	connections                    int
}

// Defaults of the rate limits: a person sharing by hand stays far below
// 10 shares a minute; 120 renders a minute serves a forum page with many
// figures; 32 connections at once leave room above the 20 tasks one
// client may have waiting (--max-queued-per-client).
var (
	defaultShareRate  = access.Rate{N: 10, Per: time.Minute}
	defaultRenderRate = access.Rate{N: 120, Per: time.Minute}
)

const defaultConnectionsPerClient = 32

func (a *accessFlags) register(f *pflag.FlagSet) {
	a.shareRate, a.renderRate = defaultShareRate, defaultRenderRate
	f.StringSliceVar(&a.trustedProxies, "trusted-proxies", nil, "reverse proxies (CIDR or address, comma-separated) whose forwarding header names the client")
	f.StringVar(&a.proxyHeader, "proxy-header", string(access.XForwardedFor), "the header trusted proxies name the client in: X-Forwarded-For or Forwarded")
	f.StringSliceVar(&a.allowedOrigins, "allowed-origins", nil, "origins whose pages may use /asy, the share and render APIs (scheme://host[:port], comma-separated; * for any); the server's own origin always may")
	f.BoolVar(&a.login, "auth", false, "require an admin or client token (login page or Authorization: Bearer) for the web app, /asy, shares and renders")
	f.Var(&a.shareRate, "share-rate", "shares one client may create, N/s, N/m or N/h (0: no limit)")
	f.Var(&a.renderRate, "render-rate", "render API requests of one client, N/s, N/m or N/h (0: no limit)")
	f.IntVar(&a.connections, "connections-per-client", defaultConnectionsPerClient, "most /asy connections one client holds at once (0: no limit)")
}

// config builds the access policy's configuration from the flags.
func (a *accessFlags) config() (access.Config, error) {
	header, err := access.ParseProxyHeader(a.proxyHeader)
	if err != nil {
		return access.Config{}, err
	}
	proxies, err := access.NewProxies(a.trustedProxies, header)
	if err != nil {
		return access.Config{}, err
	}
	origins, err := access.NewOrigins(a.allowedOrigins)
	if err != nil {
		return access.Config{}, err
	}
	return access.Config{Proxies: proxies, Origins: origins, Login: a.login, ShareRate: a.shareRate,
		RenderRate: a.renderRate, ConnectionsPerClient: a.connections}, nil
}
