package renderapi

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/usherhq/usher/internal/sandbox"
)

// Limits of the render API's requests beyond the queue's own (files per
// task, bytes of all files).
const (
	// MaxQuerySource is the most bytes of source GET /api/render?src= takes
	// (after URL decoding); longer sources use POST.
	MaxQuerySource = 8 << 10
	// maxRawQuery bounds the query string of GET /api/render: the source
	// percent-encoded at worst, and room for the other parameters.
	maxRawQuery = 3*MaxQuerySource + 256
	// multipartOverhead is what a multipart body may carry beyond its
	// files' bytes: boundaries, part headers and fields.
	multipartOverhead = 64 << 10
	// maxFieldBytes bounds one non-file field of a multipart body.
	maxFieldBytes = 64
)

// queryParams are the query parameters GET /api/render takes, postParams
// those of POST /api/render; any other is refused. The OpenAPI document
// names the same (openapi_test.go).
var (
	queryParams = []string{"format", "src", "timeout"}
	postParams  = []string{"format", "timeout"}
)

// MainName is the file name a single-file render's source gets.
const MainName = "figure.asy"

// Formats are the formats the render API serves.
var Formats = []string{sandbox.FormatSVG, sandbox.FormatPDF, sandbox.FormatPNG, sandbox.FormatEPS, sandbox.FormatHTML}

// apiError is a refusal with its HTTP status and JSON text.
type apiError struct {
	status int
	text   string
}

func (e *apiError) Error() string { return e.text }

func badRequest(format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, text: fmt.Sprintf(format, args...)}
}

// limits are what a request may carry: the queue's MaxFiles and MaxUpload.
type limits struct {
	maxFiles  int
	maxUpload int64
}

// parseFormat checks a format parameter; empty means svg.
func parseFormat(f string) (string, *apiError) {
	if f == "" {
		return sandbox.FormatSVG, nil
	}
	if !slices.Contains(Formats, f) {
		return "", badRequest("format %q is not one of svg, pdf, png, eps or html", f)
	}
	return f, nil
}

// parseTimeout reads a timeout in milliseconds; empty means a default task.
// Whether it is one of the tiers' the queue decides.
func parseTimeout(s string) (time.Duration, *apiError) {
	if s == "" {
		return 0, nil
	}
	ms, err := strconv.ParseInt(s, 10, 32)
	if err != nil || ms <= 0 {
		return 0, badRequest("timeout %q is not a positive number of milliseconds", s)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// parseQuery reads GET /api/render?format=&src=&timeout=.
func parseQuery(rawQuery string) (sandbox.Task, *apiError) {
	if len(rawQuery) > maxRawQuery {
		return sandbox.Task{}, &apiError{status: http.StatusRequestURITooLong,
			text: fmt.Sprintf("query string longer than %d bytes: send sources over %d bytes with POST", maxRawQuery, MaxQuerySource)}
	}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return sandbox.Task{}, badRequest("malformed query string: %v", err)
	}
	for k, v := range q {
		if !slices.Contains(queryParams, k) {
			return sandbox.Task{}, badRequest("unknown parameter %q: the parameters are format, src and timeout", k)
		}
		if len(v) > 1 {
			return sandbox.Task{}, badRequest("parameter %q given %d times", k, len(v))
		}
	}
	src := q.Get("src")
	switch {
	case !q.Has("src"):
		return sandbox.Task{}, badRequest("missing parameter \"src\": the figure's source")
	case len(src) > MaxQuerySource:
		return sandbox.Task{}, &apiError{status: http.StatusRequestURITooLong,
			text: fmt.Sprintf("source longer than %d bytes: send it with POST", MaxQuerySource)}
	}
	return taskOf(q.Get("format"), q.Get("timeout"), []sandbox.File{{Name: MainName, Main: true, Data: []byte(src)}})
}

func taskOf(format, timeout string, files []sandbox.File) (sandbox.Task, *apiError) {
	f, aerr := parseFormat(format)
	if aerr != nil {
		return sandbox.Task{}, aerr
	}
	d, aerr := parseTimeout(timeout)
	if aerr != nil {
		return sandbox.Task{}, aerr
	}
	return sandbox.Task{Format: f, Timeout: d, Files: files}, nil
}

// parsePost reads POST /api/render: the main file as a text body, or
// files and options as multipart/form-data. format and timeout come from
// the query; a multipart body may give timeout as a field instead.
func parsePost(r *http.Request, lim limits) (sandbox.Task, *apiError) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil || len(r.URL.RawQuery) > maxRawQuery {
		return sandbox.Task{}, badRequest("malformed query string: give format and timeout only")
	}
	for k := range q {
		if !slices.Contains(postParams, k) {
			return sandbox.Task{}, badRequest("unknown parameter %q: POST takes format and timeout", k)
		}
	}
	ct := r.Header.Get("Content-Type")
	mt, params, err := mime.ParseMediaType(ct)
	if ct == "" {
		mt, err = "text/plain", nil
	}
	if err != nil {
		return sandbox.Task{}, &apiError{status: http.StatusUnsupportedMediaType, text: fmt.Sprintf("malformed Content-Type %q", ct)}
	}
	switch mt {
	case "text/plain", "text/x-asymptote", "application/octet-stream":
		data, aerr := readBody(r.Body, lim.maxUpload)
		if aerr != nil {
			return sandbox.Task{}, aerr
		}
		return taskOf(q.Get("format"), q.Get("timeout"), []sandbox.File{{Name: MainName, Main: true, Data: data}})
	case "multipart/form-data":
		return parseMultipart(r.Body, params["boundary"], q, lim)
	}
	return sandbox.Task{}, &apiError{status: http.StatusUnsupportedMediaType,
		text: fmt.Sprintf("Content-Type %q: send text/plain (the main file) or multipart/form-data (several files)", mt)}
}

