package jobs

import (
	"errors"
	"fmt"
)

// Error kinds; the API maps them to HTTP statuses. Errors the engine
// returns wrap one of them and name the field or value at fault.
var (
	// ErrInvalid: the request is malformed or names something that cannot be.
	ErrInvalid = errors.New("invalid")
	// ErrNotFound: the queue, job, workflow or agent named does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict: the request is fine but the current state forbids it.
	ErrConflict = errors.New("conflict")
	// ErrStore: the durable store failed; nothing was acknowledged.
	ErrStore = errors.New("store")
)

// FieldError is an error about one field of a request.
type FieldError struct {
	Field string // e.g. "jobs[3].queue"
	Msg   string
	Kind  error // ErrInvalid, ErrNotFound or ErrConflict
	// Cycle lists the jobs of a dependency cycle, when that is the fault.
	Cycle []string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Msg
	}
	return e.Field + ": " + e.Msg
}

// Unwrap gives the kind, so that errors.Is(err, ErrInvalid) holds.
func (e *FieldError) Unwrap() error { return e.Kind }

func invalid(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...), Kind: ErrInvalid}
}

func notFound(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...), Kind: ErrNotFound}
}

func conflict(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...), Kind: ErrConflict}
}

// prefixed puts a path in front of a FieldError's field.
func prefixed(prefix string, err error) error {
	var fe *FieldError
	if errors.As(err, &fe) {
		c := *fe
		if c.Field == "" {
			c.Field = prefix
		} else {
			c.Field = prefix + "." + c.Field
		}
		return &c
	}
	return fmt.Errorf("%s: %w", prefix, err)
}
