// Package openapitest checks a server's answers against usher's OpenAPI
// document (internal/jobsapi/openapi.json; docs/api.md, "The OpenAPI
// document"), for the tests that keep the document true: each answer's
// status must be one its operation declares, and its body must match that
// status's schema, or its media type one the document names.
//
// Schemas are JSON Schema 2020-12, as OpenAPI 3.1 has them, and are
// checked with github.com/santhosh-tekuri/jsonschema/v6, formats
// (date-time) included.
package openapitest

import (
	"bytes"
	"fmt"
	"mime"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// docURL is the document's URL for the validator: references within it
// ("#/components/schemas/Job") resolve against it.
const docURL = "file:///openapi.json"

// Doc is a loaded document.
type Doc struct {
	// Raw is the document as decoded JSON (numbers as json.Number).
	Raw      map[string]any
	compiler *jsonschema.Compiler
	routes   *http.ServeMux // the operations, to find a request's
	ops      map[string]Operation

	mu      sync.Mutex
	schemas map[string]*jsonschema.Schema
	seen    map[string]map[int]bool
}

// Operation is one operation of the document.
type Operation struct {
	Method string // GET
	Path   string // /v1/jobs/{id}
	// Obj is the operation object.
	Obj map[string]any
}

func (o Operation) String() string { return o.Method + " " + o.Path }

// Load decodes and checks a document: OpenAPI 3.1, with a schema the
// validator compiles for every JSON request and answer it declares.
func Load(t testing.TB, data []byte) *Doc {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("the OpenAPI document does not parse: %v", err)
	}
	raw, ok := v.(map[string]any)
	if !ok || raw["openapi"] != "3.1.0" {
		t.Fatalf("the document is not an OpenAPI 3.1.0 document")
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource(docURL, raw); err != nil {
		t.Fatal(err)
	}
	d := &Doc{Raw: raw, compiler: c, routes: http.NewServeMux(), ops: map[string]Operation{},
		schemas: map[string]*jsonschema.Schema{}, seen: map[string]map[int]bool{}}
	for _, o := range d.Operations("") {
		d.ops[o.String()] = o
		d.routes.Handle(o.String(), http.NotFoundHandler())
	}
	return d
}

// Operations returns the operations whose path starts with prefix,
// sorted, leaving out CORS preflights (OPTIONS), which the document does
// not describe.
func (d *Doc) Operations(prefix string) []Operation {
	var out []Operation
	paths, _ := d.Raw["paths"].(map[string]any)
	for p, item := range paths {
		if !strings.HasPrefix(p, prefix) {
			continue
		}
		for m, o := range item.(map[string]any) {
			obj, ok := o.(map[string]any)
			if ok && m != "parameters" && m != "options" {
				out = append(out, Operation{Method: strings.ToUpper(m), Path: p, Obj: obj})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// Params returns the sorted names of the operation's parameters that are
// in where (path, query, header).
func (o Operation) Params(where string) []string {
	var out []string
	list, _ := o.Obj["parameters"].([]any)
	for _, p := range list {
		pm := p.(map[string]any)
		if pm["in"] == where {
			out = append(out, pm["name"].(string))
		}
	}
	sort.Strings(out)
	return out
}

// Roles returns the sorted roles the operation's bearer security accepts,
// and whether it needs no token at all (security: []).
func (o Operation) Roles() (roles []string, public bool) {
	sec, ok := o.Obj["security"].([]any)
	if !ok {
		return nil, false
	}
	if len(sec) == 0 {
		return nil, true
	}
	for _, req := range sec {
		bearer, _ := req.(map[string]any)["bearerAuth"].([]any)
		for _, r := range bearer {
			if !slices.Contains(roles, r.(string)) {
				roles = append(roles, r.(string))
			}
		}
	}
	sort.Strings(roles)
	return roles, false
}

// PathParams are the {name} segments of a path or pattern.
var PathParams = regexp.MustCompile(`\{([^}$.]+)(\.\.\.)?\$?\}`)

// Find returns the operation a request goes to, matched as the server's
// ServeMux matches its patterns.
func (d *Doc) Find(req *http.Request) (Operation, bool) {
	_, pattern := d.routes.Handler(req)
	o, ok := d.ops[pattern]
	return o, ok
}

// CheckRequest checks a JSON request body against the operation's
// request schema.
func (d *Doc) CheckRequest(t testing.TB, o Operation, body []byte) {
	t.Helper()
	d.validate(t, o, "request body", "/paths/"+escape(o.Path)+"/"+strings.ToLower(o.Method)+"/requestBody/content/application~1json/schema", body)
}

// Check checks an answer of operation o: its status is declared; a JSON
// answer matches the schema of its status; another has a media type the
// document names for it; an answer the document gives no content has no
// body. It records the status for Covered.
func (d *Doc) Check(t testing.TB, o Operation, resp *http.Response, body []byte) {
	t.Helper()
	code := strconv.Itoa(resp.StatusCode)
	d.mu.Lock()
	if d.seen[o.String()] == nil {
		d.seen[o.String()] = map[int]bool{}
	}
	d.seen[o.String()][resp.StatusCode] = true
	d.mu.Unlock()
	ptr := "/paths/" + escape(o.Path) + "/" + strings.ToLower(o.Method) + "/responses/" + code
	respObj, ok := o.Obj["responses"].(map[string]any)[code].(map[string]any)
	if !ok {
		t.Errorf("%s answered %d, which the document does not declare: %.300s", o, resp.StatusCode, body)
		return
	}
	if ref, ok := respObj["$ref"].(string); ok {
		respObj, ptr = Resolve(t, d.Raw, ref), strings.TrimPrefix(ref, "#")
	}
	content, _ := respObj["content"].(map[string]any)
	if content == nil {
		if len(body) != 0 {
			t.Errorf("%s answered %d with a body, for which the document declares none: %.300s", o, resp.StatusCode, body)
		}
		return
	}
	ct := resp.Header.Get("Content-Type")
	mt, _, _ := mime.ParseMediaType(ct)
	declared := false
	for k := range content {
		if dm, _, _ := mime.ParseMediaType(k); dm == mt {
			declared = true
		}
	}
	if !declared {
		t.Errorf("%s answered %d with Content-Type %q; the document declares %q", o, resp.StatusCode, ct, sortedKeys(content))
		return
	}
	if mt == "application/json" {
		d.validate(t, o, "answer "+code, ptr+"/content/application~1json/schema", body)
	}
}

// Covered fails t for each operation under prefix not seen to succeed,
// or not seen to answer one of the errors 400, 404 and 409 when it
// declares any of them.
func (d *Doc) Covered(t testing.TB, prefix string) {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, o := range d.Operations(prefix) {
		seen := d.seen[o.String()]
		var ok, failed, declared bool
		for code := range seen {
			ok = ok || code < 300
			failed = failed || code == 400 || code == 404 || code == 409
		}
		for _, code := range []string{"400", "404", "409"} {
			_, has := o.Obj["responses"].(map[string]any)[code]
			declared = declared || has
		}
		if !ok || (declared && !failed) {
			t.Errorf("%s: the test saw it answer %v; want a success and one of the errors 400, 404, 409 it declares", o, sortedInts(seen))
		}
	}
}

func (d *Doc) validate(t testing.TB, o Operation, what, ptr string, data []byte) {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		t.Errorf("%s: the %s is not JSON: %.300q", o, what, data)
		return
	}
	s, err := d.schema(ptr)
	if err != nil {
		t.Errorf("%s: the %s's schema does not compile: %v", o, what, err)
		return
	}
	if err := s.Validate(v); err != nil {
		t.Errorf("%s: the %s does not match the document (\"false schema\" at a field: the document does not name it): %s\n%v", o, what, data, err)
	}
}

// schema compiles the schema at a JSON pointer of the document.
func (d *Doc) schema(ptr string) (*jsonschema.Schema, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s, ok := d.schemas[ptr]; ok {
		return s, nil
	}
	s, err := d.compiler.Compile(docURL + "#" + ptr)
	if err != nil {
		return nil, fmt.Errorf("schema %s: %w", ptr, err)
	}
	d.schemas[ptr] = s
	return s, nil
}

func escape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// Resolve follows a local reference (#/a/b) in doc.
func Resolve(t testing.TB, doc map[string]any, ref string) map[string]any {
	t.Helper()
	var cur any = doc
	for _, tok := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			t.Fatalf("reference %s does not resolve", ref)
		}
		cur = m[tok]
	}
	m, ok := cur.(map[string]any)
	if !ok {
		t.Fatalf("reference %s does not resolve to an object", ref)
	}
	return m
}

// Props returns the property names of an object schema, following $ref
// and allOf.
func Props(t testing.TB, doc, s map[string]any) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	if ref, ok := s["$ref"].(string); ok {
		for k := range Props(t, doc, Resolve(t, doc, ref)) {
			out[k] = true
		}
	}
	all, _ := s["allOf"].([]any)
	for _, sub := range all {
		for k := range Props(t, doc, sub.(map[string]any)) {
			out[k] = true
		}
	}
	if props, ok := s["properties"].(map[string]any); ok {
		for k := range props {
			out[k] = true
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sortedInts(m map[int]bool) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}
