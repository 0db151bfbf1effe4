package jobsapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/jobsapi"
	"github.com/usherhq/usher/internal/jobsapi/jobsapitest"
	"github.com/usherhq/usher/internal/openapitest"
	"github.com/usherhq/usher/internal/tokens"
)

// These tests keep openapi.json, the OpenAPI document of /v1 (docs/api.md,
// "The OpenAPI document"), true to the server: its operations are the
// route table's, with the parameters the handlers read, and the answers
// of a real server (real engine, real SQLite file) match its schemas,
// which refuse any field they do not name.

// Every route of the table has an operation with the same method, path,
// path parameters and roles, and reads the query parameters the
// operation names (found in the handler's code); every operation of /v1
// has a route.
func TestOpenAPIRoutes(t *testing.T) {
	doc := openapitest.Load(t, jobsapi.OpenAPI())
	ops := map[string]openapitest.Operation{}
	for _, o := range doc.Operations("/v1/") {
		ops[o.String()] = o
	}
	reads := handlerReads(t)
	seen := map[string]bool{}
	for _, rt := range jobsapi.Routes() {
		seen[rt.Pattern] = true
		o, ok := ops[rt.Pattern]
		if !ok {
			t.Errorf("route %s has no operation in openapi.json", rt.Pattern)
			continue
		}
		var inPattern []string
		for _, m := range openapitest.PathParams.FindAllStringSubmatch(rt.Pattern, -1) {
			inPattern = append(inPattern, m[1])
		}
		sort.Strings(inPattern)
		r := reads[rt.Handler]
		if got := o.Params("path"); !slices.Equal(got, inPattern) || !slices.Equal(r.path, inPattern) {
			t.Errorf("%s: path parameters %q in the document, %q read by %s; the pattern has %q", rt.Pattern, got, r.path, rt.Handler, inPattern)
		}
		if got := o.Params("query"); !slices.Equal(got, r.query) {
			t.Errorf("%s: query parameters %q in the document; %s reads %q", rt.Pattern, got, rt.Handler, r.query)
		}
		roles, public := o.Roles()
		slices.Sort(rt.Roles)
		if public != rt.Public || !slices.Equal(roles, rt.Roles) {
			t.Errorf("%s: the document's security allows roles %q (no token: %v); the route allows %q (no token: %v)", rt.Pattern, roles, public, rt.Roles, rt.Public)
		}
	}
	for name, o := range ops {
		if !seen[name] {
			t.Errorf("openapi.json describes %s, which no route serves", o)
		}
	}
}

// reads are the parameters a handler reads, by name.
type reads struct{ path, query []string }

// handlerReads scans the package's code: for each api method, the
// literal names it (and the package's functions and api methods it
// calls) passes to r.PathValue and to Get, Has or an index of a
// url.Values (r.URL.Query(), or a parameter of type url.Values). A name
// that is not a string literal fails the test: the scan could not see it.
func handlerReads(t *testing.T) map[string]reads {
	t.Helper()
	fset := token.NewFileSet()
	funcs := map[string]*ast.FuncDecl{}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok {
				funcs[funcKey(fd)] = fd
			}
		}
	}
	out := map[string]reads{}
	for key := range funcs {
		method, ok := strings.CutPrefix(key, "api.")
		if !ok {
			continue
		}
		sc := &scan{t: t, fset: fset, funcs: funcs, visited: map[string]bool{}, path: map[string]bool{}, query: map[string]bool{}}
		sc.visit(key)
		out[method] = reads{path: sortedKeys(sc.path), query: sortedKeys(sc.query)}
	}
	return out
}

