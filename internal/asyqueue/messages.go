package asyqueue

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

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

// optionsBody is an `options` header.
type optionsBody struct {
	Interactive *bool   `json:"interactive"`
	Timeout     *int64  `json:"timeout"`
	Format      *string `json:"format"`
	Stderr      *string `json:"stderr"`
	Verbosity   *int    `json:"verbosity"`
}

// missingFile is one entry of a `missing` message.
type missingFile struct {
	Filename string `json:"filename"`
	Hash     string `json:"hash"`
}

// queueBody is a `queue` message; Estimate is in milliseconds.
type queueBody struct {
	Passed   bool   `json:"passed"`
	Estimate *int64 `json:"estimate,omitempty"`
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

// options are a task's settings once every `options` message is applied.
type options struct {
	Interactive    bool
	Timeout        time.Duration // 0: a "default" task
	Format         string
	SeparateStderr bool
	Verbosity      int
}

func defaultOptions() options { return options{Format: sandbox.FormatSVG} }

// apply merges one `options` message into o, checking every value.
func (o *options) apply(h wire.Header, timeouts []time.Duration) error {
	var b optionsBody
	if err := wire.Decode(h, &b, "option"); err != nil {
		return err
	}
	if b.Timeout != nil {
		d := time.Duration(*b.Timeout) * time.Millisecond
		if !slices.Contains(timeouts, d) {
			return fmt.Errorf("option \"timeout\" must be one of %s (milliseconds)", listMillis(timeouts))
		}
		o.Timeout = d
	}
	if b.Format != nil {
		switch *b.Format {
		case sandbox.FormatSVG, sandbox.FormatPDF, sandbox.FormatPNG:
			o.Format = *b.Format
		default:
			return fmt.Errorf("option \"format\" must be \"svg\", \"pdf\" or \"png\"")
		}
	}
	if b.Stderr != nil {
		switch *b.Stderr {
		case "stdout":
			o.SeparateStderr = false
		case "separate":
			o.SeparateStderr = true
		default:
			return fmt.Errorf("option \"stderr\" must be \"separate\" or \"stdout\"")
		}
	}
	if b.Verbosity != nil {
		if *b.Verbosity < 0 || *b.Verbosity > 3 {
			return fmt.Errorf("option \"verbosity\" must be 0, 1, 2 or 3")
		}
		o.Verbosity = *b.Verbosity
	}
	if b.Interactive != nil {
		o.Interactive = *b.Interactive
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
