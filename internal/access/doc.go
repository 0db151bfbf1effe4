// Package access is who may use a public usher server, and who a request
// comes from (docs/operations.md, "Hosting for the public"):
//
//   - the client's address behind trusted reverse proxies (clientaddr.go),
//     the one name of a client for per-client caps, rate limits and logs;
//   - the origins that may use the server from other sites: WebSocket
//     origin checks, CORS and embedding checks (origins.go);
//   - the optional login with the token store's tokens, and the admin
//     token that guards the operator views (auth.go, login.go);
//   - rate limits per client on requests, and on connections at once
//     (limits.go).
//
// Policy holds them all; the service wraps its routes with its methods.
package access
