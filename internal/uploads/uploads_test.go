package uploads

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"
	"time"
)

var ctx = context.Background()

type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

func newStore(maxBytes int64) (*Store, *clock) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	return New(Config{MaxBytes: maxBytes, MinAge: 10 * time.Minute, Now: c.now}), c
}

func TestRestoreReturnsStoredBytes(t *testing.T) {
	s, _ := newStore(1 << 10)
	data := []byte("draw(unitcircle);")
	if !s.Put(ctx, Hash(data), data) {
		t.Fatal("Put refused a small file into an empty store")
	}
	got, ok := s.Get(ctx, Hash(data))
	if !ok || !bytes.Equal(got, data) {
		t.Fatalf("Get = %q, %v; want the stored bytes", got, ok)
	}
	if _, ok := s.Get(ctx, Hash([]byte("other"))); ok {
		t.Fatal("Get found a file never stored")
	}
}

func TestHashIsLowercaseHexSHA256(t *testing.T) {
	const want = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	if got := Hash(nil); got != want {
		t.Fatalf("Hash(empty) = %s, want %s", got, want)
	}
}

func TestFileYoungerThanMinAgeIsNeverEvicted(t *testing.T) {
	s, c := newStore(10)
	a := []byte("aaaaaaaa")
	s.Put(ctx, Hash(a), a)
	c.advance(9 * time.Minute)
	b := []byte("bbbbbbbb")
	if s.Put(ctx, Hash(b), b) {
		t.Fatal("Put evicted a file used 9 minutes ago to make room")
	}
	if !s.Has(Hash(a)) {
		t.Fatal("the young file is gone")
	}
	c.advance(time.Minute)
	if !s.Put(ctx, Hash(b), b) {
		t.Fatal("Put refused although the old file is 10 minutes old")
	}
	if s.Has(Hash(a)) || !s.Has(Hash(b)) {
		t.Fatal("want the old file evicted and the new one kept")
	}
}

func TestRestoreRefreshesAge(t *testing.T) {
	s, c := newStore(10)
	a := []byte("aaaaaaaa")
	s.Put(ctx, Hash(a), a)
	c.advance(9 * time.Minute)
	s.Get(ctx, Hash(a))
	c.advance(9 * time.Minute)
	b := []byte("bbbbbbbb")
	if s.Put(ctx, Hash(b), b) {
		t.Fatal("a file restored 9 minutes ago was evicted")
	}
}

func TestFileLargerThanStoreIsNotKept(t *testing.T) {
	s, _ := newStore(4)
	big := []byte("12345")
	if s.Put(ctx, Hash(big), big) {
		t.Fatal("Put kept a file larger than MaxBytes")
	}
	if files, n := s.Usage(); files != 0 || n != 0 {
		t.Fatalf("Usage = %d files, %d bytes; want empty", files, n)
	}
}

func TestFailedPutEvictsNothing(t *testing.T) {
	s, c := newStore(10)
	old, young := []byte("oooo"), []byte("yyyy")
	s.Put(ctx, Hash(old), old)
	c.advance(11 * time.Minute)
	s.Put(ctx, Hash(young), young)
	big := []byte("bbbbbbbb") // fits only if the young file goes too
	if s.Put(ctx, Hash(big), big) {
		t.Fatal("Put made room by evicting a young file")
	}
	if !s.Has(Hash(old)) || !s.Has(Hash(young)) {
		t.Fatal("a refused Put evicted files anyway")
	}
}

// TestStoreKeepsItsPromises drives the store with random operations and
// checks after each one: never over MaxBytes, byte count exact, and every
// file used within MinAge still there.
func TestStoreKeepsItsPromises(t *testing.T) {
	for seed := uint64(0); seed < 50; seed++ {
		rng := rand.New(rand.NewPCG(seed, 1))
		s, c := newStore(1000)
		lastUse := map[string]time.Time{}
		for op := 0; op < 500; op++ {
			data := bytes.Repeat([]byte{byte(rng.IntN(40))}, 1+rng.IntN(300))
			h := Hash(data)
			switch rng.IntN(3) {
			case 0:
				if s.Put(ctx, h, data) {
					lastUse[h] = c.now()
				}
			case 1:
				if _, ok := s.Get(ctx, h); ok {
					lastUse[h] = c.now()
				}
			case 2:
				c.advance(time.Duration(rng.IntN(300)) * time.Second)
			}
			checkPromises(t, seed, s, c.now(), lastUse)
		}
	}
}

func checkPromises(t *testing.T, seed uint64, s *Store, now time.Time, lastUse map[string]time.Time) {
	t.Helper()
	var sum int64
	for el := s.lru.Front(); el != nil; el = el.Next() {
		sum += int64(len(el.Value.(*entry).data))
	}
	if _, n := s.Usage(); n != sum || n > s.cfg.MaxBytes {
		t.Fatalf("seed %d: Usage bytes %d, sum of entries %d, max %d", seed, n, sum, s.cfg.MaxBytes)
	}
	for h, at := range lastUse {
		if now.Sub(at) < s.cfg.MinAge && !s.Has(h) {
			t.Fatalf("seed %d: file used %v ago was evicted", seed, now.Sub(at))
		}
	}
}
