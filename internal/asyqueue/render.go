package asyqueue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/usherhq/usher/internal/sandbox"
)

// An HTTP render (the render API, internal/renderapi) runs a task through
// the same path as a WebSocket client: the same result cache and cache
// key, Submit on the same Queue (tiers, caps, estimates, dashboard), the
// same backends. Its session sends to a collector instead of a connection.

// ErrBadRequest marks a render refused for its input (files, options).
var ErrBadRequest = errors.New("bad request")

// DeniedError is a render that ended before any Asymptote code ran. Text
// is the queue protocol's `denied` text; Err is ErrBadRequest for bad
// input, the queue's denial (ErrQueueFull, ErrStopped, ...) when Submit
// refused it, or nil when the scheduler ended it while queued.
type DeniedError struct {
	Text string
	Err  error
}

func (e *DeniedError) Error() string { return e.Text }

// Unwrap returns the denial's cause.
func (e *DeniedError) Unwrap() error { return e.Err }

// RenderResult is a render that ran (or came from the result cache).
type RenderResult struct {
	// ID is the content id: the task's result cache key.
	ID      string
	Success bool
	// Error is the protocol's `complete` error text when Success is false.
	Error string
	// Images are the results asy produced, in order.
	Images []Image
	// Output is what asy printed, in order.
	Output []Output
	// Time is how long asy ran (for a cached result, the first run's).
	Time   time.Duration
	Cached bool
}

// Image is one `result` of a render.
type Image struct {
	Format string
	Data   []byte
}

// Output is one `output` of a render.
type Output struct {
	Stream string
	Data   []byte
}

// Image returns the data of the first result in format.
func (r RenderResult) Image(format string) ([]byte, bool) {
	for _, im := range r.Images {
		if im.Format == format {
			return im.Data, true
		}
	}
	return nil, false
}

// Timeouts lists the task timeouts a render may ask for: the tiers'.
func (s *Server) Timeouts() []time.Duration { return s.d.Timeouts() }

// Config returns the server's configuration with its defaults applied.
func (s *Server) Config() Config { return s.cfg }

// ContentID is the id Render gives task's result: its result cache key.
func (s *Server) ContentID(task sandbox.Task) string { return s.cacheKey(task) }

// Render runs task for client and returns its result. Identical tasks
// rendering at the same time run once: the later ones wait for the first.
// When every caller waiting for a run has gone (ctx ended), the task is
// aborted, queued or running, as when a WebSocket client closes; Render
// then returns ctx's error. A refusal is a *DeniedError.
func (s *Server) Render(ctx context.Context, client string, task sandbox.Task) (RenderResult, error) {
	if err := s.checkRender(task); err != nil {
		return RenderResult{}, err
	}
	f := s.join(fmt.Sprintf("%s/%d", s.cacheKey(task), task.Timeout), client, task)
	select {
	case <-f.done:
		return f.res, f.err
	case <-ctx.Done():
		s.leave(f)
		return RenderResult{}, fmt.Errorf("render: %w", ctx.Err())
	}
}

// Cached returns the result the cache holds under id (a RenderResult's
// ID, which is its cache key), without a task: what a permanent URL
// names. ok is false on a miss (nothing is counted then: the caller
// renders the source, which counts the lookup).
func (s *Server) Cached(ctx context.Context, id string) (r RenderResult, ok bool) {
	if s.cache == nil {
		return RenderResult{}, false
	}
	e, ok, err := s.cache.Get(ctx, id)
	if err != nil {
		s.cfg.Logger.Warn("asy: result cache read failed", "err", err)
	}
	if !ok {
		return RenderResult{}, false
	}
	s.metrics.cache(true)
	c := &collected{}
	sendEntry(ctx, c, e)
	r, err = c.result(id, true)
	return r, err == nil
}

// flight is a render in progress and the callers waiting for it.
type flight struct {
	key     string
	done    chan struct{} // closed when res and err are set
	res     RenderResult
	err     error
	waiters int                // guarded by Server.flightsMu
	abandon context.CancelFunc // ends the run's client side: nobody waits
}

// join returns the flight of key, starting it when there is none.
func (s *Server) join(key, client string, task sandbox.Task) *flight {
	s.flightsMu.Lock()
	defer s.flightsMu.Unlock()
	if f, ok := s.flights[key]; ok {
		f.waiters++
		return f
	}
	left, abandon := context.WithCancel(context.Background())
	f := &flight{key: key, done: make(chan struct{}), waiters: 1, abandon: abandon}
	if s.flights == nil {
		s.flights = make(map[string]*flight)
	}
	s.flights[key] = f
	go func() {
		f.res, f.err = s.render(left, client, task)
		s.flightsMu.Lock()
		s.forget(f)
		s.flightsMu.Unlock()
		abandon()
		close(f.done)
	}()
	return f
}

