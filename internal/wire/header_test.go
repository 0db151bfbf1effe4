package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

var backendVerbs = []string{"add", "options", "run", "input"}

func TestParseHeader(t *testing.T) {
	tests := []struct {
		name, msg string
		verb      string
		body      string
		err       string
	}{
		{name: "verb alone", msg: "run", verb: "run"},
		{name: "trailing space", msg: "run ", verb: "run"},
		{name: "object", msg: `add {"filename":"a.asy","main":true}`, verb: "add", body: `{"filename":"a.asy","main":true}`},
		{name: "array", msg: `add [1,2]`, verb: "add", body: `[1,2]`},
		{name: "whitespace around body", msg: "options \t{\"timeout\": 5}\n", verb: "options", body: `{"timeout": 5}`},
		{name: "empty", msg: "", err: "empty message where a header is due"},
		{name: "uppercase", msg: "RUN", err: `malformed header "RUN": a header starts with a lowercase verb`},
		{name: "no space before body", msg: `add{"main":true}`, err: `malformed header "add{\"main\":true}": a header starts with a lowercase verb`},
		{name: "leading space", msg: " run", err: `malformed header " run": a header starts with a lowercase verb`},
		{name: "long garbage quoted in part", msg: strings.Repeat("X", 100), err: `malformed header "` + strings.Repeat("X", 40) + `"…: a header starts with a lowercase verb`},
		{name: "unknown verb", msg: "launch", err: `unknown message "launch"`},
		{name: "unknown verb with body", msg: `complete {"success":true}`, err: `unknown message "complete"`},
		{name: "verb too long", msg: strings.Repeat("a", MaxVerb+1), err: `malformed header "` + strings.Repeat("a", 33) + `": a header starts with a lowercase verb`},
		{name: "scalar body", msg: `options 5`, err: `malformed JSON after "options": expected an object or an array`},
		{name: "string body", msg: `options "x"`, err: `malformed JSON after "options": expected an object or an array`},
		{name: "broken object", msg: `options {"timeout":}`, err: `malformed JSON after "options": invalid character '}' looking for beginning of value`},
		{name: "unterminated", msg: `options {"timeout":1`, err: `malformed JSON after "options": unexpected end of JSON input`},
		{name: "two values", msg: `options {} {}`, err: `malformed JSON after "options": invalid character '{' after top-level value`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := ParseHeader([]byte(tt.msg), backendVerbs...)
			if tt.err != "" {
				var pe *Error
				if !errors.As(err, &pe) || err.Error() != tt.err {
					t.Fatalf("ParseHeader(%q) error = %v, want *Error %q", tt.msg, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseHeader(%q): %v", tt.msg, err)
			}
			if h.Verb != tt.verb || string(h.Body) != tt.body {
				t.Fatalf("ParseHeader(%q) = %q %q, want %q %q", tt.msg, h.Verb, h.Body, tt.verb, tt.body)
			}
		})
	}
}

func TestFormatHeader(t *testing.T) {
	tests := []struct {
		name string
		verb string
		body any
		want string
		err  bool
	}{
		{name: "verb alone", verb: "run", want: "run"},
		{name: "struct", verb: "result", body: struct {
			Format string `json:"format"`
		}{"svg"}, want: `result {"format":"svg"}`},
		{name: "array", verb: "missing", body: []string{"a.asy"}, want: `missing ["a.asy"]`},
		{name: "bad verb", verb: "Result", body: nil, err: true},
		{name: "scalar body", verb: "run", body: 5, err: true},
		{name: "unmarshalable body", verb: "run", body: map[string]any{"x": func() {}}, err: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FormatHeader(tt.verb, tt.body)
			if tt.err {
				if err == nil {
					t.Fatalf("FormatHeader(%q, %v) = %q, want an error", tt.verb, tt.body, got)
				}
				return
			}
			if err != nil || string(got) != tt.want {
				t.Fatalf("FormatHeader(%q, %v) = %q, %v; want %q", tt.verb, tt.body, got, err, tt.want)
			}
		})
	}
}

type testOptions struct {
	Interactive *bool    `json:"interactive"`
	Timeout     *int64   `json:"timeout"`
	Format      *string  `json:"format"`
	Ratio       *float64 `json:"ratio"`
	List        *[]int   `json:"list"`
}

