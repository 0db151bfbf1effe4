package shares

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/redisq"
	"github.com/usherhq/usher/internal/redisq/redistest"
	"github.com/usherhq/usher/internal/sqlitedb"
	"github.com/usherhq/usher/internal/testclock"
)

// backend opens stores of one kind on one place: two stores opened by
// the same backend are two processes (a restart, or two queue servers)
// on the same data.
type backend struct {
	name string
	open func(t *testing.T, cfg Config) Store
}

func sqliteBackend(t *testing.T) backend {
	path := filepath.Join(t.TempDir(), "usher.db")
	return backend{"sqlite", func(t *testing.T, cfg Config) Store {
		t.Helper()
		db, err := sqlitedb.Open(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		s, err := OpenSQLite(context.Background(), db, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}}
}

func redisBackend(t *testing.T) backend {
	url := redistest.Start(t).URL()
	return backend{"redis", func(t *testing.T, cfg Config) Store {
		t.Helper()
		rdb, err := redisq.Open(context.Background(), url, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rdb.Close() })
		return NewRedis(rdb, redisq.NewKeys(redisq.DefaultPrefix), cfg)
	}}
}

// eachBackend runs f on a fresh SQLite file and a fresh redis-server.
func eachBackend(t *testing.T, f func(t *testing.T, b backend)) {
	for _, mk := range []func(*testing.T) backend{sqliteBackend, redisBackend} {
		b := mk(t)
		t.Run(b.name, func(t *testing.T) { f(t, b) })
	}
}

func testConfig(c *testclock.Clock) Config {
	return Config{MaxFiles: 4, MaxBytes: 100, Now: c.Now}
}

func newClock() *testclock.Clock { return testclock.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)) }

var project = []File{
	{Filename: "main.asy", Main: true, Content: "import lib;\ndraw(unitcircle);\n"},
	{Filename: "lib.asy", Content: "real r = 1;\n"},
}

// projectN is a distinct one-file project of about 40 stored bytes.
func projectN(n int) []File {
	return []File{{Filename: "main.asy", Main: true, Content: fmt.Sprintf("dot((%d,0));", n)}}
}

func storedSize(files []File) int64 {
	_, data, err := (Config{MaxFiles: 99, MaxBytes: 1 << 20}).encode(files)
	if err != nil {
		panic(err)
	}
	return int64(len(data))
}

func TestShareOpensFromAnotherProcess(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		cfg := testConfig(newClock())
		id, created, err := b.open(t, cfg).Put(ctx, project)
		if err != nil || !created || len(id) != IDLength {
			t.Fatalf("Put = %q, %v, %v", id, created, err)
		}
		got, err := b.open(t, cfg).Get(ctx, id)
		if err != nil || !reflect.DeepEqual(got, project) {
			t.Fatalf("Get from another store on the same data = %+v, %v", got, err)
		}
	})
}

func TestSameProjectSameID(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t, testConfig(newClock()))
		id1, _, _ := s.Put(context.Background(), project)
		reversed := []File{project[1], project[0]}
		id2, created, err := s.Put(context.Background(), reversed)
		if err != nil || id2 != id1 || created {
			t.Fatalf("second Put = %q (first %q), created %v, %v", id2, id1, created, err)
		}
		if n, bytes, err := s.Usage(context.Background()); err != nil || n != 1 || bytes != storedSize(project) {
			t.Fatalf("Usage = %d shares, %d bytes, %v; want 1 and %d", n, bytes, err, storedSize(project))
		}
	})
	changed := []File{project[0], {Filename: "lib.asy", Content: "real r = 2;\n"}}
	if ID(changed) == ID(project) {
		t.Fatal("a changed file kept the id")
	}
}