func funcKey(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	typ := fd.Recv.List[0].Type
	if st, ok := typ.(*ast.StarExpr); ok {
		typ = st.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}

type scan struct {
	t           *testing.T
	fset        *token.FileSet
	funcs       map[string]*ast.FuncDecl
	visited     map[string]bool
	path, query map[string]bool
}

func (sc *scan) visit(key string) {
	fd := sc.funcs[key]
	if fd == nil || sc.visited[key] || fd.Body == nil {
		return
	}
	sc.visited[key] = true
	values := map[string]bool{} // identifiers holding a url.Values
	for _, p := range fd.Type.Params.List {
		if sel, ok := p.Type.(*ast.SelectorExpr); ok && sel.Sel.Name == "Values" {
			for _, n := range p.Names {
				values[n.Name] = true
			}
		}
	}
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.AssignStmt:
			for i, rhs := range x.Rhs {
				if isQueryCall(rhs) && i < len(x.Lhs) {
					if id, ok := x.Lhs[i].(*ast.Ident); ok {
						values[id.Name] = true
					}
				}
			}
		case *ast.SelectorExpr:
			if x.Sel.Name == "RawQuery" {
				sc.t.Errorf("%s: %s reads the raw query string, whose parameters this scan cannot see; read them with r.URL.Query()", sc.fset.Position(x.Pos()), key)
			}
		case *ast.IndexExpr:
			if holdsValues(x.X, values) {
				sc.literal(key, x.Index, sc.query)
			}
		case *ast.CallExpr:
			sc.call(key, x, values)
		}
		return true
	})
}

// call notes the parameters a call reads and visits the package's
// functions it calls. A query handed to a function of another package
// fails the test: the scan cannot follow it there.
func (sc *scan) call(key string, x *ast.CallExpr, values map[string]bool) {
	local := false
	switch fn := x.Fun.(type) {
	case *ast.Ident:
		local = sc.funcs[fn.Name] != nil
		sc.visit(fn.Name)
	case *ast.SelectorExpr:
		switch {
		case fn.Sel.Name == "PathValue" && len(x.Args) == 1:
			sc.literal(key, x.Args[0], sc.path)
			return
		case (fn.Sel.Name == "Get" || fn.Sel.Name == "Has") && len(x.Args) == 1 && holdsValues(fn.X, values):
			sc.literal(key, x.Args[0], sc.query)
			return
		}
		if _, ok := fn.X.(*ast.Ident); ok && sc.funcs["api."+fn.Sel.Name] != nil {
			local = true
			sc.visit("api." + fn.Sel.Name)
		}
	}
	for _, arg := range x.Args {
		if holdsValues(arg, values) && !local {
			sc.t.Errorf("%s: %s hands the query to a function outside package jobsapi, where the OpenAPI test cannot see which parameters it reads; read them in package jobsapi", sc.fset.Position(arg.Pos()), key)
		}
	}
}

func holdsValues(e ast.Expr, values map[string]bool) bool {
	if id, ok := e.(*ast.Ident); ok {
		return values[id.Name]
	}
	return isQueryCall(e)
}

// isQueryCall says whether e is a call of a method Query without
// arguments (r.URL.Query()).
func isQueryCall(e ast.Expr) bool {
	c, ok := e.(*ast.CallExpr)
	if !ok || len(c.Args) != 0 {
		return false
	}
	sel, ok := c.Fun.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == "Query"
}

