package jobsapi

import (
	"reflect"
	"runtime"
	"strings"

	"github.com/usherhq/usher/internal/tokens"
)

// Route is a route of the table as openapi_test.go sees it.
type Route struct {
	Pattern string
	// Handler is the name of the api method that serves it.
	Handler string
	// Roles are the roles whose token may call it; Public: no token is needed.
	Roles  []string
	Public bool
}

// Routes returns the table of Handler.
func Routes() []Route {
	var out []Route
	for _, rt := range (&api{}).routes() {
		name := runtime.FuncForPC(reflect.ValueOf(rt.h).Pointer()).Name()
		name = strings.TrimSuffix(name[strings.LastIndex(name, ".")+1:], "-fm")
		r := Route{Pattern: rt.pattern, Handler: name, Public: rt.perm == permPublic}
		for _, role := range []tokens.Role{tokens.Admin, tokens.Client, tokens.Agent} {
			if !r.Public && rt.perm.allowedTo(role) {
				r.Roles = append(r.Roles, string(role))
			}
		}
		out = append(out, r)
	}
	return out
}