// A binary file goes in as base64 and comes back as base64, byte for byte,
// from another process; its size counts decoded bytes; a text file sent
// as base64 comes back as text, with the id of the same text sent plain.
func TestBinaryFiles(t *testing.T) {
	png := "\x89PNG\r\n\x1a\n" + strings.Repeat("\x00\xff", 40) // 88 bytes: 120 in base64, the limit is 100
	files := []File{
		{Filename: "main.asy", Main: true, Content: `graphic("p.png");`},
		{Filename: "p.png", Content: base64.StdEncoding.EncodeToString([]byte(png)), Encoding: EncodingBase64},
	}
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		cfg := testConfig(newClock())
		cfg.MaxBytes = int64(len(png) + len(files[0].Content))
		id, _, err := b.open(t, cfg).Put(ctx, files)
		if err != nil {
			t.Fatal(err)
		}
		got, err := b.open(t, cfg).Get(ctx, id)
		if err != nil || !reflect.DeepEqual(got, files) {
			t.Fatalf("Get = %+v, %v; want %+v", got, err, files)
		}
		if data, err := got[1].Data(); err != nil || string(data) != png {
			t.Fatalf("the png came back as %q, %v", data, err)
		}
		asBase64 := []File{files[0], {Filename: "d.csv", Content: base64.StdEncoding.EncodeToString([]byte("1,2\n")), Encoding: EncodingBase64}}
		plain := []File{files[0], {Filename: "d.csv", Content: "1,2\n"}}
		id2, _, err := b.open(t, cfg).Put(ctx, asBase64)
		if err != nil || id2 != ID(plain) {
			t.Fatalf("base64 text: id %q, %v; want the plain text's %q", id2, err, ID(plain))
		}
		if got, _ := b.open(t, cfg).Get(ctx, id2); !reflect.DeepEqual(got, plain) {
			t.Fatalf("text sent as base64 came back as %+v", got)
		}
	})
}

func TestGetErrors(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t, testConfig(newClock()))
		if _, err := s.Get(context.Background(), strings.Repeat("A", IDLength)); !errors.Is(err, ErrNotFound) {
			t.Fatalf("unknown id: %v", err)
		}
		for _, id := range []string{"", "short", strings.Repeat("!", IDLength), strings.Repeat("A", IDLength+1), "../../../../etc/passwd"} {
			if _, err := s.Get(context.Background(), id); !errors.Is(err, ErrBadID) {
				t.Fatalf("Get(%q) = %v, want ErrBadID", id, err)
			}
			if err := s.Delete(context.Background(), id); !errors.Is(err, ErrBadID) {
				t.Fatalf("Delete(%q) = %v, want ErrBadID", id, err)
			}
		}
	})
}

func TestCheckRefusals(t *testing.T) {
	main := File{Filename: "main.asy", Main: true, Content: "x"}
	cases := []struct {
		name  string
		files []File
		want  error
		text  string
	}{
		{"no files", nil, ErrInvalid, `"files" must hold 1 to 4 files`},
		{"too many files", []File{main, {Filename: "a.asy"}, {Filename: "b.asy"}, {Filename: "c.asy"}, {Filename: "d.asy"}}, ErrInvalid, "1 to 4"},
		{"no main", []File{{Filename: "a.asy"}}, ErrInvalid, "exactly one file"},
		{"two mains", []File{main, {Filename: "b.asy", Main: true}}, ErrInvalid, "2 do"},
		{"bad name", []File{{Filename: "../x.asy", Main: true}}, ErrInvalid, `"filename" "../x.asy"`},
		{"same name twice", []File{main, main}, ErrInvalid, "twice"},
		{"not UTF-8", []File{{Filename: "main.asy", Main: true, Content: "\xff"}}, ErrInvalid, `file "main.asy" is not text: it is not valid UTF-8`},
		{"main not .asy", []File{{Filename: "d.csv", Main: true, Content: "1,2"}}, ErrInvalid, `the main file must be Asymptote source ending in ".asy": "d.csv"`},
		{"extension", []File{main, {Filename: "x.sh", Content: "ls"}}, ErrInvalid, "file name extension is not allowed"},
		{"png that is text", []File{main, {Filename: "p.png", Content: "aGVsbG8=", Encoding: "base64"}}, ErrInvalid, `file "p.png" is not a PNG image`},
		{"png sent as text", []File{main, {Filename: "p.png", Content: "hello"}}, ErrInvalid, `file "p.png" is not a PNG image`},
		{"bad base64", []File{main, {Filename: "p.png", Content: "%%%", Encoding: "base64"}}, ErrInvalid, `"content" of "p.png" is not base64`},
		{"bad encoding", []File{main, {Filename: "d.csv", Content: "1", Encoding: "hex"}}, ErrInvalid, `"encoding" of "d.csv" must be "base64" or absent`},
		{"decoded too large", []File{main, {Filename: "d.csv", Content: base64.StdEncoding.EncodeToString([]byte(strings.Repeat("1", 100))), Encoding: "base64"}}, ErrTooLarge, "101 bytes"},
		{"too large", []File{{Filename: "main.asy", Main: true, Content: strings.Repeat("x", 101)}}, ErrTooLarge, "101 bytes"},
	}
	eachBackend(t, func(t *testing.T, b backend) {
		cfg := testConfig(newClock())
		s := b.open(t, cfg)
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				err := cfg.Check(tc.files)
				if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
					t.Fatalf("Check = %v, want %v containing %q", err, tc.want, tc.text)
				}
				if _, _, err := s.Put(context.Background(), tc.files); !errors.Is(err, tc.want) {
					t.Fatalf("Put = %v, want %v", err, tc.want)
				}
			})
		}
		if n, bytes, _ := s.Usage(context.Background()); n != 0 || bytes != 0 {
			t.Fatalf("refused projects left %d shares, %d bytes", n, bytes)
		}
	})
}

