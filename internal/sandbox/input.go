package sandbox

import (
	"errors"
	"fmt"
	"os"
	"sync"
)

// feeder writes Input to an interactive asy's stdin from its own
// goroutine, so that Input never blocks on an asy that is not reading.
type feeder struct {
	w    *os.File
	max  int64
	mu   sync.Mutex
	q    [][]byte
	n    int64
	fed  bool // input arrived since active() last looked
	shut bool // no more input: EOF after the queue
	gone bool // asy's stdin is closed
	wake chan struct{}
	once sync.Once
}

func newFeeder(w *os.File, maxQueued int64) *feeder {
	return &feeder{w: w, max: maxQueued, wake: make(chan struct{}, 1)}
}

// feed queues data for asy.
func (f *feeder) feed(data []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.shut || f.gone:
		return errors.New("sandbox: input after the end of the session")
	case f.n+int64(len(data)) > f.max:
		return fmt.Errorf("sandbox: more than %dB of input waiting for asy", f.max)
	}
	f.q = append(f.q, append([]byte(nil), data...))
	f.n += int64(len(data))
	f.fed = true
	nudge(f.wake)
	return nil
}

// active reports and clears whether input arrived.
func (f *feeder) active() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	fed := f.fed
	f.fed = false
	return fed
}

// loop writes the queue; it ends, closing stdin, once the queue is empty
// after close, or when asy stops reading for good.
func (f *feeder) loop() {
	defer f.closeW()
	for {
		f.mu.Lock()
		q, shut := f.q, f.shut
		f.q, f.n = nil, 0
		f.mu.Unlock()
		for _, b := range q {
			if _, err := f.w.Write(b); err != nil {
				f.mu.Lock()
				f.gone = true
				f.mu.Unlock()
				return
			}
		}
		if shut && len(q) == 0 {
			return
		}
		<-f.wake
	}
}

// close ends the input after what is queued.
func (f *feeder) close() {
	f.mu.Lock()
	f.shut = true
	f.mu.Unlock()
	nudge(f.wake)
}

// stop closes stdin at once, even under a blocked write: the run is over.
func (f *feeder) stop() {
	f.mu.Lock()
	f.shut = true
	f.mu.Unlock()
	f.closeW()
	nudge(f.wake)
}

func (f *feeder) closeW() {
	f.once.Do(func() { f.w.Close() })
	f.mu.Lock()
	f.gone = true
	f.mu.Unlock()
}
