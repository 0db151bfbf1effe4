package e2etest

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/asyclient"
	"github.com/usherhq/usher/internal/redisq/redistest"
)

// BenchmarkAsyRoundTrips counts the Redis commands one /asy task costs in
// multi-node mode: a queue server, a scheduler and a backend on one
// Redis, tasks one after another (INFO commandstats before and after;
// the background traffic of heartbeats, lease renewals and monitors over
// the same time is included). Reported per task, with the commands that
// made them.
//
//	go test -run '^$' -bench AsyRoundTrips -benchtime 40x ./internal/redisq/e2etest/
func BenchmarkAsyRoundTrips(b *testing.B) {
	d := newBenchDeployment(b)
	ctx := context.Background()
	before := commandStats(ctx, b, d)
	start := time.Now()
	b.ResetTimer()
	for i := range b.N {
		files := []asyclient.File{{Name: "t.asy", Data: []byte(fmt.Sprintf("draw((0,0)--(%d,1));\n", i+1)), Main: true}}
		msgs, err := asyclient.Compile(ctx, d.fronts["front-1"].asyURL(), files, asyclient.Options{Timeout: 3 * time.Second})
		if err != nil || !msgs[len(msgs)-1].Success {
			b.Fatalf("task %d: %v %+v", i, err, msgs)
		}
	}
	b.StopTimer()
	took := time.Since(start)
	after := commandStats(ctx, b, d)
	total := 0
	var lines []string
	for cmd, n := range after {
		delta := n - before[cmd]
		if delta <= 0 || cmd == "info" {
			continue
		}
		total += delta
		lines = append(lines, fmt.Sprintf("%s %.1f", cmd, float64(delta)/float64(b.N)))
	}
	sort.Strings(lines)
	b.ReportMetric(float64(total)/float64(b.N), "redis-cmds/task")
	b.Logf("%d tasks in %v; per task: %s", b.N, took.Round(time.Millisecond), strings.Join(lines, ", "))
}

// newBenchDeployment starts a queue server, a scheduler and a backend.
func newBenchDeployment(b *testing.B) *deployment {
	d := newDeployment(b, redistest.Start(b).URL())
	d.startScheduler("sched-1")
	d.startBackend("backend-1")
	d.startFront("front-1")
	d.waitLeader(10*time.Second, "")
	d.waitBackends(1)
	return d
}

// commandStats reads INFO commandstats: calls per command.
func commandStats(ctx context.Context, b *testing.B, d *deployment) map[string]int {
	info, err := d.rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]int{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok {
			continue
		}
		calls, _, _ := strings.Cut(rest, ",")
		n, _ := strconv.Atoi(calls)
		out[strings.TrimPrefix(name, "cmdstat_")] = n
	}
	return out
}
