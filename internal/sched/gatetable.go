package sched

import "github.com/usherhq/usher/internal/sched/internal/table"

// gateTable holds the counters of every gate in a table.Chunks.
type gateTable struct {
	table.Chunks[gateCounts]
}

func (t *gateTable) add(g *gate) {
	n, c := t.New()
	*c = gateCounts{num: n, g: g, mode: g.kind == gateMode, limit: unlimited}
	g.gateCounts = c
}

func (t *gateTable) drop(g *gate) {
	n := g.num
	*g.gateCounts = gateCounts{num: n}
	t.Free(n)
}
