package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"time"
)

const (
	// batchDelay is how long output waits for more before it is forwarded:
	// a burst of small writes becomes one Output call.
	batchDelay = 5 * time.Millisecond
	// batchMax forwards at once when this much output is waiting.
	batchMax = 64 * kiB
	// readSize is one read from asy's pipes.
	readSize = 32 * kiB
)

// timeLimitText and the others are the backend protocol's error texts
// (docs/design.md, "The backend protocol").
func timeLimitText(d time.Duration) string {
	return fmt.Sprintf("Execution aborted due to the time limit (%dms)", d.Milliseconds())
}

func outputLimitText(n int64) string {
	return fmt.Sprintf("Execution aborted due to the output limit (%dB)", n)
}

func exitCodeText(code int) string { return fmt.Sprintf("Execution failed with code %d", code) }

const noImageText = "No image output"

// IdleNotice is the line an interactive session that ended for want of
// input gets on its output (stderr when separate), before its complete
// message, so that a shell can say why it ended.
func IdleNotice(idle time.Duration) string {
	return fmt.Sprintf("usher: no input for %v: the session ended\n", idle)
}

// chunk is one read from a stream; eof marks its end.
type chunk struct {
	stream string
	data   []byte
	eof    bool
}

// segment is output waiting to be forwarded.
type segment struct {
	stream string
	data   []byte
}

// forwarder is the only caller of a run's Sink. Its loop takes what the
// stream readers read, batches it for batchDelay, counts it against the
// output limit, and, in interactive mode, finds asy's prompt token in
// stdout: the token is removed, and each one means asy finished a command,
// so waiting output is forwarded and a rewritten picture is sent.
type forwarder struct {
	sink   Sink
	format string
	limit  int64
	token  []byte // interactive prompt; nil otherwise
	abort  func(reason string)
	img    *images

	events  chan chunk
	files   []*os.File // the streams' read ends
	streams int        // open streams
	done    chan struct{}

	count   int64 // output bytes accepted
	carry   []byte
	pending []segment
	waiting int
	timer   *time.Timer
	armed   bool
	dead    bool   // a Sink call failed or the limit hit: nothing more goes out
	reason  string // why the forwarder asked to abort the run

	last      stamp // the image last sent
	imageSent bool
}

func newForwarder(sink Sink, format string, limit int64, token string, img *images, abort func(string)) *forwarder {
	f := &forwarder{
		sink: sink, format: format, limit: limit, img: img, abort: abort,
		events: make(chan chunk, 4),
		done:   make(chan struct{}),
		timer:  time.NewTimer(time.Hour),
	}
	f.timer.Stop()
	if token != "" {
		f.token = []byte(token)
	}
	return f
}

// read copies one stream into the forwarder until EOF or an error.
func (f *forwarder) read(r *os.File, stream string) {
	defer r.Close()
	buf := make([]byte, readSize)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			f.events <- chunk{stream: stream, data: bytes.Clone(buf[:n])}
		}
		if err != nil {
			f.events <- chunk{stream: stream, eof: true}
			return
		}
	}
}

// loop runs until every stream has ended, then forwards what is left.
func (f *forwarder) loop() {
	defer close(f.done)
	for f.streams > 0 {
		select {
		case c := <-f.events:
			if c.eof {
				f.streams--
				continue
			}
			f.take(c)
		case <-f.timer.C:
			f.armed = false
			f.flush()
		}
	}
	if len(f.carry) > 0 {
		f.emit(Stdout, f.carry)
		f.carry = nil
	}
	f.flush()
	f.timer.Stop()
}

// take handles one chunk: interactive stdout is searched for prompts.
func (f *forwarder) take(c chunk) {
	if f.token == nil || c.stream != Stdout {
		f.emit(c.stream, c.data)
		return
	}
	data := append(f.carry, c.data...)
	f.carry = nil
	for {
		i := bytes.Index(data, f.token)
		if i < 0 {
			break
		}
		f.emit(Stdout, data[:i])
		f.prompt()
		data = data[i+len(f.token):]
	}
	keep := partialSuffix(data, f.token)
	f.emit(Stdout, data[:len(data)-keep])
	f.carry = bytes.Clone(data[len(data)-keep:])
}

// partialSuffix is the length of the longest end of data that begins token.
func partialSuffix(data, token []byte) int {
	for k := min(len(token)-1, len(data)); k > 0; k-- {
		if bytes.HasPrefix(token, data[len(data)-k:]) {
			return k
		}
	}
	return 0
}

// emit queues output within the limit; the byte that passes the limit
// aborts the run, and what came before it is still forwarded.
func (f *forwarder) emit(stream string, data []byte) {
	if f.dead || len(data) == 0 {
		return
	}
	over := f.count+int64(len(data)) > f.limit
	if over {
		data = data[:f.limit-f.count]
	}
	f.count += int64(len(data))
	f.queue(stream, data)
	if over {
		f.flush()
		f.stop(outputLimitText(f.limit))
		return
	}
	if f.waiting >= batchMax {
		f.flush()
	} else if !f.armed {
		f.timer.Reset(batchDelay)
		f.armed = true
	}
}

func (f *forwarder) queue(stream string, data []byte) {
	if len(data) == 0 {
		return
	}
	f.waiting += len(data)
	if n := len(f.pending); n > 0 && f.pending[n-1].stream == stream {
		f.pending[n-1].data = append(f.pending[n-1].data, data...)
		return
	}
	f.pending = append(f.pending, segment{stream: stream, data: bytes.Clone(data)})
}

// flush forwards the waiting output in order.
func (f *forwarder) flush() {
	if f.armed {
		f.timer.Stop()
		f.armed = false
	}
	pending := f.pending
	f.pending, f.waiting = nil, 0
	for _, s := range pending {
		if err := f.sink.Output(s.stream, s.data); err != nil {
			f.fail(err)
			return
		}
	}
}

// fail stops all forwarding after a Sink error and aborts the run.
func (f *forwarder) fail(err error) {
	f.pending, f.waiting = nil, 0
	f.stop("Execution aborted: " + err.Error())
}

// stop ends forwarding and asks the supervisor to abort the run.
func (f *forwarder) stop(reason string) {
	if f.dead {
		return
	}
	f.dead, f.reason = true, reason
	f.abort(reason)
}

// stopReaders makes blocked reads of the streams return.
func (f *forwarder) stopReaders() {
	for _, r := range f.files {
		_ = r.SetReadDeadline(time.Now())
	}
}

// prompt is asy asking for the next command: the previous one is done,
// so its output goes out now, and its picture if asy rewrote it.
func (f *forwarder) prompt() {
	f.flush()
	if f.dead || !f.img.changed(f.last) {
		return
	}
	if err := f.sendImage(); errors.Is(err, errImageTooBig) {
		f.stop(outputLimitText(f.img.max))
	}
}

// sendImage reads the image and forwards it unless it is the one last
// sent. It returns errNoImage, errNotRegular or errImageTooBig when there
// is nothing to send.
func (f *forwarder) sendImage() error {
	if f.dead {
		return nil
	}
	data, st, err := f.img.read()
	if err != nil {
		return err
	}
	if f.imageSent && st == f.last {
		return nil
	}
	if err := f.sink.Result(f.format, data); err != nil {
		f.fail(err)
		return err
	}
	f.last, f.imageSent = st, true
	return nil
}
