package backend

import (
	"encoding/json"
	"testing"

	"github.com/usherhq/usher/internal/sandbox"
	"github.com/usherhq/usher/internal/wire"
)

// FuzzOptions: any options body either is refused with a protocol error or
// yields options the runner accepts (a known format, verbosity 0..3, a
// timeout that is not negative); none panics, before or after run.
func FuzzOptions(f *testing.F) {
	for _, s := range []string{`{}`, `{"timeout":3000,"format":"png","stderr":"separate","verbosity":3,"interactive":true}`,
		`{"timeout":-1}`, `{"format":"eps"}`, `{"verbosity":1e3}`, `{"timeout":9223372036854775807}`, `[]`, `{"timeout":null}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if !json.Valid(body) {
			return
		}
		h := wire.Header{Verb: VerbOptions, Body: body}
		var b optionsBody
		if err := wire.Decode(h, &b, "option"); err != nil {
			if !wire.IsProtocol(err) {
				t.Fatalf("Decode(%s) = %v, not a protocol error", body, err)
			}
			return
		}
		o := defaultOptions()
		if err := o.apply(b); err == nil {
			switch o.format {
			case sandbox.FormatSVG, sandbox.FormatPDF, sandbox.FormatPNG:
			default:
				t.Fatalf("accepted format %q", o.format)
			}
			if o.verbosity < 0 || o.verbosity > 3 || o.timeout < 0 {
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
