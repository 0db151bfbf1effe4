// Package wire is the message framing of usher's WebSocket protocols
// (docs/design.md, "The backend protocol"): the backend protocol at "/"
// and the queue protocol at "/asy".
//
// A message is a text WebSocket message, its header: a lowercase verb alone
// ("run") or followed by one space and a JSON object or array
// (`add {"filename":"a.asy","main":true}`, `missing [...]`). Where the protocol
// shows b"…" after a header, the payload is the next WebSocket message, and
// it is binary. ParseHeader and FormatHeader handle headers, Decode reads a
// header's JSON object strictly into a struct, and Conn carries headers and
// payloads over a github.com/coder/websocket connection.
package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// MaxVerb is the longest verb ParseHeader accepts, in bytes.
const MaxVerb = 32

// Header is one parsed text message.
type Header struct {
	Verb string
	// Body is the JSON after the verb, an object or an array, exactly as
	// sent without surrounding whitespace; nil when the verb stands alone.
	Body json.RawMessage
}

// Error is a protocol error: the peer sent something the protocol does not
// allow. Its text is written for the peer and names what was wrong.
type Error struct {
	Text string
}

// Error returns the text.
func (e *Error) Error() string { return e.Text }

func errorf(format string, args ...any) *Error {
	return &Error{Text: fmt.Sprintf(format, args...)}
}

// ParseHeader parses a text message whose verb must be one of known.
func ParseHeader(msg []byte, known ...string) (Header, error) {
	if len(msg) == 0 {
		return Header{}, errorf("empty message where a header is due")
	}
	verb, rest, hasRest := bytes.Cut(msg, []byte{' '})
	if !validVerb(verb) {
		return Header{}, errorf("malformed header %s: a header starts with a lowercase verb", quoteStart(msg))
	}
	v := string(verb)
	if !contains(known, v) {
		return Header{}, errorf("unknown message %q", v)
	}
	h := Header{Verb: v}
	if !hasRest {
		return h, nil
	}
	body := bytes.TrimSpace(rest)
	if len(body) == 0 {
		return h, nil
	}
	if body[0] != '{' && body[0] != '[' {
		return Header{}, errorf("malformed JSON after %q: expected an object or an array", v)
	}
	if err := checkJSON(body); err != nil {
		return Header{}, errorf("malformed JSON after %q: %v", v, err)
	}
	h.Body = body
	return h, nil
}

// checkJSON reports why body is not one valid JSON value, in the words of
// encoding/json's parser.
func checkJSON(body []byte) error {
	if json.Valid(body) {
		return nil
	}
	var v any
	return json.Unmarshal(body, &v) // fails wherever Valid does
}

// FormatHeader returns the text message for verb and body: the verb alone
// when body is nil, else the verb, a space and body as JSON, which must be
// an object or an array.
func FormatHeader(verb string, body any) ([]byte, error) {
	if !validVerb([]byte(verb)) {
		return nil, fmt.Errorf("wire: invalid verb %q", verb)
	}
	if body == nil {
		return []byte(verb), nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // "<", ">" and "&" stay as they are
	if err := enc.Encode(body); err != nil {
		return nil, fmt.Errorf("wire: body of %q: %w", verb, err)
	}
	js := bytes.TrimSuffix(buf.Bytes(), []byte{'\n'})
	if len(js) == 0 || (js[0] != '{' && js[0] != '[') {
		return nil, fmt.Errorf("wire: body of %q is not a JSON object or array", verb)
	}
	msg := make([]byte, 0, len(verb)+1+len(js))
	msg = append(msg, verb...)
	msg = append(msg, ' ')
	return append(msg, js...), nil
}

func validVerb(v []byte) bool {
	if len(v) == 0 || len(v) > MaxVerb {
		return false
	}
	for _, c := range v {
		if c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// quoteStart quotes the first bytes of msg for an error text.
func quoteStart(msg []byte) string {
	const n = 40
	if len(msg) <= n {
		return fmt.Sprintf("%q", msg)
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return fmt.Sprintf("%q…", msg[:cut])
}
