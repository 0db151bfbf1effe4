package testbin

import (
	"bytes"
	"strings"
	"sync"
)

// LogBuffer collects output that one goroutine writes while others read
// it (a logger's or a process's output in a test).
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Contains says whether what was written so far contains sub.
func (l *LogBuffer) Contains(sub string) bool { return strings.Contains(l.String(), sub) }