// A share expires when it has not been opened (or shared again) for the
// retention; readers are then told it expired, and sharing the same
// files again brings it back.
func TestRetentionCountsFromLastOpen(t *testing.T) {
	const retention = 30 * 24 * time.Hour
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		c := newClock()
		cfg := testConfig(c)
		cfg.Retention = retention
		s := b.open(t, cfg)
		id, _, err := s.Put(ctx, project)
		if err != nil {
			t.Fatal(err)
		}
		for range 3 { // each open restarts the count
			c.Advance(retention - time.Second)
			if _, err := s.Get(ctx, id); err != nil {
				t.Fatalf("Get %v after the last open: %v", retention-time.Second, err)
			}
		}
		c.Advance(retention)
		_, err = s.Get(ctx, id)
		if !errors.Is(err, ErrGone) || !strings.Contains(err.Error(), "expired: it was not opened for 30 days") {
			t.Fatalf("Get after the retention = %v, want ErrGone saying it expired", err)
		}
		if n, bytes, _ := s.Usage(ctx); n != 0 || bytes != 0 {
			t.Fatalf("an expired share still counts: %d shares, %d bytes", n, bytes)
		}
		if _, created, err := s.Put(ctx, project); err != nil || !created {
			t.Fatalf("sharing the expired project again = created %v, %v", created, err)
		}
		if _, err := s.Get(ctx, id); err != nil {
			t.Fatalf("Get of the shared-again project: %v", err)
		}
	})
}

func TestPruneExpiresUnopenedShares(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		c := newClock()
		cfg := testConfig(c)
		cfg.Retention = time.Hour
		s := b.open(t, cfg)
		for i := range 5 {
			if _, _, err := s.Put(ctx, projectN(i)); err != nil {
				t.Fatal(err)
			}
		}
		c.Advance(30 * time.Minute)
		kept, _, _ := s.Put(ctx, projectN(100))
		c.Advance(45 * time.Minute)
		if n, err := s.Prune(ctx); err != nil || n != 5 {
			t.Fatalf("Prune = %d, %v; want the 5 shares unopened for 75 minutes", n, err)
		}
		if n, bytes, _ := s.Usage(ctx); n != 1 || bytes != storedSize(projectN(100)) {
			t.Fatalf("Usage after prune = %d shares, %d bytes", n, bytes)
		}
		if _, err := s.Get(ctx, ID(projectN(0))); !errors.Is(err, ErrGone) {
			t.Fatalf("Get of a pruned share = %v, want ErrGone", err)
		}
		if _, err := s.Get(ctx, kept); err != nil {
			t.Fatalf("Get of the young share: %v", err)
		}
	})
}

func TestTombstonesAreForgottenAfterGoneFor(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		c := newClock()
		s := b.open(t, testConfig(c))
		id, _, _ := s.Put(ctx, project)
		if err := s.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
		c.Advance(GoneFor - time.Second)
		if _, err := s.Prune(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, id); !errors.Is(err, ErrGone) {
			t.Fatalf("Get just within GoneFor of the delete = %v, want ErrGone", err)
		}
		c.Advance(2 * time.Second)
		if _, err := s.Prune(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, id); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get long after the delete = %v, want ErrNotFound", err)
		}
	})
}

