package jobsapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/usherhq/usher/internal/jobs"
)

// timeFields are the JSON fields of the API that hold an RFC 3339 time.
var timeFields = map[string]bool{"runAt": true, "deadline": true}

// timeError turns the error of a time field that did not parse (which
// encoding/json reports without the field) into one that names the
// field, found in the body; ok is false for any other error.
func timeError(err error, body []byte) (error, bool) {
	var pe *time.ParseError
	if !errors.As(err, &pe) && !strings.HasPrefix(err.Error(), "Time.UnmarshalJSON") {
		return nil, false
	}
	var v any
	if json.Unmarshal(body, &v) != nil {
		return nil, false
	}
	field := badTime(v, "")
	if field == "" {
		field = "body"
	}
	return &jobs.FieldError{Field: field, Msg: "not an RFC 3339 time (e.g. 2026-01-02T15:04:05Z)", Kind: jobs.ErrInvalid}, true
}

// badTime returns the path of the first time field in v whose value is
// not an RFC 3339 time string, or "".
func badTime(v any, path string) string {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := k
			if path != "" {
				p = path + "." + k
			}
			if timeFields[k] {
				if s, ok := x[k].(string); !ok || !validTime(s) {
					return p
				}
				continue
			}
			if f := badTime(x[k], p); f != "" {
				return f
			}
		}
	case []any:
		for i, e := range x {
			if f := badTime(e, fmt.Sprintf("%s[%d]", path, i)); f != "" {
				return f
			}
		}
	}
	return ""
}

func validTime(s string) bool {
	var t time.Time
	return t.UnmarshalJSON([]byte(`"`+s+`"`)) == nil
}
