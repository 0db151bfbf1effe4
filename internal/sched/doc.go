// Package sched is usher's scheduling core: every rule of the design seeds,
// as a pure, deterministic state machine.
//
// The core does no I/O, starts no goroutines and reads no clock: time comes
// from [Config.Now] and randomness from [Config.Rand]. A driver (a server or
// a store) feeds it events and carries out what it decides:
//
//   - [Scheduler.DefineQueue], [Scheduler.SetKeyLimit] and [Scheduler.SetTierLimits]
//     configure queues and limits;
//   - [Scheduler.Submit] and [Scheduler.SubmitWorkflow] add jobs;
//   - [Scheduler.AddWorker] reports a worker's slots and capabilities;
//   - [Scheduler.Dispatch] runs the queue cycle and pushes jobs to free push
//     workers (Asymptote backends); [Scheduler.Pull] (or
//     [Scheduler.PullAppend]) hands up to N jobs to an agent that asks;
//   - [Scheduler.StartInteractive] starts an interactive task or denies it;
//   - [Scheduler.Complete] reports a finished attempt, [Scheduler.Cancel]
//     withdraws a job, [Scheduler.Renew] keeps a worker's lease alive and
//     [Scheduler.Tick] expires leases and wakes delayed retries;
//   - [Scheduler.Events] drains what the driver must act on: downgrades,
//     halts, stops, retries and cancellations it did not cause directly;
//   - [Scheduler.Estimates] and [Scheduler.Snapshot] feed clients and
//     dashboards.
//
// # The rules and where they live
//
//   - tiers.go: seed 000's duration tiers, the queue cycle, downgrades,
//     halts and the interactive admission rule, generalized to any number of
//     tiers.
//   - gates.go: per-key concurrency limits (seed 004), exclusive groups and
//     the read/write rule (seed 002), all as gates that open and close
//     buckets of queued jobs.
//   - queue.go: queue orders fifo, strict (seed 002) and random (seed 004),
//     priorities and capabilities.
//   - workflow.go: dependencies and failure propagation (seed 003).
//   - worker.go: workers, slots and leases.
//   - estimate.go, forecast.go: queue-wait estimates (seed 000), and the
//     event sweep that runs the rules forward to make them.
//   - invariants.go: the invariants of the design, checked by tests.
//   - targetkey.go: the key of a scan target (seed 004).
//   - heap.go, index.go: the ordered sets and the id index the rules use.
//   - chunk.go, bucket.go: the dense tables of job records, buckets and
//     gate counters, named by 32-bit numbers.
//
// A Scheduler is not safe for concurrent use; the driver serializes calls.
package sched