// leave drops a caller of f; the last one to leave abandons the run.
func (s *Server) leave(f *flight) {
	s.flightsMu.Lock()
	defer s.flightsMu.Unlock()
	f.waiters--
	if f.waiters == 0 {
		s.forget(f) // a new caller starts afresh
		f.abandon()
	}
}

// forget removes f from the flights, unless a newer flight of its key
// took its place. s.flightsMu is held.
func (s *Server) forget(f *flight) {
	if s.flights[f.key] == f {
		delete(s.flights, f.key)
	}
}

// render runs one task under the server's context. left ends when no
// caller waits for it any more: the session then treats it as a client
// that went away.
func (s *Server) render(left context.Context, client string, task sandbox.Task) (RenderResult, error) {
	s.sessions.Add(1)
	defer s.sessions.Done()
	c := &collected{}
	sess := &session{srv: s, out: c, client: client, left: left}
	id := s.cacheKey(task)
	if s.replay(s.ctx, c, task) {
		return c.result(id, true)
	}
	if err := sess.queue(s.ctx, task); err != nil {
		return RenderResult{}, &DeniedError{Text: err.Error(), Err: err}
	}
	return c.result(id, false)
}

// checkRender refuses what the queue protocol's collector would: no or
// several main files, bad names, too many files or bytes, a timeout that
// is not a tier's, an interactive task or an unknown format.
func (s *Server) checkRender(t sandbox.Task) error {
	err := s.checkFiles(t.Files)
	if err == nil && t.Timeout != 0 {
		err = checkTimeout(t.Timeout, s.d.Timeouts())
	}
	if err == nil && t.Interactive {
		err = deny("an HTTP render cannot be interactive")
	}
	if err == nil && !slices.Contains(sandbox.Formats, t.Format) {
		err = deny("format %q is not one of %v", t.Format, sandbox.Formats)
	}
	if err != nil {
		s.metrics.denied("request")
		return &DeniedError{Text: err.Error(), Err: ErrBadRequest}
	}
	return nil
}

func (s *Server) checkFiles(files []sandbox.File) error {
	if len(files) > s.cfg.MaxFiles {
		return s.tooMany()
	}
	seen := make(map[string]bool, len(files))
	var total int64
	var mains []string
	for _, f := range files {
		if err := sandbox.CheckFile(f.Name, f.Data); err != nil {
			return deny("%s", err.Error())
		}
		if seen[f.Name] {
			return addedTwice(f.Name)
		}
		seen[f.Name] = true
		total += int64(len(f.Data))
		if f.Main {
			mains = append(mains, f.Name)
		}
	}
	if total > s.cfg.MaxUpload {
		return s.tooLarge()
	}
	return checkMains(len(files), mains, false)
}

// collected is the peer of an HTTP render: it keeps what the session
// sends. The run's relay writes from the backend's goroutine.
type collected struct {
	mu     sync.Mutex
	res    RenderResult
	denied string
	ended  bool
}

// Send keeps `denied` and `complete`; `queue` updates have no reader.
func (c *collected) Send(_ context.Context, _ string, body any) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch b := body.(type) {
	case deniedBody:
		c.denied, c.ended = b.Error, true
	case completeBody:
		c.res.Success, c.res.Error, c.ended = b.Success, b.Error, true
		if b.Time != nil {
			c.res.Time = time.Duration(*b.Time) * time.Millisecond
		}
	}
	return nil
}

// SendPayload keeps `output` and `result`.
func (c *collected) SendPayload(_ context.Context, _ string, body any, payload []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch b := body.(type) {
	case outputBody:
		c.res.Output = append(c.res.Output, Output{Stream: b.Stream, Data: slices.Clone(payload)})
	case resultBody:
		c.res.Images = append(c.res.Images, Image{Format: b.Format, Data: slices.Clone(payload)})
	}
	return nil
}

// result is the render as the session ended it.
func (c *collected) result(id string, cached bool) (RenderResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.denied != "" {
		return RenderResult{}, &DeniedError{Text: c.denied}
	}
	if !c.ended {
		return RenderResult{}, &DeniedError{Text: ErrStopped.Error(), Err: ErrStopped}
	}
	r := c.res
	r.ID, r.Cached = id, cached
	return r, nil
}
