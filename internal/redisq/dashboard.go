package redisq

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/usherhq/usher/internal/asyqueue"
	"github.com/usherhq/usher/internal/jobs"
)

// DashboardTTL is how long scheduler.dashboard lives unless the leader
// writes it again (it does every second).
const DashboardTTL = 5 * time.Second

// Dashboard is what /api/dashboard streams: the Asymptote queue's state
// with the generic jobs'. Single-node mode sends it without Leader and
// NoData; in multi-node mode the leading scheduler publishes it, with
// Leader, in scheduler.dashboard, and a queue server streams that, or a
// Dashboard with only NoData (and Leader when it knows who leads) when
// there is no document it can show.
type Dashboard struct {
	asyqueue.DashboardState
	Jobs jobs.Stats `json:"jobs"`
	// Leader is the scheduler whose state this is (multi-node mode).
	Leader *DashboardLeader `json:"leader,omitempty"`
	// NoData says why a queue server has no leader's state to show
	// (multi-node mode): no scheduler leads, the leader has not published
	// yet, or what it published cannot be read.
	NoData string `json:"noData,omitempty"`
}

// DashboardLeader names the leading scheduler.
type DashboardLeader struct {
	Node string `json:"node"`
	// Token is its lease token EPOCH:NODE, as scheduler.leader holds it.
	Token string `json:"token"`
}

// ErrBadDashboard is the error of ParseDashboard for a value that is not
// a leader's dashboard document.
var ErrBadDashboard = errors.New("scheduler.dashboard: not a dashboard document")

// Encode writes d as scheduler.dashboard's value.
func (d Dashboard) Encode() ([]byte, error) {
	b, err := json.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("encode dashboard: %w", err)
	}
	return b, nil
}

// ParseDashboard reads scheduler.dashboard's value: a JSON Dashboard with
// its time and a Leader whose token is EPOCH:NODE for its node. Fields it
// does not know are ignored (a newer leader may add some).
func ParseDashboard(b []byte) (Dashboard, error) {
	var d Dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		return Dashboard{}, fmt.Errorf("%w: %v", ErrBadDashboard, err)
	}
	switch {
	case d.Leader == nil:
		return Dashboard{}, fmt.Errorf("%w: it names no leader", ErrBadDashboard)
	case d.Time.IsZero():
		return Dashboard{}, fmt.Errorf("%w: it has no time", ErrBadDashboard)
	case d.NoData != "":
		return Dashboard{}, fmt.Errorf("%w: a leader's document with noData", ErrBadDashboard)
	}
	if _, node, err := ParseToken(d.Leader.Token); err != nil || node != d.Leader.Node {
		return Dashboard{}, fmt.Errorf("%w: leader %q with token %q", ErrBadDashboard, d.Leader.Node, d.Leader.Token)
	}
	return d, nil
}

// ParseToken splits a lease token EPOCH:NODE (scheduler.leader's value).
func ParseToken(token string) (epoch int64, node string, err error) {
	e, node, ok := strings.Cut(token, ":")
	epoch, perr := strconv.ParseInt(e, 10, 64)
	if !ok || perr != nil || epoch <= 0 || node == "" {
		return 0, "", fmt.Errorf("lease token %q: not EPOCH:NODE", token)
	}
	return epoch, node, nil
}