func TestDecode(t *testing.T) {
	tests := []struct {
		name  string
		body  string
		check func(testOptions) bool
		err   string
	}{
		{name: "no body", body: "", check: func(o testOptions) bool { return o.Timeout == nil && o.Format == nil }},
		{name: "empty object", body: "{}", check: func(o testOptions) bool { return o.Timeout == nil }},
		{name: "present fields", body: `{"timeout":3000,"interactive":false,"format":"pdf"}`, check: func(o testOptions) bool {
			return *o.Timeout == 3000 && o.Interactive != nil && !*o.Interactive && *o.Format == "pdf" && o.Ratio == nil
		}},
		{name: "zero is present", body: `{"timeout":0}`, check: func(o testOptions) bool { return o.Timeout != nil && *o.Timeout == 0 }},
		{name: "unknown key", body: `{"foo":1}`, err: `unknown option "foo"`},
		{name: "keys are case-sensitive", body: `{"Timeout":1}`, err: `unknown option "Timeout"`},
		{name: "duplicate key", body: `{"timeout":1,"timeout":2}`, err: `duplicate option "timeout"`},
		{name: "string for integer", body: `{"timeout":"1000"}`, err: `option "timeout" must be an integer`},
		{name: "fraction for integer", body: `{"timeout":1.5}`, err: `option "timeout" must be an integer`},
		{name: "overflowing integer", body: `{"timeout":1e40}`, err: `option "timeout" must be an integer`},
		{name: "null for integer", body: `{"timeout":null}`, err: `option "timeout" must be an integer`},
		{name: "number for boolean", body: `{"interactive":1}`, err: `option "interactive" must be a boolean`},
		{name: "boolean for string", body: `{"format":true}`, err: `option "format" must be a string`},
		{name: "string for number", body: `{"ratio":"x"}`, err: `option "ratio" must be a number`},
		{name: "object for array", body: `{"list":{}}`, err: `option "list" must be an array`},
		{name: "array body", body: `[1]`, err: `"options" takes a JSON object`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var o testOptions
			err := Decode(Header{Verb: "options", Body: json.RawMessage(tt.body)}, &o, "option")
			if tt.err != "" {
				var pe *Error
				if !errors.As(err, &pe) || err.Error() != tt.err {
					t.Fatalf("Decode(%s) error = %v, want *Error %q", tt.body, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Decode(%s): %v", tt.body, err)
			}
			if !tt.check(o) {
				t.Fatalf("Decode(%s) = %+v, not as expected", tt.body, o)
			}
		})
	}
}

func TestDecodeRefusesBadTargets(t *testing.T) {
	h := Header{Verb: "run", Body: json.RawMessage(`{}`)}
	var notPointer struct {
		A int `json:"a"`
	}
	var untagged struct{ A *int }
	for _, v := range []any{notPointer, &notPointer, &untagged, new(int)} {
		if err := Decode(h, v, "field"); err == nil || IsProtocol(err) {
			t.Errorf("Decode into %T = %v, want a programming error", v, err)
		}
	}
}

// FuzzParseHeader: no input panics, every accepted header formats back into
// a message that parses to the same header.
func FuzzParseHeader(f *testing.F) {
	for _, s := range []string{"run", `add {"filename":"a.asy","main":true}`, `options {"timeout":3000}`,
		"input", `add [1,{"x":[]}]`, "", "RUN", `options {"a":`, "add\x00{}", `options {"timeout":1,"timeout":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		h, err := ParseHeader(msg, backendVerbs...)
		if err != nil {
			if !IsProtocol(err) {
				t.Fatalf("ParseHeader(%q) error %v is not a protocol error", msg, err)
			}
			return
		}
		var o testOptions
		_ = Decode(h, &o, "option") // must not panic
		var body any
		if h.Body != nil {
			body = h.Body
		}
		again, err := FormatHeader(h.Verb, body)
		if err != nil {
			t.Fatalf("FormatHeader of parsed %q: %v", msg, err)
		}
		h2, err := ParseHeader(again, backendVerbs...)
		if err != nil {
			t.Fatalf("ParseHeader(FormatHeader(%q)) = %v", msg, err)
		}
		if h2.Verb != h.Verb || !sameJSON(h2.Body, h.Body) {
			t.Fatalf("round trip of %q: %q %q, want %q %q", msg, h2.Verb, h2.Body, h.Verb, h.Body)
		}
	})
}

// FuzzFormatHeader: any verb and JSON body FormatHeader accepts parses back.
func FuzzFormatHeader(f *testing.F) {
	f.Add("add", []byte(`{"filename":"a.asy"}`))
	f.Add("missing", []byte(`[{"filename":"a.asy","hash":"00"}]`))
	f.Add("run", []byte(nil))
	f.Fuzz(func(t *testing.T, verb string, body []byte) {
		var b any
		if body != nil {
			if !json.Valid(body) {
				return
			}
			b = json.RawMessage(body)
		}
		msg, err := FormatHeader(verb, b)
		if err != nil {
			return
		}
		h, err := ParseHeader(msg, verb)
		if err != nil {
			t.Fatalf("ParseHeader(%q) = %v", msg, err)
		}
		if h.Verb != verb || !sameJSON(h.Body, body) {
			t.Fatalf("round trip of %q %q: %q %q", verb, body, h.Verb, h.Body)
		}
	})
}

// sameJSON compares two JSON texts after compacting them.
func sameJSON(a, b []byte) bool {
	if len(bytes.TrimSpace(a)) == 0 || len(bytes.TrimSpace(b)) == 0 {
		return len(bytes.TrimSpace(a)) == len(bytes.TrimSpace(b))
	}
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return false
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}
