package redisjobs

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/usherhq/usher/internal/jobs"
	"github.com/usherhq/usher/internal/jobs/storetest"
	"github.com/usherhq/usher/internal/redisq"
	"github.com/usherhq/usher/internal/redisq/redistest"
	"github.com/usherhq/usher/jobtype"
)

var at = time.UnixMilli(1700000600000)

func start(id int64, attempt int) jobs.Op {
	return jobs.Op{Kind: jobs.OpStart, ID: id, Attempt: attempt, Agent: fmt.Sprint("agent-", attempt), At: at}
}

func finish(id int64, s jobtype.State, r *jobtype.Result) jobs.Op {
	return jobs.Op{Kind: jobs.OpFinish, ID: id, State: s, At: at.Add(time.Duration(id) * time.Second), Result: r}
}

func requeue(id int64) jobs.Op {
	return jobs.Op{Kind: jobs.OpRequeue, ID: id, At: at.Add(time.Minute), Result: &jobtype.Result{ExitCode: 2, Output: "o", Error: "e"}}
}

func reset(id int64) jobs.Op { return jobs.Op{Kind: jobs.OpReset, ID: id, At: at} }

// contents is every key under prefix with its type and value, the prefix
// cut off, to compare the data of two prefixes.
func contents(t *testing.T, rdb redis.UniversalClient, prefix string) map[string]string {
	t.Helper()
	ctx := context.Background()
	keys, err := rdb.Keys(ctx, prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, key := range keys {
		name := strings.TrimPrefix(key, prefix)
		var v any
		switch typ := rdb.Type(ctx, key).Val(); typ {
		case "hash":
			v = rdb.HGetAll(ctx, key).Val()
		case "zset":
			v = rdb.ZRangeWithScores(ctx, key, 0, -1).Val()
		case "string":
			v = rdb.Get(ctx, key).Val()
		default:
			t.Fatalf("%s: unexpected type %s", key, typ)
		}
		out[name] = fmt.Sprint(v)
	}
	return out
}

func diffContents(a, b map[string]string) string {
	var names []string
	for k := range a {
		names = append(names, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	var out []string
	for _, k := range names {
		if a[k] != b[k] {
			out = append(out, fmt.Sprintf("%s:\n  one batch  %q\n  one by one %q", k, a[k], b[k]))
		}
	}
	return strings.Join(out, "\n")
}

// A batch that changes the same jobs several times — its index changes
// folded into one ZADD and one ZREM per zset, whether a job exists read
// once for the whole batch — leaves Redis as the same changes written one
// batch each, and Job, Jobs and Load read job 1 in the state its last
// change left.
func TestFoldedBatch(t *testing.T) {
	rdb := client(t, redistest.Start(t).URL())
	ok := &jobtype.Result{Output: "done"}
	for i, tc := range []struct {
		name string
		ops  []jobs.Op
		want jobtype.State // job 1's
	}{
		{"insert, start and finish of one job", []jobs.Op{storetest.Insert(1), start(1, 1), finish(1, jobtype.StateSucceeded, ok)},
			jobtype.StateSucceeded},
		{"finished, reset, run again and failed", []jobs.Op{storetest.Insert(1), start(1, 1), finish(1, jobtype.StateSucceeded, ok),
			reset(1), start(1, 1), requeue(1), start(1, 2), finish(1, jobtype.StateFailed, nil)}, jobtype.StateFailed},
		{"changes before the insert do nothing", []jobs.Op{start(1, 1), finish(1, jobtype.StateSucceeded, ok), reset(1),
			storetest.Insert(1), start(1, 1)}, jobtype.StateRunning},
		{"finished twice, as two states", []jobs.Op{storetest.Insert(1), finish(1, jobtype.StateSucceeded, ok),
			finish(1, jobtype.StateCancelled, nil)}, jobtype.StateCancelled},
		{"a reset of a running job", []jobs.Op{storetest.Insert(1), start(1, 1), reset(1)}, jobtype.StateQueued},
		{"requeued", []jobs.Op{storetest.Insert(1), start(1, 1), requeue(1)}, jobtype.StateQueued},
		{"workflows, queues and dependencies", []jobs.Op{
			{Kind: jobs.OpPutQueue, Queue: &jobtype.Queue{Name: "a", Priority: 2}}, {Kind: jobs.OpWorkflow, ID: 1, Name: "w", At: at},
			storetest.InsertIn("a", 1, 1), storetest.InsertIn("b", 1, 2, 1), storetest.InsertIn("a", 0, 3, 2),
			start(1, 1), finish(1, jobtype.StateSucceeded, ok), start(2, 1), finish(3, jobtype.StateCancelled, nil),
			{Kind: jobs.OpDeleteQueue, Name: "a"}, {Kind: jobs.OpPutLimit, Limit: &jobtype.KeyLimit{Pattern: "k", Limit: 2}}},
			jobtype.StateSucceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			one, each := fmt.Sprintf("{one%d}:", i), fmt.Sprintf("{each%d}:", i)
			batch := New(rdb, one, Fence{}, nil)
			defer batch.Close()
			storetest.Apply(t, batch, tc.ops...)
			single := New(rdb, each, Fence{}, nil)
			defer single.Close()
			for _, op := range tc.ops {
				storetest.Apply(t, single, op)
			}
			if d := diffContents(contents(t, rdb, one), contents(t, rdb, each)); d != "" {
				t.Fatalf("one batch and one change at a time differ:\n%s", d)
			}
			checkJob1(t, batch, tc.want)
		})
	}
}

// checkJob1 checks that Job, Jobs by state and Load all see job 1 in
// state want.
func checkJob1(t *testing.T, s *Store, want jobtype.State) {
	t.Helper()
	ctx := context.Background()
	if j, err := s.Job(ctx, 1); err != nil || j.State != want {
		t.Fatalf("job 1 = %+v, %v; want %s", j, err, want)
	}
	for _, st := range []jobtype.State{jobtype.StateQueued, jobtype.StateRunning, jobtype.StateSucceeded, jobtype.StateFailed, jobtype.StateCancelled} {
		list, err := s.Jobs(ctx, jobs.Filter{State: st, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		listed := slices.ContainsFunc(list.Jobs, func(j jobtype.Job) bool { return j.ID == "1" })
		if listed != (st == want) {
			t.Errorf("job 1 listed as %s: %v; it is %s", st, listed, want)
		}
	}
	snap, err := s.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(snap.Jobs, func(r jobs.Record) bool { return r.ID == 1 })
	if loaded := i >= 0; loaded != !want.Final() || loaded && snap.Jobs[i].Running != (want == jobtype.StateRunning) {
		t.Errorf("Load has job 1: %v (%+v); want it %s", loaded, snap.Jobs, want)
	}
}

//go:embed testdata/apply-2b58fd6.lua
var oldApplyLua string

// oldBuild writes changes as the build before jobs.unfinished did, with
// its script (testdata/apply-2b58fd6.lua) and its encoding.
type oldBuild struct {
	rdb   redis.UniversalClient
	k     names
	token string
}

func (o oldBuild) apply(t *testing.T, ops ...jobs.Op) {
	t.Helper()
	p := o.k.prefix + "jobs."
	keys := []string{redisq.NewKeys(o.k.prefix).Leader(), p + "ids", p + "state:queued", p + "state:running",
		p + "state:succeeded", p + "state:failed", p + "state:cancelled", p + "finished", p + "queues", p + "limits",
		p + "workflows", p + "workflows.created", p + "next"}
	args := []any{o.token, int64(0), int64(0)}
	result := func(r *jobtype.Result) []any {
		if r == nil {
			return []any{"0", "", "", ""}
		}
		return []any{"1", r.ExitCode, r.Output, r.Error}
	}
	for _, op := range ops {
		switch op.Kind {
		case jobs.OpPutQueue:
			b, _ := json.Marshal(op.Queue)
			args = append(args, "1", op.Queue.Name, b)
		case jobs.OpWorkflow:
			args = append(args, "5", op.ID, op.Name, op.At.UnixMilli())
			args[2] = max(args[2].(int64), op.ID+1)
		case jobs.OpInsert:
			r := op.Record
			spec := r.Spec
			spec.Payload = nil
			b, _ := json.Marshal(spec)
			args = append(args, "4", r.ID, spec.Queue, b, []byte(r.Spec.Payload), r.Workflow, r.CreatedAt.UnixMilli(), joinIDs(r.After))
			keys = append(keys, o.k.job(r.ID), o.k.queue(spec.Queue))
			if r.Workflow != 0 {
				keys = append(keys, o.k.workflow(r.Workflow))
			}
			args[1] = max(args[1].(int64), r.ID+1)
		case jobs.OpStart:
			args = append(args, "6", op.ID, op.Attempt, op.Agent, op.At.UnixMilli())
			keys = append(keys, o.k.job(op.ID))
		case jobs.OpRequeue:
			args = append(append(args, "7", op.ID, op.At.UnixMilli()), result(op.Result)...)
			keys = append(keys, o.k.job(op.ID))
		case jobs.OpFinish:
			args = append(append(args, "8", op.ID, stateCode(op.State), op.At.UnixMilli()), result(op.Result)...)
			keys = append(keys, o.k.job(op.ID))
		default:
			t.Fatalf("the old build's encoding here has no kind %d", op.Kind)
		}
	}
	args[1], args[2] = fmt.Sprint(args[1]), fmt.Sprint(args[2])
	if err := redis.NewScript(oldApplyLua).Run(context.Background(), o.rdb, keys, args...).Err(); err != nil {
		t.Fatalf("the old build's script: %v", err)
	}
}

// A leader of this build takes over the data of an older build: Load
// merges jobs.state:queued and :running into jobs.unfinished and drops
// jobs.ids and jobs.state:queued, once, and reads, lists and writes on as
// if this build had written it all. A store that does not hold the lead
// converts nothing.
func TestLoadConvertsOlderLayout(t *testing.T) { onSingleAndCluster(t, testConvert) }

func testConvert(t *testing.T, rdb redis.UniversalClient) {
	ctx := context.Background()
	keys := redisq.NewKeys(redisq.DefaultPrefix)
	lead(t, rdb, keys, "1:old")
	old := oldBuild{rdb: rdb, k: newNames(keys.Prefix()), token: "1:old"}
	old.apply(t, jobs.Op{Kind: jobs.OpPutQueue, Queue: &jobtype.Queue{Name: "q", Active: true}}, jobs.Op{Kind: jobs.OpWorkflow, ID: 1, Name: "w", At: at},
		storetest.InsertIn("q", 1, 1), storetest.InsertIn("q", 1, 2, 1), storetest.Insert(3), storetest.Insert(4), storetest.Insert(5, 3, 4))
	old.apply(t, start(1, 1), start(2, 1), start(3, 1), finish(3, jobtype.StateSucceeded, &jobtype.Result{Output: "ok"}),
		finish(4, jobtype.StateCancelled, nil), start(5, 1), requeue(5))
	oldKeys := []string{redisq.DefaultPrefix + "jobs.ids", redisq.DefaultPrefix + "jobs.state:queued"}

	lead(t, rdb, keys, "2:new")
	outsider := New(rdb, keys.Prefix(), Fence{Token: "3:other"}, nil)
	defer outsider.Close()
	if _, err := outsider.Load(ctx); !errors.Is(err, ErrFenced) {
		t.Fatalf("Load by a store without the lead = %v; want ErrFenced", err)
	}
	if n := rdb.Exists(ctx, oldKeys...).Val(); n != 2 {
		t.Fatalf("after a fenced Load, %d of the old indexes are left; want both", n)
	}

	s := New(rdb, keys.Prefix(), Fence{Token: "2:new"}, nil)
	defer s.Close()
	snap, err := s.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range snap.Jobs {
		got = append(got, fmt.Sprintf("%d running=%v after=%v ready=%v", r.ID, r.Running, r.After, !r.ReadyAt.IsZero()))
	}
	want := []string{"1 running=true after=[] ready=false", "2 running=true after=[1] ready=false", "5 running=false after=[] ready=true"}
	if !slices.Equal(got, want) || snap.NextJob != 6 || snap.NextWorkflow != 2 || len(snap.Queues) != 1 {
		t.Fatalf("Load of the old layout:\n got %q next %d %d queues %v\nwant %q next 6 2, queue q", got, snap.NextJob, snap.NextWorkflow, snap.Queues, want)
	}
	if n := rdb.Exists(ctx, oldKeys...).Val(); n != 0 {
		t.Fatalf("%d of the old indexes are left after Load; want none", n)
	}
	listed := func(f jobs.Filter) []string {
		f.Limit = 100
		list, err := s.Jobs(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, j := range list.Jobs {
			ids = append(ids, j.ID)
		}
		return ids
	}
	storetest.Apply(t, s, finish(1, jobtype.StateSucceeded, nil), start(5, 2))
	for _, c := range []struct {
		f    jobs.Filter
		want []string
	}{
		{jobs.Filter{}, []string{"1", "2", "3", "4", "5"}},
		{jobs.Filter{State: jobtype.StateRunning}, []string{"2", "5"}},
		{jobs.Filter{State: jobtype.StateSucceeded}, []string{"1", "3"}},
		{jobs.Filter{State: jobtype.StateCancelled}, []string{"4"}},
		{jobs.Filter{Workflow: "1"}, []string{"1", "2"}},
	} {
		if got := listed(c.f); !slices.Equal(got, c.want) {
			t.Errorf("after the conversion, %+v lists %v; want %v", c.f, got, c.want)
		}
	}
	storetest.Apply(t, s, jobs.Op{Kind: jobs.OpPrune, At: time.Now()})
	if got := listed(jobs.Filter{}); !slices.Equal(got, []string{"2", "5"}) {
		t.Errorf("after pruning every finished job, %v are left; want 2 and 5", got)
	}
}
