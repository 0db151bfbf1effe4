// Package e2etest runs multi-node mode as a user deploys it: a real
// redis-server (or a Redis Cluster), and the usher binary as separate
// processes — queue servers (`usher serve --redis`), schedulers (`usher
// scheduler --redis`, one leading) and backends (`usher backend --redis`,
// real asy in the real sandbox) — with clients of /asy and /v1 on top,
// killing processes with SIGKILL mid-run. It has tests only.
//
// The tests whose workloads keep every backend busy run one at a time, so
// that their 3 s tasks keep their time; the others, which mostly wait (for
// a failover, a restart, a lapse), call t.Parallel and run two at a time
// after them.
package e2etest
