package service

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/usherhq/usher/internal/sandbox"
	"github.com/usherhq/usher/internal/shares"
)

// The web app's JSON endpoints (docs/api.md): what the server offers, and
// shared projects.

// info is the body of GET /api/info. Formats lists every format /asy
// accepts: the queue protocol's svg, pdf and png first (svg, the default,
// leads), then html, eps and v3d (docs/design.md, "The queue protocol").
type info struct {
	AsyVersion string   `json:"asyVersion"`
	Timeouts   []int64  `json:"timeouts"`
	Formats    []string `json:"formats"`
	MaxFiles   int      `json:"maxFiles"`
	MaxUpload  int64    `json:"maxUpload"`
	MaxShare   int64    `json:"maxShare"`
	// Extensions lists every file extension a task's file may have;
	// BinaryExtensions those whose files are not text (carried in base64).
	Extensions       []string `json:"extensions"`
	BinaryExtensions []string `json:"binaryExtensions"`
}

func (s *Service) apiInfo(w http.ResponseWriter, _ *http.Request) {
	body := info{
		AsyVersion: s.asyVersion,
		Formats:    slices.Clone(sandbox.Formats),
		MaxFiles:   s.queueCfg.MaxFiles,
		MaxUpload:  s.queueCfg.MaxUpload,
		MaxShare:   s.shares.MaxBytes(),

		Extensions:       slices.Clone(sandbox.Extensions),
		BinaryExtensions: slices.Clone(sandbox.BinaryExtensions),
	}
	for _, d := range s.mode.queue().Timeouts() {
		body.Timeouts = append(body.Timeouts, d.Milliseconds())
	}
	writeJSON(w, http.StatusOK, body)
}

// shareRequest is the body of POST /api/shares.
type shareRequest struct {
	Files []shares.File `json:"files"`
}

type shareResponse struct {
	ID    string        `json:"id"`
	URL   string        `json:"url,omitempty"`
	Files []shares.File `json:"files,omitempty"`
}

func (s *Service) apiPostShare(w http.ResponseWriter, r *http.Request) {
	// JSON escaping may double the content; the store checks the real size.
	r.Body = http.MaxBytesReader(w, r.Body, 2*s.shares.MaxBytes()+64<<10)
	var req shareRequest
	if err := decodeStrict(r.Body, &req); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeError(w, http.StatusRequestEntityTooLarge, "request body too large")
			return
		}
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	id, created, err := s.shares.Put(r.Context(), req.Files)
	switch {
	case errors.Is(err, shares.ErrTooLarge):
		writeError(w, http.StatusRequestEntityTooLarge, err.Error())
		return
	case errors.Is(err, shares.ErrInvalid):
		writeError(w, http.StatusBadRequest, err.Error())
		return
	case errors.Is(err, shares.ErrFull):
		s.cfg.Logger.Warn("share: refused, the shares' quota is used up (--share-quota)", "err", err)
		writeError(w, http.StatusInsufficientStorage, err.Error())
		return
	case err != nil:
		s.cfg.Logger.Error("share: store failed", "err", err)
		writeError(w, http.StatusInternalServerError, "the share could not be stored")
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, shareResponse{ID: id, URL: "/s/" + id})
}

func (s *Service) apiGetShare(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	files, err := s.shares.Get(r.Context(), id)
	switch {
	case errors.Is(err, shares.ErrBadID):
		writeError(w, http.StatusBadRequest, fmt.Sprintf("\"id\" %q is not a share id", id))
	case errors.Is(err, shares.ErrNotFound):
		writeError(w, http.StatusNotFound, fmt.Sprintf("no share %q", id))
	case errors.Is(err, shares.ErrGone):
		writeError(w, http.StatusGone, err.Error())
	case err != nil:
		s.cfg.Logger.Error("share: read failed", "id", id, "err", err)
		writeError(w, http.StatusInternalServerError, "the share could not be read")
	default:
		writeJSON(w, http.StatusOK, shareResponse{ID: id, Files: files})
	}
}

// apiDeleteShare is DELETE /api/shares/{id}, an operator's action: the
// share's files go for good and readers get 410 Gone. It answers 204, or
// 400 for a malformed id and 404 for an unknown one. It must be served
// only behind the admin check.
func (s *Service) apiDeleteShare(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	err := s.shares.Delete(r.Context(), id)
	switch {
	case errors.Is(err, shares.ErrBadID):
		writeError(w, http.StatusBadRequest, fmt.Sprintf("\"id\" %q is not a share id", id))
	case errors.Is(err, shares.ErrNotFound):
		writeError(w, http.StatusNotFound, fmt.Sprintf("no share %q", id))
	case err != nil:
		s.cfg.Logger.Error("share: delete failed", "id", id, "err", err)
		writeError(w, http.StatusInternalServerError, "the share could not be deleted")
	default:
		s.cfg.Logger.Info("share: deleted by the operator", "id", id)
		w.WriteHeader(http.StatusNoContent)
	}
}

// decodeStrict reads one JSON value into v, refusing unknown fields and
// trailing data.
func decodeStrict(r io.Reader, v any) error {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return err
		}
		return fmt.Errorf("malformed request: %v", err)
	}
	if dec.More() {
		return errors.New("malformed request: data after the JSON object")
	}
	return nil
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

func writeError(w http.ResponseWriter, status int, text string) {
	writeJSON(w, status, map[string]string{"error": text})
}

// dashboardEvery is how often /api/dashboard sends a snapshot.
const dashboardEvery = time.Second

// apiDashboard streams the dashboard's state as Server-Sent Events: a
// `snapshot` event at once and then every second, until the client leaves
// or the server begins to shut down. The first carries the whole history,
// later ones only the samples new since the one before. In multi-node mode
// the state is the leading scheduler's, read from Redis (docs/redis.md,
// "The dashboard").
func (s *Service) apiDashboard(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, "streaming unsupported")
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	tick := time.NewTicker(s.cfg.dashEvery)
	defer tick.Stop()
	var sent int64 // the newest sample sent
	for {
		st, err := s.mode.dashboard(s.ctx)
		if err != nil {
			return
		}
		if st.History != nil {
			st.History = st.History.Since(sent)
			sent = max(sent, st.History.Newest())
		}
		data, err := st.Encode()
		if err != nil {
			s.cfg.Logger.Error("dashboard: encode", "err", err)
			return
		}
		if _, err := fmt.Fprintf(w, "event: snapshot\ndata: %s\n\n", data); err != nil {
			return
		}
		flusher.Flush()
		select {
		case <-tick.C:
		case <-r.Context().Done():
			return
		case <-s.stopping:
			return
		}
	}
}
