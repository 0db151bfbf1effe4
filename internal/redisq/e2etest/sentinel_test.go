package e2etest

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/redisq/redistest"
)

// Through Redis Sentinel (a master, one replica, one Sentinel; every role
// given the Sentinel's address and the master's name): tasks run; then
// the master is killed, the Sentinel promotes the replica, every role
// finds the new master on its own, and tasks run again, with nothing of
// the first ones lost or left behind.
func TestAsyThroughSentinelFailover(t *testing.T) {
	master := redistest.Start(t)
	replica := redistest.StartReplica(t, master)
	sentinel := redistest.StartSentinel(t, master, "usher", 1)
	d := newDeployment(t, sentinel.URL())
	fronts := d.startTwoOfEach()
	d.tasksAllEnd(fronts, 12)

	// What the master acknowledged reaches the replica before the kill:
	// the test is about a failover that loses nothing Redis kept.
	ctx := context.Background()
	if n, err := d.rdb.Do(ctx, "WAIT", 1, 5000).Int(); err != nil || n < 1 {
		t.Fatalf("WAIT for the replica: %d replicas, %v", n, err)
	}
	master.Kill()
	d.eventually(60*time.Second, "the Sentinel promotes the replica", func() (bool, string) {
		addr, err := sentinel.MasterAddr(ctx)
		return addr == replica.Addr, fmt.Sprintf("master %s, %v", addr, err)
	})
	d.waitLeader(30*time.Second, "")
	d.waitBackends(2)
	for _, f := range fronts {
		d.eventually(30*time.Second, f.Name+" ready again", func() (bool, string) {
			code := readyz(f)
			return code == http.StatusOK, fmt.Sprintf("/readyz %d", code)
		})
	}
	d.tasksAllEnd(fronts, 12)
}

// tasksAllEnd runs n mixed tasks over the queue servers: every one ends
// exactly once, nearly all succeed, and nothing of them stays in Redis.
func (d *deployment) tasksAllEnd(fronts []*front, n int) {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ok, errs := checkExactlyOnce(d.t, workload(ctx, fronts, n, 10, nil))
	checkEndings(d.t, ok, n, errs)
	d.eventually(10*time.Second, "nothing of the tasks left in Redis", func() (bool, string) {
		left := d.leftovers()
		return len(left) == 0, fmt.Sprint(left)
	})
}

// readyz is the status of a queue server's /readyz, or 0 when it does not
// answer.
func readyz(f *front) int {
	resp, err := http.Get(f.base + "/readyz")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}
