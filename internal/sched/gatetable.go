package sched

import "github.com/usherhq/usher/internal/sched/internal/table"

// gateTable holds the counters of every gate in a table.Chunks, and beside
// them, by the same number, each key gate's rate bucket (rate.go): a start
// of a rated key and the rate check at a queue's head find the bucket from
// the number alone, in a dense array of 32-byte records that only rated
// keys touch, rather than in the gate's own record.
type gateTable struct {
	table.Chunks[gateCounts]
	rates []*[table.ChunkLen]rateBucket
}

func (t *gateTable) add(g *gate) {
	n, c := t.New()
	*c = gateCounts{num: n, g: g, mode: g.kind == gateMode, limit: unlimited}
	g.gateCounts = c
	if int(n>>table.ChunkBits) == len(t.rates) {
		t.rates = append(t.rates, new([table.ChunkLen]rateBucket))
	}
	*t.rate(n) = rateBucket{}
}

func (t *gateTable) drop(g *gate) {
	n := g.num
	*g.gateCounts = gateCounts{num: n}
	*t.rate(n) = rateBucket{}
	t.Free(n)
}

// rate returns the rate bucket of the gate whose counters are numbered n.
func (t *gateTable) rate(n uint32) *rateBucket {
	return &t.rates[n>>table.ChunkBits][n&(table.ChunkLen-1)]
}