// At the quota a new share is refused with ErrFull; one shared before
// is still answered, and room made by a delete or an expiry is used.
func TestQuotaRefusesNewShares(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		c := newClock()
		cfg := testConfig(c)
		cfg.Retention = 24 * time.Hour
		cfg.Quota = storedSize(projectN(1)) + storedSize(projectN(2))
		s := b.open(t, cfg)
		first, _, err := s.Put(ctx, projectN(1))
		if err != nil {
			t.Fatal(err)
		}
		c.Advance(time.Hour)
		if _, _, err := s.Put(ctx, projectN(2)); err != nil {
			t.Fatalf("second share within the quota: %v", err)
		}
		_, _, err = s.Put(ctx, projectN(3))
		if !errors.Is(err, ErrFull) || !strings.Contains(err.Error(), "shares are full") {
			t.Fatalf("Put beyond the quota = %v, want ErrFull", err)
		}
		if _, created, err := s.Put(ctx, projectN(1)); err != nil || created {
			t.Fatalf("sharing a kept project again at the quota = created %v, %v", created, err)
		}
		if err := s.Delete(ctx, ID(projectN(2))); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Put(ctx, projectN(3)); err != nil {
			t.Fatalf("Put after a delete made room: %v", err)
		}
		c.Advance(24*time.Hour - time.Minute) // the first share was shared again an hour in: it outlives this
		if _, _, err := s.Put(ctx, projectN(4)); !errors.Is(err, ErrFull) {
			t.Fatalf("Put while both shares are young = %v, want ErrFull", err)
		}
		c.Advance(time.Hour + time.Minute) // now both are past the retention
		if _, _, err := s.Put(ctx, projectN(4)); err != nil {
			t.Fatalf("Put after expiry made room: %v", err)
		}
		if _, err := s.Get(ctx, first); !errors.Is(err, ErrGone) {
			t.Fatalf("Get of the expired first share = %v", err)
		}
	})
}

func TestDelete(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		cfg := testConfig(newClock())
		s, other := b.open(t, cfg), b.open(t, cfg)
		id, _, _ := s.Put(ctx, project)
		keep, _, _ := s.Put(ctx, projectN(1))
		if err := s.Delete(ctx, id); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		_, err := other.Get(ctx, id)
		if !errors.Is(err, ErrGone) || !strings.Contains(err.Error(), "deleted by the operator") {
			t.Fatalf("Get after delete = %v, want ErrGone saying the operator deleted it", err)
		}
		if err := other.Delete(ctx, id); !errors.Is(err, ErrNotFound) {
			t.Fatalf("second Delete = %v, want ErrNotFound", err)
		}
		if err := s.Delete(ctx, strings.Repeat("A", IDLength)); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Delete of an unknown share = %v, want ErrNotFound", err)
		}
		if n, bytes, _ := s.Usage(ctx); n != 1 || bytes != storedSize(projectN(1)) {
			t.Fatalf("Usage after delete = %d shares, %d bytes", n, bytes)
		}
		if _, err := other.Get(ctx, keep); err != nil {
			t.Fatalf("the other share: %v", err)
		}
	})
}

// Writers racing through two stores on the same data never take the
// shares beyond the quota, and the byte count stays exact.
func TestQuotaHoldsUnderConcurrentWriters(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		cfg := testConfig(newClock())
		cfg.Quota = 20 * storedSize(projectN(10))
		stores := []Store{b.open(t, cfg), b.open(t, cfg)}
		var wg sync.WaitGroup
		var mu sync.Mutex
		kept := map[string]int64{}
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 10 {
					files := projectN(10 + i*8 + w)
					id, _, err := stores[w%2].Put(ctx, files)
					if errors.Is(err, ErrFull) {
						continue
					}
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					kept[id] = storedSize(files)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		var sum int64
		for _, n := range kept {
			sum += n
		}
		n, bytes, err := stores[0].Usage(ctx)
		if err != nil || n != len(kept) || bytes != sum || bytes > cfg.Quota {
			t.Fatalf("Usage = %d shares, %d bytes, %v; %d accepted with %d bytes; quota %d", n, bytes, err, len(kept), sum, cfg.Quota)
		}
		if n < 18 {
			t.Fatalf("only %d shares accepted; the quota holds about 20", n)
		}
	})
}

// Any string as an id is refused as malformed (ErrBadID) or looked up
// (ErrNotFound in an empty store); nothing else, and a string refused is
// never one that ID could make.
func FuzzGetID(f *testing.F) {
	for _, seed := range []string{"", strings.Repeat("A", IDLength), "../../etc/passwd", strings.Repeat("-_", IDLength/2),
		"A\x00" + strings.Repeat("A", IDLength-2), ID(project)} {
		f.Add(seed)
	}
	db, err := sqlitedb.Open(context.Background(), filepath.Join(f.TempDir(), "usher.db"))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { db.Close() })
	s, err := OpenSQLite(context.Background(), db, Config{MaxFiles: 4, MaxBytes: 100})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, id string) {
		_, err := s.Get(context.Background(), id)
		switch {
		case errors.Is(err, ErrBadID):
			if len(id) == IDLength && strings.Trim(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") == "" {
				t.Fatalf("Get(%q) refused an id of the right form", id)
			}
		case errors.Is(err, ErrNotFound):
		default:
			t.Fatalf("Get(%q) = %v, want ErrBadID or ErrNotFound", id, err)
		}
	})
}
