package jobsapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

	"github.com/usherhq/usher/internal/jobs"
	"github.com/usherhq/usher/jobtype"
)

// emptyKeys refuses an idempotency key given as "", which decoding does
// not tell from one left out. It decodes the body again only when a job
// without a key sits beside a body that names the field.
func emptyKeys(raw []byte, specs []jobtype.JobSpec) error {
	if !bytes.Contains(raw, keyField) {
		return nil
	}
	if !slices.ContainsFunc(specs, func(sp jobtype.JobSpec) bool { return sp.IdempotencyKey == "" }) {
		return nil
	}
	return givenKeys(raw, func(i int, key string) error {
		if key == "" {
			return jobs.EmptyKeyError(i)
		}
		return nil
	})
}

// keysInWorkflow refuses an idempotency key in a workflow's job, even
// an empty one.
func keysInWorkflow(raw []byte) error {
	if !bytes.Contains(raw, keyField) {
		return nil
	}
	return givenKeys(raw, func(i int, _ string) error { return jobs.KeyInWorkflowError(i) })
}

var keyField = []byte(`"idempotencyKey"`)

// givenKeys calls f for each job of the body (a list under "jobs") that
// gives an idempotency key, and returns its first error.
func givenKeys(raw []byte, f func(i int, key string) error) error {
	var keys struct {
		Jobs []struct {
			Key *string `json:"idempotencyKey"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(raw, &keys); err != nil {
		return bodyError(err)
	}
	for i, j := range keys.Jobs {
		if j.Key != nil {
			if err := f(i, *j.Key); err != nil {
				return err
			}
		}
	}
	return nil
}

// requestKey is the request's own idempotency key, from its
// Idempotency-Key header ("" when there is none); the header given empty
// or twice is refused.
func requestKey(r *http.Request) (string, error) {
	vals := r.Header.Values(jobs.RequestKeyField)
	switch {
	case len(vals) == 0:
		return "", nil
	case len(vals) > 1:
		return "", &jobs.FieldError{Field: jobs.RequestKeyField, Msg: "given more than once", Kind: jobs.ErrInvalid}
	case vals[0] == "":
		return "", &jobs.FieldError{Field: jobs.RequestKeyField, Kind: jobs.ErrInvalid,
			Msg: fmt.Sprintf("empty: a key is 1-%d bytes (leave the header out for none)", jobs.MaxIdempotencyKey)}
	}
	return vals[0], nil
}
