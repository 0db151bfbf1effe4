package jobs

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/usherhq/usher/jobtype"
)

// canonicalJSON keeps a value's meaning, is stable (canonical twice is
// canonical once) and does not depend on object key order or spacing.
func FuzzCanonicalJSON(f *testing.F) {
	for _, seed := range []string{`{"b":1,"a":{"d":[1,2.50,"x"],"c":null}}`, `[1e400, -0, 12345678901234567890]`,
		` "s\u00e9" `, `{"a":1,"a":2}`, `true`, `{`, ``} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		c := canonicalJSON(raw)
		if !json.Valid(raw) {
			return
		}
		if !json.Valid(c) {
			t.Fatalf("canonical form %q of %q is not JSON", c, raw)
		}
		if again := canonicalJSON(c); !bytes.Equal(again, c) {
			t.Fatalf("canonical of %q = %q, then %q", raw, c, again)
		}
		if !reflect.DeepEqual(decodeNumbers(t, raw), decodeNumbers(t, c)) {
			t.Fatalf("canonical form %q of %q means something else", c, raw)
		}
	})
}

func decodeNumbers(t *testing.T, b []byte) any {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%q: %v", b, err)
	}
	return v
}

// Payloads alike up to key order and spacing make one unique key;
// another queue, period or payload (when by args) makes another.
func TestUniqueKeys(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_500)
	spec := func(queue, payload string, byArgs bool, period int64) *jobtype.JobSpec {
		return &jobtype.JobSpec{Queue: queue, Payload: json.RawMessage(payload),
			Unique: &jobtype.UniqueOpts{ByArgs: byArgs, ByPeriodMs: period}}
	}
	base := uniqueKey(spec("q", `{"a":1,"b":[1,2]}`, true, 0), at)
	cases := []struct {
		name string
		sp   *jobtype.JobSpec
		at   time.Time
		same bool
	}{
		{"keys reordered and spaced", spec("q", ` { "b" : [1, 2], "a": 1 }`, true, 0), at, true},
		{"a later time without a period", spec("q", `{"a":1,"b":[1,2]}`, true, 0), at.Add(time.Hour), true},
		{"another payload", spec("q", `{"a":2,"b":[1,2]}`, true, 0), at, false},
		{"number written otherwise", spec("q", `{"a":1.0,"b":[1,2]}`, true, 0), at, false},
		{"another queue", spec("r", `{"a":1,"b":[1,2]}`, true, 0), at, false},
		{"not by args", spec("q", `{"a":1,"b":[1,2]}`, false, 0), at, false},
		{"with a period", spec("q", `{"a":1,"b":[1,2]}`, true, 1000), at, false},
	}
	for _, c := range cases {
		if got := uniqueKey(c.sp, c.at) == base; got != c.same {
			t.Errorf("%s: same key = %v; want %v", c.name, got, c.same)
		}
	}
	// Not by args: any payload is alike; the period splits by time.
	p := spec("q", `1`, false, 1000)
	if uniqueKey(p, at) != uniqueKey(spec("q", `2`, false, 1000), at.Add(400*time.Millisecond)) {
		t.Error("two payloads in one period, not by args, differ")
	}
	if uniqueKey(p, at) == uniqueKey(p, at.Add(600*time.Millisecond)) {
		t.Error("two periods give one key")
	}
}