func (sc *scan) literal(key string, e ast.Expr, into map[string]bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		sc.t.Errorf("%s: %s reads a parameter whose name is not a string literal; the OpenAPI test cannot check it", sc.fset.Position(e.Pos()), key)
		return
	}
	s, _ := strconv.Unquote(lit.Value)
	into[s] = true
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Every struct of package jobtype (the wire types) has a schema naming it
// in x-go-type, with exactly its JSON fields, so that a field added to a
// type that the answers below do not show (one only clients send, say)
// still fails until the document has it.
func TestOpenAPIWireTypes(t *testing.T) {
	doc := openapitest.Load(t, jobsapi.OpenAPI()).Raw
	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
	byType := map[string]string{}
	for name, s := range schemas {
		if gt, ok := s.(map[string]any)["x-go-type"].(string); ok {
			if prev, dup := byType[gt]; dup {
				t.Errorf("schemas %s and %s both name Go type %s", prev, name, gt)
			}
			byType[gt] = name
		}
	}
	structs := jobtypeStructs(t)
	for typ, fields := range structs {
		name, ok := byType[typ]
		if !ok {
			t.Errorf("jobtype.%s has no schema in openapi.json (one with \"x-go-type\": %q)", typ, typ)
			continue
		}
		props := openapitest.Props(t, doc, schemas[name].(map[string]any))
		var lacks, extra []string
		for _, f := range fields {
			if !props[f] {
				lacks = append(lacks, f)
			}
			delete(props, f)
		}
		extra = sortedKeys(props)
		if len(lacks) > 0 {
			t.Errorf("schema %s lacks the JSON fields %q of jobtype.%s", name, lacks, typ)
		}
		if len(extra) > 0 {
			t.Errorf("schema %s names the properties %q, which jobtype.%s does not have", name, extra, typ)
		}
	}
	for typ, name := range byType {
		if _, ok := structs[typ]; !ok {
			t.Errorf("schema %s names Go type %s, which package jobtype does not define", name, typ)
		}
	}
}

// jobtypeStructs returns each struct type of package jobtype with its
// JSON field names (embedded structs flattened), read from its source.
func jobtypeStructs(t *testing.T) map[string][]string {
	t.Helper()
	fset := token.NewFileSet()
	dir := filepath.Join("..", "..", "jobtype")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]*ast.StructType{}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if ts, ok := n.(*ast.TypeSpec); ok {
				if st, ok := ts.Type.(*ast.StructType); ok && ts.Name.IsExported() {
					types[ts.Name.Name] = st
				}
			}
			return true
		})
	}
	out := map[string][]string{}
	for name, st := range types {
		fields := map[string]bool{}
		jsonFields(types, st, fields)
		out[name] = sortedKeys(fields)
	}
	return out
}

func jsonFields(types map[string]*ast.StructType, st *ast.StructType, into map[string]bool) {
	for _, f := range st.Fields.List {
		tag := ""
		if f.Tag != nil {
			s, _ := strconv.Unquote(f.Tag.Value)
			tag, _, _ = strings.Cut(reflect.StructTag(s).Get("json"), ",")
		}
		if tag == "-" {
			continue
		}
		if len(f.Names) == 0 { // embedded
			if id, ok := f.Type.(*ast.Ident); ok && tag == "" && types[id.Name] != nil {
				jsonFields(types, types[id.Name], into)
				continue
			}
		}
		for _, n := range f.Names {
			if !n.IsExported() {
				continue
			}
			if tag == "" {
				into[n.Name] = true
			} else {
				into[tag] = true
			}
		}
	}
}

// apiChecker sends requests to a real server and checks each request
// and answer against the document (openapitest.Doc.Check).
type apiChecker struct {
	t   *testing.T
	s   *jobsapitest.Server
	doc *openapitest.Doc
}

// request is one call: token "" sends none; hdr adds headers; a string
// body is sent as text/plain, anything else as JSON. bad marks a body
// the document refuses on purpose (a request that must fail).
type request struct {
	method, path string
	token        string
	body         any
	hdr          http.Header
	bad          bool
}

