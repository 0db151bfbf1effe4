package backend

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/usherhq/usher/internal/sandbox"
	"github.com/usherhq/usher/internal/wire"
)

// FuzzOptions: any options body either is refused with a protocol error or
// yields options the runner accepts (a known format, verbosity 0..3, a
// timeout that is not negative); none panics, before or after run.
func FuzzOptions(f *testing.F) {
	for _, s := range []string{`{}`, `{"timeout":3000,"format":"png","stderr":"separate","verbosity":3,"interactive":true}`,
		`{"timeout":-1}`, `{"format":"eps"}`, `{"format":"gif"}`, `{"verbosity":1e3}`, `{"timeout":9223372036854775807}`, `[]`, `{"timeout":null}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if !json.Valid(body) {
			return
		}
		h := wire.Header{Verb: VerbOptions, Body: body}
		var b OptionsBody
		if err := wire.Decode(h, &b, "option"); err != nil {
			if !wire.IsProtocol(err) {
				t.Fatalf("Decode(%s) = %v, not a protocol error", body, err)
			}
			return
		}
		o := defaultOptions()
		if err := applyOptions(&o, b); err == nil {
			if !slices.Contains(sandbox.Formats, o.Format) {
				t.Fatalf("accepted format %q", o.Format)
			}
			if o.Verbosity < 0 || o.Verbosity > 3 || o.Timeout < 0 {
				t.Fatalf("accepted %+v from %s", o, body)
			}
		} else if _, ok := err.(*refusal); !ok {
			t.Fatalf("apply(%s) = %v, not a refusal", body, err)
		}
		if d, err := timeoutAfterRun(b); err == nil && d < 0 {
			t.Fatalf("after run: timeout %v from %s", d, body)
		}
	})
}
