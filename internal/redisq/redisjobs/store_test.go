package redisjobs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/usherhq/usher/internal/jobs"
	"github.com/usherhq/usher/internal/jobs/storetest"
	"github.com/usherhq/usher/internal/redisq"
	"github.com/usherhq/usher/internal/redisq/redistest"
	"github.com/usherhq/usher/jobtype"
)

// prefixes makes every test's data its own, on one server.
var prefixes atomic.Int64

func client(t testing.TB, url string) redis.UniversalClient {
	t.Helper()
	rdb, err := redisq.Open(context.Background(), url, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// opener opens stores on rdb, each test under a fresh prefix (a hash tag
// unless plain), with no fence.
func opener(rdb redis.UniversalClient, plain bool) storetest.Opener {
	return func(t *testing.T) func(t *testing.T) jobs.Store {
		n := prefixes.Add(1)
		prefix := fmt.Sprintf("{t%d}:", n)
		if plain {
			prefix = fmt.Sprintf("t%d:", n)
		}
		return func(t *testing.T) jobs.Store {
			s := New(rdb, prefix, Fence{}, nil)
			t.Cleanup(func() { s.Close() })
			return s
		}
	}
}

// The Redis store passes the store conformance suite on one server.
func TestConformance(t *testing.T) {
	srv := redistest.Start(t)
	storetest.Run(t, opener(client(t, srv.URL()), true))
}

// And on a 3-master Redis Cluster, every key under a hash-tag prefix.
func TestConformanceOnCluster(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	storetest.Run(t, opener(client(t, c.URL()), false))
}

// lead makes token the leader's, as the scheduler's election does.
func lead(t *testing.T, rdb redis.UniversalClient, keys redisq.Keys, token string) {
	t.Helper()
	if err := rdb.Set(context.Background(), keys.Leader(), token, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
}

// A store whose token lost the leader key writes nothing more: its batch
// fails with ErrFenced and changes nothing, and so does every later
// Append; the new leader's store writes on.
func TestFencing(t *testing.T) { onSingleAndCluster(t, testFencing) }

// onSingleAndCluster runs test against a single redis-server and against
// a 3-master Redis Cluster.
func onSingleAndCluster(t *testing.T, test func(t *testing.T, rdb redis.UniversalClient)) {
	for _, tc := range []struct {
		name string
		url  func(t *testing.T) string
	}{
		{"single", func(t *testing.T) string { return redistest.Start(t).URL() }},
		{"cluster", func(t *testing.T) string { return redistest.StartCluster(t, 3).URL() }},
	} {
		t.Run(tc.name, func(t *testing.T) { test(t, client(t, tc.url(t))) })
	}
}

func testFencing(t *testing.T, rdb redis.UniversalClient) {
	ctx := context.Background()
	keys := redisq.NewKeys(redisq.DefaultPrefix)
	lead(t, rdb, keys, "1:a")
	old := New(rdb, keys.Prefix(), Fence{Token: "1:a"}, nil)
	defer old.Close()
	storetest.Apply(t, old, storetest.Insert(1), storetest.Insert(2))
	before := dump(t, rdb, keys)

	lead(t, rdb, keys, "2:b")
	// A mixed batch: hashes, folded index changes, next ids.
	err := old.Append(jobs.Op{Kind: jobs.OpStart, ID: 1, Attempt: 1, Agent: "x", At: time.Now()}, storetest.Insert(3),
		jobs.Op{Kind: jobs.OpFinish, ID: 2, State: jobtype.StateSucceeded, At: time.Now(), Result: &jobtype.Result{}},
		jobs.Op{Kind: jobs.OpWorkflow, ID: 5, Name: "w", At: time.Now()}, storetest.InsertIn("q", 5, 4),
		jobs.Op{Kind: jobs.OpPutQueue, Queue: &jobtype.Queue{Name: "late"}}).Wait(ctx)
	if !errors.Is(err, ErrFenced) {
		t.Fatalf("a write after losing the lead = %v; want ErrFenced", err)
	}
	if err := old.Append(jobs.Op{Kind: jobs.OpPrune, At: time.Now()}).Wait(ctx); !errors.Is(err, ErrFenced) {
		t.Fatalf("a later write = %v; want ErrFenced at once", err)
	}
	if after := dump(t, rdb, keys); after != before {
		t.Fatalf("the fenced store changed Redis:\nbefore %s\nafter  %s", before, after)
	}

	next := New(rdb, keys.Prefix(), Fence{Token: "2:b"}, nil)
	defer next.Close()
	snap, err := next.Load(ctx)
	if err != nil || len(snap.Jobs) != 2 || snap.NextJob != 3 {
		t.Fatalf("the new leader loads %+v, %v; want jobs 1 and 2, next 3", snap, err)
	}
	storetest.Apply(t, next, jobs.Op{Kind: jobs.OpStart, ID: 1, Attempt: 1, Agent: "y", At: time.Now()})
	if j, err := next.Job(ctx, 1); err != nil || j.Agent != "y" {
		t.Fatalf("job 1 = %+v, %v; want started by y", j, err)
	}
	if err := rdb.Del(ctx, keys.Leader()).Err(); err != nil {
		t.Fatal(err)
	}
	if err := next.Append(storetest.Insert(9)).Wait(ctx); !errors.Is(err, ErrFenced) {
		t.Fatalf("a write after the lease lapsed = %v; want ErrFenced", err)
	}
}

// dump is every key under the prefix with its value, to compare.
func dump(t *testing.T, rdb redis.UniversalClient, keys redisq.Keys) string {
	t.Helper()
	ctx := context.Background()
	var names []string
	var mu sync.Mutex // ForEachMaster scans the masters at once
	scan := func(ctx context.Context, c *redis.Client) error {
		iter := c.Scan(ctx, 0, keys.Prefix()+"*", 1000).Iterator()
		for iter.Next(ctx) {
			mu.Lock()
			names = append(names, iter.Val())
			mu.Unlock()
		}
		return iter.Err()
	}
	var err error
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, scan)
	} else {
		err = scan(ctx, rdb.(*redis.Client))
	}
	if err != nil {
		t.Fatal(err)
	}
	out := ""
	slices.Sort(names)
	for _, n := range names {
		if n == keys.Leader() {
			continue
		}
		v, err := rdb.Dump(ctx, n).Result()
		if err != nil {
			t.Fatal(err)
		}
		out += n + "=" + strconv.Quote(v) + " "
	}
	return out
}

// The engine on a fenced store: once another scheduler holds the lead,
// the old leader's operations fail with ErrStore and leave nothing in
// Redis; the new leader's engine rebuilds what the old one committed and
// its ids continue.
func TestEngineHandover(t *testing.T) {
	ctx := context.Background()
	rdb := client(t, redistest.Start(t).URL())
	keys := redisq.NewKeys(redisq.DefaultPrefix)
	lead(t, rdb, keys, "1:a")
	oldStore := New(rdb, keys.Prefix(), Fence{Token: "1:a"}, nil)
	defer oldStore.Close()
	old, err := jobs.Open(ctx, jobs.Config{Store: oldStore})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.CreateQueue(ctx, jobtype.Queue{Name: "q", Active: true}); err != nil {
		t.Fatal(err)
	}
	ids, err := old.Enqueue(ctx, []jobtype.JobSpec{{Queue: "q"}, {Queue: "q"}})
	if err != nil {
		t.Fatal(err)
	}
	lead(t, rdb, keys, "2:b")
	if _, err := old.Enqueue(ctx, []jobtype.JobSpec{{Queue: "q"}}); !errors.Is(err, jobs.ErrStore) {
		t.Fatalf("the old leader's Enqueue = %v; want ErrStore", err)
	}
	if _, err := old.Lease(ctx, jobtype.LeaseRequest{Agent: "a", Slots: 1}); !errors.Is(err, jobs.ErrStore) {
		t.Fatalf("the old leader's Lease = %v; want ErrStore", err)
	}
	newStore := New(rdb, keys.Prefix(), Fence{Token: "2:b"}, nil)
	defer newStore.Close()
	e, err := jobs.Open(ctx, jobs.Config{Store: newStore})
	if err != nil {
		t.Fatal(err)
	}
	list, err := e.Jobs(ctx, jobs.Filter{})
	if err != nil || len(list) != 2 || list[0].ID != ids[0] || list[1].State != jobtype.StateQueued {
		t.Fatalf("the new leader's jobs = %+v, %v; want the 2 the old one committed, queued", list, err)
	}
	more, err := e.Enqueue(ctx, []jobtype.JobSpec{{Queue: "q"}})
	if err != nil || more[0] != "3" {
		t.Fatalf("the new leader's first id = %v, %v; want 3", more, err)
	}
	got, err := e.Lease(ctx, jobtype.LeaseRequest{Agent: "b", Slots: 3})
	if err != nil || len(got.Jobs) != 3 || got.Jobs[0].Attempt != 1 {
		t.Fatalf("the new leader leases %+v, %v; want jobs 1-3 at attempt 1", got, err)
	}
}
