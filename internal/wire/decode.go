package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// Decode reads h's body, a JSON object, into the struct v points to. Every
// field of v must be a pointer and have a `json:"name"` tag; a field absent
// from the body stays nil, so the caller can tell "not sent" from a zero
// value. An absent body is an empty object.
//
// Decoding is strict, and its errors are *Error texts that use noun for a
// key: `unknown option "foo"`, `duplicate option "timeout"`,
// `option "timeout" must be an integer` (null is never a value of the right
// type). Keys match tags exactly, case included.
func Decode(h Header, v any, noun string) error {
	fields, err := fieldsOf(v)
	if err != nil {
		return err
	}
	if len(h.Body) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(h.Body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return errorf("%q takes a JSON object", h.Verb)
	}
	seen := make(map[string]bool, len(fields))
	for dec.More() {
		key, raw, err := nextMember(dec)
		if err != nil {
			return errorf("malformed JSON after %q: %v", h.Verb, err)
		}
		field, ok := fields[key]
		if !ok {
			return errorf("unknown %s %q", noun, key)
		}
		if seen[key] {
			return errorf("duplicate %s %q", noun, key)
		}
		seen[key] = true
		if err := setField(field, raw); err != nil {
			return errorf("%s %q must be %s", noun, key, kindWord(field.Type().Elem()))
		}
	}
	return nil
}

// nextMember reads one "key": value pair of an object.
func nextMember(dec *json.Decoder) (string, json.RawMessage, error) {
	tok, err := dec.Token()
	if err != nil {
		return "", nil, err
	}
	key, ok := tok.(string)
	if !ok {
		return "", nil, fmt.Errorf("object key is not a string")
	}
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return "", nil, err
	}
	return key, raw, nil
}

// setField decodes raw into the pointer field, allocating its value.
func setField(field reflect.Value, raw json.RawMessage) error {
	if bytes.Equal(raw, []byte("null")) {
		return fmt.Errorf("null")
	}
	p := reflect.New(field.Type().Elem())
	if err := json.Unmarshal(raw, p.Interface()); err != nil {
		return err
	}
	field.Set(p)
	return nil
}

// fieldsOf maps the JSON names of the struct v points to onto its fields.
func fieldsOf(v any) (map[string]reflect.Value, error) {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("wire: Decode needs a pointer to a struct, not %T", v)
	}
	s := rv.Elem()
	fields := make(map[string]reflect.Value, s.NumField())
	for i := range s.NumField() {
		f := s.Type().Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" || f.Type.Kind() != reflect.Pointer {
			return nil, fmt.Errorf("wire: field %s of %T needs a json tag and a pointer type", f.Name, v)
		}
		fields[name] = s.Field(i)
	}
	return fields, nil
}

// kindWord names the JSON type a Go type decodes from.
func kindWord(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "an array"
	default:
		return "an object"
	}
}