// do sends r, checks the answer against the document, fails the test
// unless its status is want, and returns the body.
func (ck *apiChecker) do(r request, want int) []byte {
	ck.t.Helper()
	raw := []byte(nil)
	ctype := "application/json"
	switch b := r.body.(type) {
	case nil:
	case string:
		raw, ctype = []byte(b), "text/plain"
	default:
		var err error
		if raw, err = json.Marshal(b); err != nil {
			ck.t.Fatal(err)
		}
	}
	req, err := http.NewRequest(r.method, ck.s.URL+r.path, bytes.NewReader(raw))
	if err != nil {
		ck.t.Fatal(err)
	}
	for k, v := range r.hdr {
		req.Header[k] = v
	}
	if raw != nil {
		req.Header.Set("Content-Type", ctype)
	}
	if r.token != "" {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	o, ok := ck.doc.Find(req)
	if !ok {
		ck.t.Fatalf("%s %s: no operation of the document matches", r.method, r.path)
	}
	if raw != nil && ctype == "application/json" && !r.bad {
		ck.doc.CheckRequest(ck.t, o, raw)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		ck.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		ck.t.Fatal(err)
	}
	if resp.StatusCode != want {
		ck.t.Fatalf("%s %s = %d %s; want %d", r.method, r.path, resp.StatusCode, body, want)
	}
	ck.doc.Check(ck.t, o, resp, body)
	return body
}

// decodeAs decodes an answer.
func decodeAs[T any](t *testing.T, data []byte) T {
	t.Helper()
	var out T
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	return out
}

// Every operation of /v1, run against a real server, answers a success
// and an error that the document declares, with bodies its schemas
// accept; a request with no token, or with a role the operation does not
// allow, answers as the document says.
func TestOpenAPIAnswers(t *testing.T) {
	s := jobsapitest.Start(t)
	ck := &apiChecker{t: t, s: s, doc: openapitest.Load(t, jobsapi.OpenAPI())}
	client := newToken(t, s, tokens.Client)
	agent := newToken(t, s, tokens.Agent)
	admin := s.AdminToken
	do := func(method, path string, body any, want int) []byte {
		t.Helper()
		return ck.do(request{method: method, path: path, token: admin, body: body}, want)
	}
	bad := func(method, path string, body any, want int) {
		t.Helper()
		ck.do(request{method: method, path: path, token: admin, body: body, bad: true}, want)
	}

	doc := ck.do(request{method: "GET", path: "/v1/openapi.json"}, 200)
	if !bytes.Equal(doc, jobsapi.OpenAPI()) {
		t.Errorf("GET /v1/openapi.json is not the embedded document")
	}

	// Queues and limits.
	do("POST", "/v1/queues", map[string]any{"name": "q", "requires": []string{"net"}, "retry": map[string]any{"maxAttempts": 3, "backoff": map[string]any{"policy": "linear", "baseMs": 10, "maxMs": 100}}}, 201)
	do("POST", "/v1/queues", map[string]any{"name": "plain"}, 201)
	do("POST", "/v1/queues", map[string]any{"name": "strict", "order": "strict", "strictStart": true, "active": true, "batch": 2, "priority": 1}, 201)
	do("POST", "/v1/queues", map[string]any{"name": "q"}, 409)
	do("GET", "/v1/queues", nil, 200)
	do("GET", "/v1/queues/q", nil, 200)
	do("GET", "/v1/queues/nope", nil, 404)
	do("PATCH", "/v1/queues/plain", map[string]any{"priority": 2, "requires": []string{}, "retry": map[string]any{"maxAttempts": 2, "backoffMs": 5, "maxBackoffMs": 50}}, 200)
	bad("PATCH", "/v1/queues/plain", map[string]any{"priority": "high"}, 400)
	do("POST", "/v1/queues", map[string]any{"name": "gone"}, 201)
	do("DELETE", "/v1/queues/gone", nil, 204)
	do("DELETE", "/v1/queues/gone", nil, 404)
	do("PUT", "/v1/limits", map[string]any{"pattern": "net:*", "limit": 2}, 200)
	do("PUT", "/v1/limits", map[string]any{"pattern": "api:x", "limit": 0, "rate": "1/h", "burst": 1}, 200)
	bad("PUT", "/v1/limits", map[string]any{"pattern": "api:y", "limit": 0, "rate": "0/s"}, 400)
	do("GET", "/v1/limits", nil, 200)

	// Jobs.
	soon := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	later := time.Now().Add(2 * time.Hour).UTC().Format(time.RFC3339)
	ids := decodeAs[struct{ IDs []string }](t, do("POST", "/v1/jobs", map[string]any{"jobs": []any{
		map[string]any{"queue": "plain", "payload": map[string]any{"a": 1}, "keys": []string{"net:1"}, "priority": 3, "tier": "fast",
			"retry": map[string]any{"maxAttempts": 2}, "backoff": map[string]any{"policy": "constant", "baseMs": 5}},
		map[string]any{"queue": "plain", "payload": "rated", "keys": []string{"api:x"}, "group": "g", "mode": "write", "timeoutMs": 1000},
		map[string]any{"queue": "plain", "runAt": soon, "deadline": later},
		map[string]any{"queue": "plain", "delayMs": 3_600_000, "idempotencyKey": "k1"},
		map[string]any{"queue": "plain", "payload": 7, "unique": map[string]any{"byArgs": true, "byPeriodMs": 60000, "states": []string{"queued"}}},
		map[string]any{"queue": "strict", "payload": []int{1}},
	}}, 201)).IDs
	jobRun, jobScheduled, jobDelayed, jobStrict := ids[0], ids[2], ids[3], ids[5]
	ck.do(request{method: "POST", path: "/v1/jobs", token: client, hdr: http.Header{"Idempotency-Key": {"req-1"}},
		body: map[string]any{"jobs": []any{map[string]any{"queue": "plain", "idempotencyKey": "k1"}}}}, 201)
	again := ck.do(request{method: "POST", path: "/v1/jobs", token: client, hdr: http.Header{"Idempotency-Key": {"req-1"}},
		body: map[string]any{"jobs": []any{map[string]any{"queue": "plain", "idempotencyKey": "k1"}}}}, 201)
	if !bytes.Contains(again, []byte(`"existing":[true]`)) {
		t.Errorf("a repeated request answered %s; want existing", again)
	}
	ck.do(request{method: "POST", path: "/v1/jobs", token: client, hdr: http.Header{"Idempotency-Key": {"req-1"}},
		body: map[string]any{"jobs": []any{map[string]any{"queue": "plain"}, map[string]any{"queue": "plain"}}}}, 409)
	do("POST", "/v1/jobs", map[string]any{"jobs": []any{map[string]any{"queue": "nope"}}}, 400)
	do("POST", "/v1/queues/q/targets", "10.0.0.1\nexample.com:443\n", 201)
	do("POST", "/v1/queues/nope/targets", "10.0.0.1\n", 404)
	page := decodeAs[struct{ Next string }](t, do("GET", "/v1/jobs?queue=plain&state=queued&limit=2", nil, 200))
	do("GET", "/v1/jobs?limit=2&after="+page.Next, nil, 200)
	do("GET", "/v1/jobs?workflow=none", nil, 200)
	do("GET", "/v1/jobs?limit=0", nil, 400)
	do("GET", "/v1/jobs/"+jobScheduled, nil, 200)
	do("GET", "/v1/jobs/999999", nil, 404)
	do("POST", "/v1/jobs/"+jobDelayed+"/run", nil, 200)
	do("POST", "/v1/jobs/"+jobDelayed+"/run", nil, 409)
	do("POST", "/v1/jobs/999999/run", nil, 404)
	do("POST", "/v1/jobs/"+jobScheduled+"/cancel", nil, 200)
	do("POST", "/v1/jobs/"+jobScheduled+"/cancel", nil, 409)
	do("POST", "/v1/jobs/999999/cancel", nil, 404)
	do("POST", "/v1/jobs/"+jobScheduled+"/retry", nil, 200)
	do("POST", "/v1/jobs/"+jobScheduled+"/retry", nil, 409)
	do("POST", "/v1/jobs/999999/retry", nil, 404)

	// Workflows.
	wf := decodeAs[struct{ ID string }](t, do("POST", "/v1/workflows", map[string]any{"name": "w",
		"jobs":  []any{map[string]any{"name": "a", "queue": "plain"}, map[string]any{"name": "b", "queue": "plain", "after": []string{"a"}}},
		"edges": []any{map[string]any{"from": "a", "to": "b"}}}, 201)).ID
	cycle := do("POST", "/v1/workflows", map[string]any{"jobs": []any{
		map[string]any{"name": "a", "queue": "plain", "after": []string{"b"}}, map[string]any{"name": "b", "queue": "plain", "after": []string{"a"}}}}, 400)
	if !bytes.Contains(cycle, []byte(`"cycle"`)) {
		t.Errorf("a workflow with a cycle answered %s; want its cycle", cycle)
	}
	do("GET", "/v1/workflows/"+wf, nil, 200)
	do("GET", "/v1/workflows/"+wf+"?wait=1ms", nil, 200)
	do("GET", "/v1/workflows/"+wf+"?wait=soon", nil, 400)
	do("GET", "/v1/workflows/999999", nil, 404)

	// Agents: take work, confirm, report progress, renew, complete, leave.
	asAgent := func(path string, body any, want int) []byte {
		t.Helper()
		return ck.do(request{method: "POST", path: path, token: agent, body: body}, want)
	}
	badAgent := func(path string, body any, want int) {
		t.Helper()
		ck.do(request{method: "POST", path: path, token: agent, body: body, bad: true}, want)
	}
	type leased struct {
		ID      string
		Attempt int
	}
	got := decodeAs[struct{ Jobs []leased }](t, asAgent("/v1/agent/lease", map[string]any{"agent": "a1", "capabilities": []string{"net"}, "queues": []string{"strict"}, "slots": 4, "holding": []any{}}, 200)).Jobs
	if len(got) != 1 || got[0].ID != jobStrict {
		t.Fatalf("lease = %v; want job %s", got, jobStrict)
	}
	asAgent("/v1/agent/started", map[string]any{"agent": "a1", "id": jobStrict, "attempt": 1}, 200)
	badAgent("/v1/agent/started", map[string]any{"agent": "a1", "id": jobStrict, "attempt": 0}, 400)
	got = decodeAs[struct{ Jobs []leased }](t, asAgent("/v1/agent/lease", map[string]any{"agent": "a1", "queues": []string{"plain"}, "slots": 4, "max": 2, "waitMs": 0}, 200)).Jobs
	if len(got) == 0 || got[0].ID != jobRun {
		t.Fatalf("lease = %v; want job %s first", got, jobRun)
	}
	badAgent("/v1/agent/lease", map[string]any{"agent": "a1", "slots": 4, "queues": []string{"nope"}}, 400)
	asAgent("/v1/agent/progress", map[string]any{"agent": "a1", "id": jobRun, "attempt": 1, "value": 0.5, "message": "half"}, 200)
	badAgent("/v1/agent/progress", map[string]any{"agent": "a1", "id": jobRun, "attempt": 1, "value": 2}, 400)
	asAgent("/v1/agent/renew", map[string]any{"agent": "a1"}, 200)
	asAgent("/v1/agent/renew", map[string]any{"agent": "nobody"}, 404)
	results := []any{map[string]any{"id": jobRun, "attempt": 1, "exitCode": 0, "output": "done", "result": map[string]any{"rows": 12}},
		map[string]any{"id": jobStrict, "attempt": 1, "exitCode": 1, "error": "broke"}}
	for _, j := range got[1:] {
		results = append(results, map[string]any{"id": j.ID, "attempt": j.Attempt, "exitCode": 0, "snoozeMs": 60000})
	}
	badAgent("/v1/agent/complete", map[string]any{"agent": "a1", "results": []any{map[string]any{"id": jobRun, "attempt": 1, "exitCode": 1, "snoozeMs": 5, "cancel": true}}}, 400)
	asAgent("/v1/agent/complete", map[string]any{"agent": "a1", "results": results}, 200)
	do("GET", "/v1/jobs/"+jobRun, nil, 200)
	do("GET", "/v1/jobs?queue=strict&state=failed", nil, 200)
	asAgent("/v1/agent/leave", map[string]any{"agent": "a1"}, 204)
	badAgent("/v1/agent/leave", map[string]any{"agent": 1}, 400)
	do("GET", "/v1/stats", nil, 200)
	do("POST", "/v1/queues/plain/flush", nil, 200)
	do("POST", "/v1/queues/nope/flush", nil, 404)

	// Operating: tags and metadata, the listing's filters, bulk actions, delete.
	do("POST", "/v1/queues", map[string]any{"name": "ops"}, 201)
	opsIDs := decodeAs[struct{ IDs []string }](t, do("POST", "/v1/jobs", map[string]any{"jobs": []any{
		map[string]any{"queue": "ops", "tags": []string{"nightly", "eu"}, "metadata": map[string]any{"owner": "ops"}, "keys": []string{"db:1"}},
		map[string]any{"queue": "ops", "tags": []string{"nightly"}},
	}}, 201)).IDs
	from := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	do("GET", "/v1/jobs?queue=ops&key=db:1&tag=nightly&q=night&from="+from+"&to="+later+"&order=desc&limit=1", nil, 200)
	do("GET", "/v1/jobs?order=sideways", nil, 400)
	do("POST", "/v1/jobs/actions", map[string]any{"action": "cancel", "ids": []string{opsIDs[0]}}, 200)
	do("POST", "/v1/jobs/actions", map[string]any{"action": "retry", "filter": map[string]any{"queue": "ops", "state": "cancelled", "tag": "nightly"}, "limit": 1}, 200)
	bad("POST", "/v1/jobs/actions", map[string]any{"action": "explode", "ids": []string{opsIDs[0]}}, 400)
	do("DELETE", "/v1/jobs/"+opsIDs[1], nil, 204)
	do("DELETE", "/v1/jobs/"+opsIDs[1], nil, 404)
	do("GET", "/v1/jobs/"+opsIDs[0], nil, 200)
	do("GET", "/v1/whoami", nil, 200)

	// Tokens.
	tok := decodeAs[struct{ ID string }](t, do("POST", "/v1/tokens", map[string]any{"name": "t", "role": "client"}, 201)).ID
	bad("POST", "/v1/tokens", map[string]any{"name": "t", "role": "boss"}, 400)
	do("GET", "/v1/tokens", nil, 200)
	do("DELETE", "/v1/tokens/"+tok, nil, 204)
	do("DELETE", "/v1/tokens/"+tok, nil, 404)

	// Periodic jobs.
	do("POST", "/v1/cron", map[string]any{"name": "c", "spec": "@hourly", "queue": "q", "timezone": "Europe/Paris",
		"job": map[string]any{"payload": map[string]any{"k": "v"}, "priority": 1, "keys": []string{"net:x"}}}, 201)
	do("POST", "/v1/cron", map[string]any{"name": "c", "spec": "@hourly", "queue": "q"}, 409)
	do("GET", "/v1/cron", nil, 200)
	do("GET", "/v1/cron/c", nil, 200)
	do("GET", "/v1/cron/nope", nil, 404)
	do("PATCH", "/v1/cron/c", map[string]any{"paused": true}, 200)
	do("PATCH", "/v1/cron/nope", map[string]any{"paused": true}, 404)
	do("DELETE", "/v1/cron/c", nil, 204)
	do("DELETE", "/v1/cron/c", nil, 404)

	// Every operation without a token, and with a role it does not allow.
	for _, o := range ck.doc.Operations("/v1/") {
		roles, public := o.Roles()
		if public {
			continue
		}
		path := openapitest.PathParams.ReplaceAllString(o.Path, "x1")
		ck.do(request{method: o.Method, path: path}, 401)
		for role, secret := range map[string]string{"client": client, "agent": agent} {
			if !slices.Contains(roles, role) {
				ck.do(request{method: o.Method, path: path, token: secret}, 403)
			}
		}
	}
	ck.doc.Covered(t, "/v1/")
}

func newToken(t *testing.T, s *jobsapitest.Server, role tokens.Role) string {
	t.Helper()
	_, secret, err := s.Tokens.Create(context.Background(), "openapi-"+string(role), role)
	if err != nil {
		t.Fatal(fmt.Errorf("creating a %s token: %w", role, err))
	}
	return secret
}
