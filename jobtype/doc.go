// Package jobtype holds the wire types of usher's generic-jobs API (/v1,
// docs/api.md): the JSON bodies that the server (internal/jobsapi, over
// the engine of internal/jobs) sends and receives and that the Go client
// (package client) decodes and encodes. There is one definition of each,
// so that the two sides cannot drift apart.
//
// The package holds value types only and imports nothing but the standard
// library, so that any package may import it; it sits at the bottom of the
// import graph.
//
// Where a field's JSON name or omitempty is given, it is the server's
// answer as sent today; a body that only the client sends (a spec, an
// update, a lease request, a result) leaves out its zero fields, which the
// server reads as their defaults.
package jobtype
