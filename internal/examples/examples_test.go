package examples

import (
	"context"
	"encoding/base64"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/usherhq/usher/internal/sandbox"
	"github.com/usherhq/usher/internal/sandbox/sandboxtest"
)

func TestGalleryIsComplete(t *testing.T) {
	all, err := All()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) < 20 {
		t.Errorf("%d examples; the gallery has at least 20", len(all))
	}
	ids, categories := map[string]bool{}, map[string]bool{}
	for _, ex := range all {
		if ids[ex.ID] {
			t.Errorf("example %s twice", ex.ID)
		}
		ids[ex.ID] = true
		categories[ex.Category] = true
		if ex.Description == "" {
			t.Errorf("%s has no description", ex.ID)
		}
		for _, f := range ex.Formats {
			if !slices.Contains(sandbox.Formats, f) {
				t.Errorf("%s offers %q, not a format of /asy", ex.ID, f)
			}
		}
	}
	for _, c := range []string{"2D drawing", "Graphs", "Geometry", "Labels with LaTeX", "3D", "Data", "Animation", "TeX packages"} {
		if !categories[c] {
			t.Errorf("no example in category %q", c)
		}
	}
}

// Every example compiles in the real sandbox in every format it offers,
// and gives one image of that format.
func TestEveryExampleCompilesInEveryFormat(t *testing.T) {
	all, err := All()
	if err != nil {
		t.Fatal(err)
	}
	r, err := sandbox.New(sandbox.Config{WorkRoot: sandboxtest.WorkRoot(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	// One at a time: the other packages' tests share the machine's cores,
	// and some of them give asy only seconds.
	for _, ex := range all {
		files := taskFiles(t, ex)
		for _, f := range files {
			if err := sandbox.CheckFileName(f.Name); err != nil {
				t.Errorf("%s: the sandbox refuses a file: %v", ex.ID, err)
			}
		}
		for _, format := range ex.Formats {
			compile(t, r, ex.ID, sandbox.Task{Files: files, Format: format})
		}
	}
}

func taskFiles(t *testing.T, ex Example) []sandbox.File {
	var files []sandbox.File
	for _, f := range ex.Files {
		data := []byte(f.Content)
		if f.Encoding == "base64" {
			var err error
			if data, err = base64.StdEncoding.DecodeString(f.Content); err != nil {
				t.Fatalf("%s/%s: %v", ex.ID, f.Filename, err)
			}
		}
		files = append(files, sandbox.File{Name: f.Filename, Data: data, Main: f.Main})
	}
	return files
}

func compile(t *testing.T, r *sandbox.Runner, id string, task sandbox.Task) {
	sink := sandboxtest.NewSink()
	run, err := r.Start(context.Background(), task, sink)
	if err != nil {
		t.Errorf("%s in %s: %v", id, task.Format, err)
		return
	}
	o := run.Wait()
	if !o.Success || sink.ImageCount() != 1 || !slices.Equal(sink.Formats(), []string{task.Format}) {
		t.Errorf("%s in %s: %+v, images %v; output:\n%s", id, task.Format, o, sink.Formats(), sink)
		return
	}
	t.Logf("%s in %s: %v", id, task.Format, o.Time)
}

// A malformed index is refused with the example it names.
func TestLoadRefusesAnExampleWithoutMainFile(t *testing.T) {
	_, err := loadOne(gallery, entry{ID: "circles", Title: "x", Category: "y", Formats: []string{"svg"}, Main: "nothere.asy"})
	if err == nil || !strings.Contains(err.Error(), "no main file nothere.asy") {
		t.Fatalf("loadOne: %v", err)
	}
	if _, err := loadOne(gallery, entry{ID: "circles"}); err == nil || errors.Is(err, nil) {
		t.Fatalf("loadOne without title: %v", err)
	}
}
