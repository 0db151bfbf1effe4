package jobsapi

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"

	"github.com/usherhq/usher/internal/jobs"
	"github.com/usherhq/usher/jobtype"
)

// readBody reads a request's body whole and leaves it readable again.
func readBody(r *http.Request) ([]byte, error) {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, bodyError(err)
	}
	r.Body = io.NopCloser(bytes.NewReader(raw))
	return raw, nil
}

// emptyKeys refuses an idempotency key given as "", which decoding does
// not tell from one left out. It decodes the body again only when a job
// without a key sits beside a body that names the field.
func emptyKeys(raw []byte, specs []jobtype.JobSpec) error {
	if !bytes.Contains(raw, []byte(`"idempotencyKey"`)) {
		return nil
	}
	if !slices.ContainsFunc(specs, func(sp jobtype.JobSpec) bool { return sp.IdempotencyKey == "" }) {
		return nil
	}
	var keys struct {
		Jobs []struct {
			Key *string `json:"idempotencyKey"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(raw, &keys); err != nil {
		return bodyError(err)
	}
	for i, j := range keys.Jobs {
		if j.Key != nil && *j.Key == "" {
			return jobs.EmptyKeyError(i)
		}
	}
	return nil
}
