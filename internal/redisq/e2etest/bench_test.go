package e2etest

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
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
	trips := monitorRoundTrips(ctx, b, d)
	before := commandStats(ctx, b, d)
	start := time.Now()
	b.ResetTimer()
	for i := range b.N {
		files := []asyclient.File{{Name: "t.asy", Data: []byte(fmt.Sprintf("draw((0,0)--(%d,1));\n", i+1)), Main: true}}
		msgs, err := asyclient.Compile(ctx, d.fronts["front-1"].asyURL(), files, asyclient.Options{})
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
	rt := trips()
	b.ReportMetric(float64(total)/float64(b.N), "redis-cmds/task")
	b.ReportMetric(float64(rt)/float64(b.N), "round-trips/task")
	b.Logf("%d tasks in %v; commands per task, scripts' own included: %s", b.N, took.Round(time.Millisecond), strings.Join(lines, ", "))
}

// monitorRoundTrips counts, through redis-cli MONITOR, the commands
// clients send (those a script runs are tagged "lua" and not counted; each
// command of a pipeline counts). The returned function stops counting and
// gives the total.
func monitorRoundTrips(ctx context.Context, b *testing.B, d *deployment) func() int {
	addr := strings.TrimPrefix(d.redisURL, "redis://")
	host, port, _ := strings.Cut(addr, ":")
	cmd := exec.CommandContext(ctx, "redis-cli", "-h", host, "-p", port, "monitor")
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	counted := make(chan int)
	go func() {
		n := 0
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			if strings.Contains(line, " lua]") || strings.Contains(line, `"info"`) || line == "OK" {
				continue
			}
			n++
		}
		counted <- n
	}()
	return func() int {
		_ = cmd.Process.Kill()
		n := <-counted
		_ = cmd.Wait()
		return n
	}
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
