package sched

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"
)

// BenchmarkSubmitScheduled measures Submit of a job that is ready at once
// against one scheduled within the next hour (the delayed heap), with a
// million jobs of the same kind already in the core; compare the two
// ns/op. Run with:
//
//	go test -run '^$' -bench BenchmarkSubmitScheduled -benchmem ./internal/sched/
func BenchmarkSubmitScheduled(b *testing.B) {
	for _, kind := range []string{"immediate", "scheduled", "deadline"} {
		b.Run(kind, func(b *testing.B) {
			clk := newClock()
			s, err := New(Config{Now: clk.Now})
			if err != nil {
				b.Fatal(err)
			}
			if err := s.DefineQueue(QueueSpec{Name: "q"}); err != nil {
				b.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			const before = 1_000_000
			ids := make([]string, before+b.N)
			for i := range ids {
				ids[i] = "j" + strconv.Itoa(i)
			}
			spec := func(i int) JobSpec {
				sp := JobSpec{ID: ids[i], Queue: "q"}
				switch kind {
				case "scheduled":
					sp.NotBefore = clk.t.Add(time.Duration(rng.Int64N(int64(time.Hour))))
				case "deadline":
					sp.NotBefore = clk.t.Add(time.Duration(rng.Int64N(int64(time.Hour))))
					sp.Deadline = sp.NotBefore.Add(time.Hour)
				}
				return sp
			}
			for i := range before {
				if err := s.Submit(spec(i)); err != nil {
					b.Fatal(err)
				}
			}
			specs := make([]JobSpec, b.N)
			for i := range specs {
				specs[i] = spec(before + i)
			}
			b.ResetTimer()
			for i := range specs {
				if err := s.Submit(specs[i]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
