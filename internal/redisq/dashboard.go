package redisq

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/usherhq/usher/internal/dashboard"
)

// DashboardTTL is how long scheduler.dashboard lives unless the leader
// writes it again (it does every second).
const DashboardTTL = 5 * time.Second

// ErrBadDashboard is the error of ParseDashboard for a value that is not
// a leader's dashboard document.
var ErrBadDashboard = errors.New("scheduler.dashboard: not a dashboard document")

// ParseDashboard reads scheduler.dashboard's value: a JSON Dashboard with
// its time and a Leader whose token is EPOCH:NODE for its node. Fields it
// does not know are ignored (a newer leader may add some).
func ParseDashboard(b []byte) (dashboard.Dashboard, error) {
	var d dashboard.Dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		return dashboard.Dashboard{}, fmt.Errorf("%w: %v", ErrBadDashboard, err)
	}
	switch {
	case d.Leader == nil:
		return dashboard.Dashboard{}, fmt.Errorf("%w: it names no leader", ErrBadDashboard)
	case d.Time.IsZero():
		return dashboard.Dashboard{}, fmt.Errorf("%w: it has no time", ErrBadDashboard)
	case d.NoData != "":
		return dashboard.Dashboard{}, fmt.Errorf("%w: a leader's document with noData", ErrBadDashboard)
	}
	if _, node, err := ParseToken(d.Leader.Token); err != nil || node != d.Leader.Node {
		return dashboard.Dashboard{}, fmt.Errorf("%w: leader %q with token %q", ErrBadDashboard, d.Leader.Node, d.Leader.Token)
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
