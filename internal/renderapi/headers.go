package renderapi

import (
	"net/http"

	"github.com/usherhq/usher/internal/sandbox"
)

// A result must never run script in usher's origin: a figure can put raw
// SVG (a <script> too) into its svg, and html is a script by nature. Every
// result is served with nosniff and a Content-Security-Policy whose
// sandbox directive gives the document an opaque origin (no cookies, no
// storage, no same-origin requests of usher's), plus only what the format
// needs. (docs/api.md, "Render API")

// resultType describes how one format is served.
type resultType struct {
	contentType string
	csp         string
	attachment  bool // a browser should download it, not show it
}

// svgCSP lets an svg show its inline styles, embedded images and fonts,
// nothing else; its scripts never run.
const svgCSP = "sandbox; default-src 'none'; style-src 'unsafe-inline'; img-src data:; font-src data:"

// htmlCSP lets asy's self-contained WebGL page run its inline scripts,
// inside the sandbox only: an opaque origin that loads nothing.
const htmlCSP = "sandbox allow-scripts; default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data: blob:; font-src data:"

// blankCSP is for formats with nothing to run or load.
const blankCSP = "sandbox; default-src 'none'"

var resultTypes = map[string]resultType{
	sandbox.FormatSVG:  {contentType: "image/svg+xml", csp: svgCSP},
	sandbox.FormatPNG:  {contentType: "image/png", csp: blankCSP},
	sandbox.FormatPDF:  {contentType: "application/pdf", csp: blankCSP},
	sandbox.FormatEPS:  {contentType: "application/postscript", csp: blankCSP, attachment: true},
	sandbox.FormatHTML: {contentType: "text/html; charset=utf-8", csp: htmlCSP},
}

// cacheForever is the Cache-Control of a result: its URL names its content.
const cacheForever = "public, max-age=31536000, immutable"

// setResultHeaders sets the headers every result carries.
func setResultHeaders(h http.Header, id, format string) {
	rt := resultTypes[format]
	h.Set("Content-Type", rt.contentType)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", rt.csp)
	h.Set("Cross-Origin-Resource-Policy", "cross-origin")
	h.Set("Referrer-Policy", "no-referrer")
	disposition := "inline"
	if rt.attachment {
		disposition = "attachment"
	}
	h.Set("Content-Disposition", disposition+`; filename="`+id[:16]+"."+format+`"`)
	h.Set("Content-Location", "/api/render/"+id+"."+format)
	h.Set("Cache-Control", cacheForever)
}
