package renderapi

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics counts the render API's answers.
type metrics struct {
	answers *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{answers: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "usher_render_answers_total",
		Help: "Render API answers, by route (post, query, id) and HTTP status.",
	}, []string{"route", "code"})}
	if reg != nil {
		reg.MustRegister(m.answers)
	}
	return m
}

// count wraps a route's handler to count its answers by status.
func (m *metrics) count(route string, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		next(sw, r)
		m.answers.WithLabelValues(route, strconv.Itoa(sw.code)).Inc()
	}
}

// statusWriter remembers the status a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
