package service

import (
	"context"
	"time"

	"github.com/usherhq/usher/internal/dashboard"
)

// historyLookEvery is how often single-node mode looks at the load for the
// dashboard's history (each sample keeps the peak of its looks).
const historyLookEvery = time.Second

// recordHistory looks at the dispatcher's load every historyLookEvery
// until ctx ends, for the history of the embedded default.
func (m *embedded) recordHistory(ctx context.Context) {
	tick := time.NewTicker(historyLookEvery)
	defer tick.Stop()
	for {
		st, err := m.d.Dashboard()
		if err != nil {
			return
		}
		m.history.Look(st.Time, dashboard.GaugesOf(st))
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
