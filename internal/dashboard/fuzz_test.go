package dashboard

import (
	"reflect"
	"strconv"
	"testing"
)

// Counts read from a Redis hash either are refused or write back the same
// nonzero fields: nothing is dropped or invented.
func FuzzCountsOfFields(f *testing.F) {
	f.Add("done", "3", "compile.40", "2")
	f.Add("denied.queue_full", "1", "wait.0", "7")
	f.Add("denied.x", "1", "compile.-1", "1")
	f.Add("cache.hit", "-4", "failed", "9999999999999999999999")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		in := map[string]string{k1: v1, k2: v2}
		c, err := CountsOfFields(in)
		if err != nil {
			return
		}
		want := map[string]int64{}
		for k, v := range in {
			n, _ := strconv.ParseInt(v, 10, 64)
			if n != 0 {
				want[k] = n
			}
		}
		if got := c.Fields(); !reflect.DeepEqual(got, want) {
			t.Fatalf("CountsOfFields(%v).Fields() = %v", in, got)
		}
	})
}

// A sample read from the history list either is refused or encodes back
// to a sample that reads the same.
func FuzzParseSample(f *testing.F) {
	f.Add([]byte(`{"t":1,"waiting":{"fast":1},"running":{},"done":2,"failed":0,"denied":0,"cacheHits":0,"cacheMisses":0,"compileMs":[1,2,3]}`))
	f.Add([]byte(`{"t":0}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseSample(b)
		if err != nil {
			return
		}
		again, err := ParseSample(s.Encode())
		if err != nil || !reflect.DeepEqual(again, s) {
			t.Fatalf("ParseSample(%q) = %+v; again %+v, %v", b, s, again, err)
		}
	})
}
