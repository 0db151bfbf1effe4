// Package sched is usher's scheduling core: every scheduling rule of the
// design (docs/design.md), as a pure, deterministic state machine.
//
// The core does no I/O, starts no goroutines and reads no clock: time comes
// from [Config.Now] and randomness from [Config.Rand]. A driver (a server or
// a store) feeds it events and carries out what it decides:
//
//   - [Scheduler.DefineQueue], [Scheduler.SetKeyLimit], [Scheduler.SetKeyRate]
//     and [Scheduler.SetTierLimits] configure queues and limits;
//   - [Scheduler.Submit] and [Scheduler.SubmitWorkflow] add jobs;
//   - [Scheduler.AddWorker] reports a worker's slots and capabilities;
//   - [Scheduler.Dispatch] runs the queue cycle and pushes jobs to free push
//     workers (Asymptote backends); [Scheduler.Pull] (or
//     [Scheduler.PullAppend]) hands up to N jobs to an agent that asks;
//   - [Scheduler.StartInteractive] starts an interactive task or denies it;
//   - [Scheduler.Complete] reports a finished attempt, [Scheduler.Cancel]
//     withdraws a job, [Scheduler.RunNow] readies a job waiting for its
//     time, [Scheduler.Renew] keeps a worker's lease alive and
//     [Scheduler.Tick] expires leases and deadlines, wakes delayed
//     retries and scheduled jobs (deadline.go) and opens keys whose next
//     token is due (rate.go);
//   - [Scheduler.Events] drains what the driver must act on: downgrades,
//     halts, stops, retries and cancellations it did not cause directly;
//   - [Scheduler.Estimates] and [Scheduler.Snapshot] feed clients and
//     dashboards.
//
// # The rules and where they live
//
// The files of this package are the rules:
//
//   - tiers.go: duration tiers, the queue cycle, downgrades, halts and the
//     interactive admission rule, generalized to any number of tiers
//     (docs/design.md, "Duration tiers and preemption"); dispatch.go runs
//     the cycle for push workers and pulling agents.
//   - gates.go: per-key concurrency limits, exclusive groups and the
//     read/write rule, all as gates that open and close buckets of queued
//     jobs (docs/design.md, "Per-key limits, priorities and random picks";
//     docs/design.md, "Exclusive read/write groups and strict order").
//   - rate.go: per-key rate limits, a token bucket per key that closes
//     its gate while empty (docs/design.md, "Per-key rate limits").
//   - queue.go: queue orders fifo, strict and random, priorities and
//     capabilities; bucket.go: the buckets that group queued jobs by their
//     gates.
//   - workflow.go: dependencies and failure propagation
//     (docs/design.md, "Workflows").
//   - worker.go, adopt.go: workers, slots and leases, and jobs a driver
//     hands back after a restart (docs/design.md, "Leases and retries").
//   - estimate.go, forecast.go: queue-wait estimates, and the event sweep
//     that runs the rules forward to make them
//     (docs/design.md, "Queue-wait estimates").
//   - invariants.go: the invariants of the rules, checked by tests.
//   - targetkey.go: the limit key of a scan target.
//
// A few files glue the rules to the data structures below them: job.go and
// jobtable.go (job records and their table, found by slot and by id),
// gatetable.go (gate counters), sets.go (the job heap and the slot and
// bucket sets, which write positions into job and bucket records and so
// stay here) and prefetch.go (which records the next pick will read).
//
// # The machinery below the rules
//
// The data structures, which know nothing of the rules, are packages of
// their own under internal/:
//
//   - internal/table: Chunks, the chunked record tables that name records
//     by 32-bit numbers; IDIndex and IDHash, the job id index; SlotMap,
//     the bucket index; AddrHints, running jobs by the address of their
//     id; NameCache, in front of the queue and worker maps; the seeded
//     string hash.
//   - internal/wintree: the 4-ary tournament tree that is a FIFO queue's
//     ready index.
//   - internal/prefetch: the cache prefetch hint, in assembly on amd64
//     and arm64.
//
// A Scheduler is not safe for concurrent use; the driver serializes calls.
package sched
