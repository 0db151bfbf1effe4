package jobs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"unicode"
	"unicode/utf8"

	"github.com/usherhq/usher/jobtype"
)

// checkLabels validates a job's tags and metadata, the labels a user
// finds and reads it by, and drops repeated tags (docs/api.md, "Tags and
// metadata").
func checkLabels(sp *jobtype.JobSpec) error {
	if len(sp.Tags) > jobtype.MaxTags {
		return invalid("tags", "%d tags, over the limit of %d", len(sp.Tags), jobtype.MaxTags)
	}
	for i, t := range sp.Tags {
		if err := checkTag(t); err != nil {
			return invalid(fmt.Sprintf("tags[%d]", i), "%v", err)
		}
	}
	if len(sp.Tags) > 1 {
		tags := make([]string, 0, len(sp.Tags))
		for _, t := range sp.Tags {
			if !slices.Contains(tags, t) {
				tags = append(tags, t)
			}
		}
		sp.Tags = tags
	}
	if len(sp.Metadata) == 0 {
		return nil
	}
	if len(sp.Metadata) > jobtype.MaxMetadataBytes {
		return invalid("metadata", "%d bytes, over the limit of %d", len(sp.Metadata), jobtype.MaxMetadataBytes)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(sp.Metadata, &obj); err != nil || obj == nil {
		return invalid("metadata", "must be a JSON object")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, sp.Metadata); err != nil {
		return invalid("metadata", "must be a JSON object")
	}
	sp.Metadata = buf.Bytes()
	return nil
}

// checkTag says what is wrong with a tag, if anything: it is 1 to
// MaxTagBytes bytes of valid UTF-8, each rune printable and not a space.
func checkTag(t string) error {
	if t == "" || len(t) > jobtype.MaxTagBytes {
		return fmt.Errorf("a tag is 1-%d bytes", jobtype.MaxTagBytes)
	}
	if !utf8.ValidString(t) {
		return fmt.Errorf("a tag is UTF-8 text")
	}
	for _, r := range t {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) {
			return fmt.Errorf("%q holds a space or a control character", t)
		}
	}
	return nil
}
