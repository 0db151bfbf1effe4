package sandboxtest

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// Sink records what a run forwards; it satisfies sandbox.Sink (this
// package does not import sandbox, so that the sandbox package's own tests
// can use it). Its calls never block, however much output a test makes:
// they append to memory under a mutex and wake waiters by closing a
// channel. Tests read it while the run goes on. The zero Sink is ready to
// use.
type Sink struct {
	mu      sync.Mutex
	outputs []segment
	formats []string
	images  [][]byte
	calls   int
	failOn  int           // fail the call with this number (1-based); 0: never
	changed chan struct{} // closed and replaced at every call; nil until a waiter asks
}

// segment is one Output call.
type segment struct {
	stream string
	data   []byte
}

// NewSink returns an empty Sink.
func NewSink() *Sink { return &Sink{} }

// FailOn makes the Sink's call number n (1-based, counting Output and
// Result calls) return an error, as when the client went away.
func (s *Sink) FailOn(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failOn = n
}

// Output records a chunk of stream ("stdout" or "stderr").
func (s *Sink) Output(stream string, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.outputs = append(s.outputs, segment{stream: stream, data: bytes.Clone(data)})
	return s.called()
}

// Result records an image in format.
func (s *Sink) Result(format string, image []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.formats = append(s.formats, format)
	s.images = append(s.images, bytes.Clone(image))
	return s.called()
}

// called counts a call, wakes the waiters and gives the call's error.
// The caller holds s.mu.
func (s *Sink) called() error {
	s.calls++
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
	if s.calls == s.failOn {
		return fmt.Errorf("client went away (call %d)", s.calls)
	}
	return nil
}

// Text is everything recorded on stream, or on every stream when stream
// is "".
func (s *Sink) Text(stream string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	for _, o := range s.outputs {
		if stream == "" || o.stream == stream {
			b.Write(o.data)
		}
	}
	return b.String()
}

// String is the output of every stream, so that a Sink passed to a
// failure message shows what the run wrote.
func (s *Sink) String() string { return s.Text("") }

// Formats lists the formats of the images recorded, in order.
func (s *Sink) Formats() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.formats...)
}

// ImageCount is the number of images recorded.
func (s *Sink) ImageCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.images)
}

// Image is the i-th image recorded (0-based).
func (s *Sink) Image(i int) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.images[i]
}

// Calls is the number of Output and Result calls so far.
func (s *Sink) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// next returns a channel closed at the next call.
func (s *Sink) next() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changed == nil {
		s.changed = make(chan struct{})
	}
	return s.changed
}

// WaitFor waits until cond holds, checking it after every call. If
// timeout passes first, it fails the test with a message that says what
// was waited for (format and args, as for fmt.Sprintf) and shows the
// output so far. Call it from the test's goroutine only.
func (s *Sink) WaitFor(t testing.TB, timeout time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		next := s.next() // before cond: a call between the two still wakes us
		if cond() {
			return
		}
		select {
		case <-next:
		case <-timer.C:
			t.Fatalf("%s: not within %v; output so far: %q", fmt.Sprintf(format, args...), timeout, s.Text(""))
		}
	}
}

// WaitOutput waits until the output of every stream contains want, as
// WaitFor does.
func (s *Sink) WaitOutput(t testing.TB, timeout time.Duration, want string) {
	t.Helper()
	s.WaitFor(t, timeout, func() bool { return strings.Contains(s.Text(""), want) }, "output containing %q", want)
}
