// Package crashtest holds the crash test of usher's generic jobs; it has
// no code of its own.
//
// The test builds the real binary, runs `usher serve` on a SQLite file,
// submits queues, key limits, workflows and plain jobs over /v1, works
// them off with agents that speak raw HTTP, and kills the server with
// SIGKILL at random moments, restarting it on the same file each time.
// At the end every job must have succeeded exactly once as far as the
// server is concerned, and the executions the server accepted must have
// kept the dependency order, the key limits, the groups and the
// read/write rule (docs/design.md, "Workflows",
// "Exclusive read/write groups and strict order" and "Leases and retries").
//
// TestCrashRecoveryMultiNode runs the same workload on multi-node mode:
// a real redis-server, two `usher scheduler` processes (the leader serves
// /v1 from the Redis store) and two `usher serve --redis` queue servers
// that pass /v1 to the leader, with clients and agents spreading their
// requests over both; the kills alternate between the leading scheduler
// (a new standby is started) and a queue server (started again).
//
// Agents also freeze for longer than their lease now and then, so that
// leases lapse and late reports are ignored.
//
// Flags (go test ./internal/jobs/crashtest -args -crash.jobs=2000 ...):
// -crash.jobs (default 10000), -crash.kills (5), -crash.stalls (2),
// -crash.agents (6), -crash.slots (4), -crash.seed (a failing run logs
// its seed), -crash.serverrace (build the server with -race).
package crashtest