func tooLarge(max int64) *apiError {
	return &apiError{status: http.StatusRequestEntityTooLarge, text: fmt.Sprintf("upload too large: at most %d bytes in all", max)}
}

// readBody reads at most max bytes of body; more is a 413.
func readBody(body io.Reader, max int64) ([]byte, *apiError) {
	data, err := io.ReadAll(io.LimitReader(body, max+1))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLarge(max)
		}
		return nil, badRequest("reading the body: %v", err)
	}
	if int64(len(data)) > max {
		return nil, tooLarge(max)
	}
	return data, nil
}

// parseMultipart reads the files and fields of a multipart body. A part
// with a file name is a file: the part named "main" is the main file (or
// the only file is); the field "timeout" is the task's timeout.
func parseMultipart(body io.Reader, boundary string, q url.Values, lim limits) (sandbox.Task, *apiError) {
	if boundary == "" {
		return sandbox.Task{}, badRequest("multipart/form-data without a boundary")
	}
	mr := multipart.NewReader(body, boundary)
	var files []sandbox.File
	var total int64
	timeout := q.Get("timeout")
	for parts := 0; ; parts++ {
		p, err := mr.NextRawPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return sandbox.Task{}, multipartError(err, lim.maxUpload)
		}
		if parts > lim.maxFiles+8 {
			return sandbox.Task{}, badRequest("too many parts: at most %d files and a timeout", lim.maxFiles)
		}
		if fileName(p) == "" {
			v, aerr := readField(p)
			if aerr != nil {
				return sandbox.Task{}, aerr
			}
			timeout = v
			continue
		}
		if len(files) == lim.maxFiles {
			return sandbox.Task{}, badRequest("too many files: at most %d", lim.maxFiles)
		}
		f, aerr := readFile(p, lim.maxUpload-total)
		if aerr != nil {
			return sandbox.Task{}, aerr
		}
		total += int64(len(f.Data))
		files = append(files, f)
	}
	if len(files) == 1 {
		files[0].Main = true
	}
	return taskOf(q.Get("format"), timeout, files)
}

func multipartError(err error, max int64) *apiError {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return tooLarge(max)
	}
	return badRequest("malformed multipart body: %v", err)
}

// readField reads the one field a multipart body may carry: timeout.
func readField(p *multipart.Part) (string, *apiError) {
	if p.FormName() != "timeout" {
		return "", badRequest("unknown field %q: the fields are files and \"timeout\"", p.FormName())
	}
	b, err := io.ReadAll(io.LimitReader(p, maxFieldBytes+1))
	if err != nil {
		return "", multipartError(err, maxFieldBytes)
	}
	if len(b) > maxFieldBytes {
		return "", badRequest("field \"timeout\" longer than %d bytes", maxFieldBytes)
	}
	return strings.TrimSpace(string(b)), nil
}

// readFile reads a file part of at most room bytes. Its name must pass the
// sandbox's rules as it is: no path is stripped or cleaned.
func readFile(p *multipart.Part, room int64) (sandbox.File, *apiError) {
	name := fileName(p)
	if err := sandbox.CheckFileName(name); err != nil {
		return sandbox.File{}, badRequest("file %q: %v", shortName(name), err)
	}
	data, err := io.ReadAll(io.LimitReader(p, room+1))
	if err != nil {
		return sandbox.File{}, multipartError(err, room)
	}
	if int64(len(data)) > room {
		return sandbox.File{}, &apiError{status: http.StatusRequestEntityTooLarge, text: "upload too large: the files exceed the queue's upload limit"}
	}
	if err := sandbox.CheckFileContent(name, data); err != nil {
		return sandbox.File{}, badRequest("%v", err)
	}
	return sandbox.File{Name: name, Main: p.FormName() == "main", Data: data}, nil
}

// fileName is the part's filename parameter as sent. (Part.FileName keeps
// only the last path element, which would let "../x.asy" pass as "x.asy".)
func fileName(p *multipart.Part) string {
	_, params, err := mime.ParseMediaType(p.Header.Get("Content-Disposition"))
	if err != nil {
		return ""
	}
	return params["filename"]
}

// shortName cuts a long name for an error text.
func shortName(name string) string {
	if len(name) > 64 {
		return name[:64] + "…"
	}
	return name
}
