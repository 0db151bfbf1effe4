package shares

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/usherhq/usher/internal/sqlitedb"
)

func openStore(t *testing.T, path string) *Store {
	t.Helper()
	db, err := sqlitedb.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s, err := Open(context.Background(), db, 4, 100)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var project = []File{
	{Filename: "main.asy", Main: true, Content: "import lib;\ndraw(unitcircle);\n"},
	{Filename: "lib.asy", Content: "real r = 1;\n"},
}

func TestShareSurvivesReopeningTheFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "usher.db")
	id, created, err := openStore(t, path).Put(ctx, project)
	if err != nil || !created || len(id) != IDLength {
		t.Fatalf("Put = %q, %v, %v", id, created, err)
	}
	got, err := openStore(t, path).Get(ctx, id)
	if err != nil || !reflect.DeepEqual(got, project) {
		t.Fatalf("Get after reopen = %+v, %v", got, err)
	}
}

func TestSameProjectSameID(t *testing.T) {
	s := openStore(t, filepath.Join(t.TempDir(), "usher.db"))
	id1, _, _ := s.Put(context.Background(), project)
	reversed := []File{project[1], project[0]}
	id2, created, err := s.Put(context.Background(), reversed)
	if err != nil || id2 != id1 || created {
		t.Fatalf("second Put = %q (first %q), created %v, %v", id2, id1, created, err)
	}
	changed := []File{project[0], {Filename: "lib.asy", Content: "real r = 2;\n"}}
	if ID(changed) == id1 {
		t.Fatal("a changed file kept the id")
	}
}

func TestGetErrors(t *testing.T) {
	s := openStore(t, filepath.Join(t.TempDir(), "usher.db"))
	if _, err := s.Get(context.Background(), strings.Repeat("A", IDLength)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown id: %v", err)
	}
	for _, id := range []string{"", "short", strings.Repeat("!", IDLength), strings.Repeat("A", IDLength+1)} {
		if _, err := s.Get(context.Background(), id); !errors.Is(err, ErrBadID) {
			t.Fatalf("Get(%q) = %v, want ErrBadID", id, err)
		}
	}
}

func TestCheckRefusals(t *testing.T) {
	s := openStore(t, filepath.Join(t.TempDir(), "usher.db"))
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
		{"not UTF-8", []File{{Filename: "main.asy", Main: true, Content: "\xff"}}, ErrInvalid, "not UTF-8"},
		{"too large", []File{{Filename: "main.asy", Main: true, Content: strings.Repeat("x", 101)}}, ErrTooLarge, "101 bytes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := s.Check(tc.files)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("Check = %v, want %v containing %q", err, tc.want, tc.text)
			}
			if _, _, err := s.Put(context.Background(), tc.files); err == nil {
				t.Fatal("Put stored a refused project")
			}
		})
	}
}
