package redisjobs

import (
	"context"
	"strings"
	"testing"

	"github.com/usherhq/usher/internal/jobs"
	"github.com/usherhq/usher/internal/jobs/storetest"
	"github.com/usherhq/usher/internal/redisq"
	"github.com/usherhq/usher/internal/redisq/redistest"
)

// A job hash that is corrupt or foreign reads as a clear error naming the
// job and the field, from Job, Jobs and Load alike, and changes nothing.
func TestCorruptJobIsAClearError(t *testing.T) {
	ctx := context.Background()
	rdb := client(t, redistest.Start(t).URL())
	for _, tc := range []struct {
		name, field, value, want string
	}{
		{"state out of range", "st", "9", `job 1: field "st": state code 9`},
		{"state not a number", "st", "x", `job 1: field "st": "x" is not an integer`},
		{"spec not JSON", "spec", "{", `job 1: field "spec"`},
		{"attempt not a number", "att", "1.5", `job 1: field "att"`},
		{"dependencies not ids", "a", "1,,2", `job 1: field "a"`},
		{"exit code not a number", "x", "-", `job 1: field "x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keys := redisq.NewKeys("{" + tc.name + "}:")
			s := New(rdb, keys.Prefix(), Fence{}, nil)
			defer s.Close()
			storetest.Apply(t, s, storetest.Insert(1))
			if err := rdb.HSet(ctx, s.k.job(1), tc.field, tc.value).Err(); err != nil {
				t.Fatal(err)
			}
			_, errJob := s.Job(ctx, 1)
			_, errList := s.Jobs(ctx, jobsFilter())
			_, errLoad := s.Load(ctx)
			for what, err := range map[string]error{"Job": errJob, "Jobs": errList, "Load": errLoad} {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("%s = %v; want an error containing %q", what, err, tc.want)
				}
			}
		})
	}
}

// parseJob never panics: any hash is a job or an error.
func FuzzParseJob(f *testing.F) {
	f.Add("0", `{"queue":"q"}`, "0", "1700000000000", "", "1,2", "3")
	f.Add("4", `{}`, "x", "", "7", "", "")
	f.Add("-1", `null`, "1", "1", "1", "9999999999999999999999", "")
	f.Fuzz(func(t *testing.T, st, spec, att, created, started, after, exit string) {
		h := map[string]string{"st": st, "spec": spec, "att": att, "c": created, "a": after, "x": exit}
		if started != "" {
			h["s"] = started
		}
		j, err := parseJob(1, h)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "redisjobs: job 1: ") {
				t.Fatalf("error %q does not name the job", err)
			}
			return
		}
		_ = j.job()
		_ = j.record(map[int64]bool{1: true, 2: true})
	})
}

func jobsFilter() jobs.Filter { return jobs.Filter{Limit: 10} }
