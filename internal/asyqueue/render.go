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
// A run once started carries on when ctx ends (its result fills the cache);
// Render then returns ctx's error. A refusal is a *DeniedError.
func (s *Server) Render(ctx context.Context, client string, task sandbox.Task) (RenderResult, error) {
	if err := s.checkRender(task); err != nil {
		return RenderResult{}, err
	}
	key := fmt.Sprintf("%s/%d", s.cacheKey(task), task.Timeout)
	ch := s.flights.DoChan(key, func() (any, error) { return s.render(client, task) })
	select {
	case r := <-ch:
		if r.Err != nil {
			return RenderResult{}, r.Err
		}
		return r.Val.(RenderResult), nil
	case <-ctx.Done():
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

// render runs one task under the server's context: it is shared by every
// caller waiting for it, so no caller's end stops it.
func (s *Server) render(client string, task sandbox.Task) (RenderResult, error) {
	s.sessions.Add(1)
	defer s.sessions.Done()
	c := &collected{}
	sess := &session{srv: s, out: c, client: client}
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
	mains := 0
	for _, f := range files {
		if err := sandbox.CheckFileName(f.Name); err != nil {
			return deny("%s", err.Error())
		}
		if seen[f.Name] {
			return addedTwice(f.Name)
		}
		seen[f.Name] = true
		total += int64(len(f.Data))
		if f.Main {
			mains++
		}
	}
	if total > s.cfg.MaxUpload {
		return s.tooLarge()
	}
	return checkMains(len(files), mains)
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
