package renderapi

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/usherhq/usher/internal/jobsapi"
	"github.com/usherhq/usher/internal/openapitest"
)

// recorder is a Mux that keeps the patterns Register adds.
type recorder []string

func (r *recorder) Handle(pattern string, _ http.Handler) { *r = append(*r, pattern) }

// Every route Register adds (but the CORS preflights) has an operation in
// the OpenAPI document with the same path parameters and the query
// parameters the route takes, and every render operation of the document
// has a route. The answers are checked against it in internal/service
// (TestOpenAPIRenderAnswers), which runs real asy.
func TestOpenAPIRenderRoutes(t *testing.T) {
	doc := openapitest.Load(t, jobsapi.OpenAPI())
	ops := map[string]openapitest.Operation{}
	for _, o := range doc.Operations("/") {
		if slices.Contains(anyStrings(o.Obj["tags"]), "render") {
			ops[o.String()] = o
		}
	}
	var rec recorder
	id := func(h http.Handler) http.Handler { return h }
	(&API{}).Register(&rec, id, id)
	takes := map[string][]string{"GET /api/render": queryParams, "POST /api/render": postParams}
	seen := map[string]bool{}
	for _, pattern := range rec {
		if strings.HasPrefix(pattern, http.MethodOptions+" ") {
			continue // CORS preflights, which the document does not describe
		}
		seen[pattern] = true
		o, ok := ops[pattern]
		if !ok {
			t.Errorf("route %s has no operation tagged render in the OpenAPI document", pattern)
			continue
		}
		var inPattern []string
		for _, m := range openapitest.PathParams.FindAllStringSubmatch(pattern, -1) {
			inPattern = append(inPattern, m[1])
		}
		if got := o.Params("path"); !slices.Equal(got, inPattern) {
			t.Errorf("%s: path parameters %q in the document; the pattern has %q", pattern, got, inPattern)
		}
		want := slices.Sorted(slices.Values(takes[pattern]))
		if got := o.Params("query"); !slices.Equal(got, want) {
			t.Errorf("%s: query parameters %q in the document; the route takes %q", pattern, got, want)
		}
	}
	for name := range ops {
		if !seen[name] {
			t.Errorf("the OpenAPI document describes %s, which Register does not add", name)
		}
	}
}

func anyStrings(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, s := range l {
		if str, ok := s.(string); ok {
			out = append(out, str)
		}
	}
	return out
}
