package jobsapi

import (
	"bytes"
	_ "embed" // openapi.json
	"net/http"
)

// openAPIDoc is the OpenAPI 3.1 document of /v1 and of the render API
// (docs/api.md, "The OpenAPI document"). openapi_test.go keeps it true:
// every route of the table has its operation and the other way round,
// with the same path and query parameters, and the answers of a real
// server match its schemas.
//
//go:embed openapi.json
var openAPIDoc []byte

// OpenAPI returns the OpenAPI document (a copy), for the render API's
// tests and for tools.
func OpenAPI() []byte { return bytes.Clone(openAPIDoc) }

// openAPI serves the document, to anyone: it holds no secret.
func (a *api) openAPI(w http.ResponseWriter, _ *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	_, err := w.Write(openAPIDoc)
	return err
}
