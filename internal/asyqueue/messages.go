package asyqueue

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/usherhq/usher/internal/backend"
	"github.com/usherhq/usher/internal/sandbox"
	"github.com/usherhq/usher/internal/wire"
)

// Verbs of the queue protocol a client may send.
var clientVerbs = []string{"add", "options", "run", "input"}

// addBody is an `add` header. Every field is a pointer: absent ≠ zero.
type addBody struct {
	Filename *string `json:"filename"`
	Main     *bool   `json:"main"`
	Hash     *string `json:"hash"`
	Restore  *bool   `json:"restore"`
}

// missingFile is one entry of a `missing` message.
type missingFile struct {
	Filename string `json:"filename"`
	Hash     string `json:"hash"`
}

// queueBody is a `queue` message; Estimate is in milliseconds. Position
// (the tasks ahead, while queued) is usher's addition to the queue protocol.
type queueBody struct {
	Passed   bool   `json:"passed"`
	Estimate *int64 `json:"estimate,omitempty"`
	Position *int   `json:"position,omitempty"`
}

type deniedBody struct {
	Error string `json:"error"`
}

type outputBody struct {
	Stream string `json:"stream"`
}

type resultBody struct {
	Format string `json:"format"`
}

type completeBody struct {
	Success bool   `json:"success"`
	Error   string `json:"error,omitempty"`
	Time    *int64 `json:"time,omitempty"`
}

// applyOptions merges one `options` message into t: the values the queue
// protocol allows (backend.OptionsBody.Check) and a timeout that is one of the
// tiers' (absent: a "default" task).
func applyOptions(t *sandbox.Task, h wire.Header, timeouts []time.Duration) error {
	var b backend.OptionsBody
	if err := wire.Decode(h, &b, "option"); err != nil {
		return err
	}
	if err := b.Check(); err != nil {
		return deny("%s", err.Error())
	}
	if b.Timeout != nil {
		d := time.Duration(*b.Timeout) * time.Millisecond
		if err := checkTimeout(d, timeouts); err != nil {
			return err
		}
		t.Timeout = d
	}
	b.MergeInto(t)
	return nil
}

// checkTimeout accepts a task timeout that is one of the tiers'.
func checkTimeout(d time.Duration, timeouts []time.Duration) error {
	if !slices.Contains(timeouts, d) {
		return deny("option \"timeout\" must be one of %s (milliseconds)", listMillis(timeouts))
	}
	return nil
}

func listMillis(ds []time.Duration) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = strconv.FormatInt(d.Milliseconds(), 10)
	}
	if len(parts) < 2 {
		return strings.Join(parts, "")
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " or " + parts[len(parts)-1]
}

// validHash reports whether h is a SHA-256 in lowercase hex.
func validHash(h string) bool {
	if len(h) != 64 {
		return false
	}
	for _, c := range h {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func millis(d time.Duration) *int64 {
	ms := d.Milliseconds()
	return &ms
}
