// Package uploads keeps recently uploaded files by content, so that a client
// can name a file by its SHA-256 (`add {..., restore: true}`) instead of
// sending it again. It is shared by every client of one server.
//
// Two promises bound it: a file stays at least MinAge after it was last
// stored or restored, and the store never holds more than MaxBytes. When
// the two collide — the store is full of files younger than MinAge — a new
// file is simply not kept: the task that uploaded it runs anyway, and a
// later restore of it misses, which the queue protocol answers with
// `missing` so the client sends it again. Nothing is lost; only a shortcut.
package uploads

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"time"
)

// Defaults used by New for zero Config fields.
const (
	DefaultMaxBytes = 256 << 20
	DefaultMinAge   = 10 * time.Minute
)

// Config sets up a Store. Zero fields take the defaults.
type Config struct {
	MaxBytes int64            // most bytes of file contents held at once
	MinAge   time.Duration    // a file is kept at least this long after its last use
	Now      func() time.Time // the clock; time.Now when nil
}

// Store is a bounded content-addressed store. It is safe for concurrent use.
type Store struct {
	cfg Config

	mu      sync.Mutex
	bytes   int64
	entries map[string]*list.Element // hash → element of lru holding *entry
	lru     list.List                // front = most recently used
}

type entry struct {
	hash     string
	data     []byte
	lastUsed time.Time
}

// Hash returns the lowercase hex SHA-256 of data, the form clients send.
func Hash(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// New returns an empty Store.
func New(cfg Config) *Store {
	return &Store{cfg: cfg.withDefaults(), entries: make(map[string]*list.Element)}
}

func (c Config) withDefaults() Config {
	if c.MaxBytes <= 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.MinAge <= 0 {
		c.MinAge = DefaultMinAge
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Put keeps data under its hash, which the caller has already checked
// (Hash(data) == hash). It reports whether the file is kept: false when it
// is larger than the whole store, or when making room would evict a file
// used less than MinAge ago. Storing a file already present refreshes it.
func (s *Store) Put(_ context.Context, hash string, data []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.Now()
	if el, ok := s.entries[hash]; ok {
		s.touch(el, now)
		return true
	}
	size := int64(len(data))
	if size > s.cfg.MaxBytes || !s.makeRoom(size, now) {
		return false
	}
	e := &entry{hash: hash, data: data, lastUsed: now}
	s.entries[hash] = s.lru.PushFront(e)
	s.bytes += size
	return true
}

// Get returns the file stored under hash and refreshes its age.
func (s *Store) Get(_ context.Context, hash string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	el, ok := s.entries[hash]
	if !ok {
		return nil, false
	}
	s.touch(el, s.cfg.Now())
	return el.Value.(*entry).data, true
}

// Has reports whether a file is stored under hash, without refreshing it.
func (s *Store) Has(hash string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.entries[hash]
	return ok
}

// Usage returns how many files and bytes the store holds.
func (s *Store) Usage() (files int, bytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entries), s.bytes
}

func (s *Store) touch(el *list.Element, now time.Time) {
	el.Value.(*entry).lastUsed = now
	s.lru.MoveToFront(el)
}

// makeRoom evicts least recently used files older than MinAge until size
// more bytes fit. It evicts nothing unless it can make enough room.
func (s *Store) makeRoom(size int64, now time.Time) bool {
	need := s.bytes + size - s.cfg.MaxBytes
	if need <= 0 {
		return true
	}
	var freeable int64
	for el := s.lru.Back(); el != nil && freeable < need; el = el.Prev() {
		e := el.Value.(*entry)
		if now.Sub(e.lastUsed) < s.cfg.MinAge {
			return false
		}
		freeable += int64(len(e.data))
	}
	if freeable < need {
		return false
	}
	for s.bytes+size > s.cfg.MaxBytes {
		s.evict(s.lru.Back())
	}
	return true
}

func (s *Store) evict(el *list.Element) {
	e := s.lru.Remove(el).(*entry)
	delete(s.entries, e.hash)
	s.bytes -= int64(len(e.data))
}
