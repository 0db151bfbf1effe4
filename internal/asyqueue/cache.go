package asyqueue

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/usherhq/usher/internal/resultcache"
	"github.com/usherhq/usher/internal/sandbox"
	"github.com/usherhq/usher/internal/uploads"
)

// maxRecorded bounds what one run may put in the result cache.
const maxRecorded = 8 << 20

// relay is the Sink of a run: it sends each output and result to the
// client as it comes and, for a cacheable task, records them.
type relay struct {
	ctx  context.Context
	conn peer

	mu     sync.Mutex
	record bool
	size   int64
	chunks []resultcache.Chunk
}

func newRelay(ctx context.Context, conn peer, record bool) *relay {
	return &relay{ctx: ctx, conn: conn, record: record}
}

// Output sends an `output` message.
func (r *relay) Output(stream string, data []byte) error {
	r.keep(resultcache.Output, stream, data)
	return r.conn.SendPayload(r.ctx, "output", outputBody{Stream: stream}, data)
}

// Result sends a `result` message.
func (r *relay) Result(format string, image []byte) error {
	r.keep(resultcache.Result, format, image)
	return r.conn.SendPayload(r.ctx, "result", resultBody{Format: format}, image)
}

func (r *relay) keep(kind resultcache.Kind, label string, data []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.record {
		return
	}
	r.size += int64(len(data))
	if r.size > maxRecorded {
		r.record, r.chunks = false, nil
		return
	}
	r.chunks = append(r.chunks, resultcache.Chunk{Kind: kind, Label: label, Data: slices.Clone(data)})
}

func (r *relay) recorded() ([]resultcache.Chunk, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.chunks, r.record
}

// cacheable says whether a task's result may come from or go to the cache:
// interactive sessions never do.
func (s *Server) cacheable(t sandbox.Task) bool {
	return s.cache != nil && !t.Interactive
}

// cacheKey names what decides a run's output: the asy version, the options
// that change it and every file by name, role and content. The timeout is
// left out: a run that succeeded within its time is served to any task
// whose limit is at least that long.
func (s *Server) cacheKey(t sandbox.Task) string {
	var b strings.Builder
	fmt.Fprintf(&b, "usher result v1\x00%s\x00%s\x00%t\x00%d\x00", s.cfg.AsyVersion, t.Format, t.SeparateStderr, t.Verbosity)
	files := slices.Clone(t.Files)
	slices.SortFunc(files, func(a, b sandbox.File) int { return strings.Compare(a.Name, b.Name) })
	for _, f := range files {
		fmt.Fprintf(&b, "%s\x00%t\x00%s\x00", f.Name, f.Main, uploads.Hash(f.Data))
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:])
}

// replay answers a task from the cache; it reports whether it did.
func (s *Server) replay(ctx context.Context, conn peer, t sandbox.Task) bool {
	if !s.cacheable(t) {
		return false
	}
	e, ok, err := s.cache.Get(ctx, s.cacheKey(t))
	if err != nil {
		s.cfg.Logger.Warn("asy: result cache read failed", "err", err)
	}
	if !ok || e.Time > s.limitOf(t) {
		s.metrics.cache(false)
		return false
	}
	s.metrics.cache(true)
	sendEntry(ctx, conn, e)
	return true
}

// sendEntry sends a cached run as the run sent it: queue passed, its
// outputs and results, complete.
func sendEntry(ctx context.Context, conn peer, e resultcache.Entry) {
	if conn.Send(ctx, "queue", queueBody{Passed: true}) != nil {
		return
	}
	for _, c := range e.Chunks {
		var err error
		switch c.Kind {
		case resultcache.Output:
			err = conn.SendPayload(ctx, "output", outputBody{Stream: c.Label}, c.Data)
		case resultcache.Result:
			err = conn.SendPayload(ctx, "result", resultBody{Format: c.Label}, c.Data)
		}
		if err != nil {
			return
		}
	}
	_ = conn.Send(ctx, "complete", completeBody{Success: true, Time: millis(e.Time)})
}

// limitOf is the longest a task may run: its timeout, or the slowest
// tier's for a default task.
func (s *Server) limitOf(t sandbox.Task) time.Duration {
	if t.Timeout != 0 {
		return t.Timeout
	}
	ts := s.d.Timeouts()
	return ts[len(ts)-1]
}

// store puts a successful run into the cache.
func (s *Server) store(ctx context.Context, t sandbox.Task, r *relay, took time.Duration) {
	if !s.cacheable(t) || r == nil {
		return
	}
	chunks, ok := r.recorded()
	if !ok {
		return
	}
	if err := s.cache.Put(ctx, s.cacheKey(t), resultcache.Entry{Chunks: chunks, Time: took}); err != nil {
		s.cfg.Logger.Warn("asy: result cache write failed", "err", err)
	}
}
