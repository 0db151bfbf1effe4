// Package examples is the gallery of the web app: figures written for
// usher, each a directory of real files (its .asy files and any data
// file) under gallery/, described by gallery/index.json and embedded in
// the binary (docs/api.md, "GET /api/examples").
package examples

import (
	"embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
)

//go:embed gallery
var gallery embed.FS

// File is one file of an example, in the project file shape the shares
// API and the web app use: text as is, a binary file in base64.
type File struct {
	Filename string `json:"filename"`
	Main     bool   `json:"main"`
	Content  string `json:"content"`
	Encoding string `json:"encoding,omitempty"` // "base64" for a binary file
}

// Example is one entry of GET /api/examples.
type Example struct {
	ID          string   `json:"id"`
	Title       string   `json:"title"`
	Category    string   `json:"category"`
	Description string   `json:"description"`
	Formats     []string `json:"formats"`
	Files       []File   `json:"files"`
	// main names the main file in index.json ("main.asy" when empty).
	Main string `json:"-"`
}

// entry is one example in index.json: everything but its files, which
// are the files of its directory.
type entry struct {
	ID          string   `json:"id"`
	Title       string   `json:"title"`
	Category    string   `json:"category"`
	Description string   `json:"description"`
	Formats     []string `json:"formats"`
	Main        string   `json:"main,omitempty"`
}

// binaryExt are the extensions whose files are sent in base64.
var binaryExt = []string{".png", ".jpg", ".jpeg", ".pdf"}

// All reads the gallery: the examples in index.json's order, each with
// the files of its directory, the main file first.
func All() ([]Example, error) {
	return load(gallery)
}

func load(fsys fs.FS) ([]Example, error) {
	raw, err := fs.ReadFile(fsys, "gallery/index.json")
	if err != nil {
		return nil, fmt.Errorf("examples: %w", err)
	}
	var entries []entry
	if err := json.Unmarshal(raw, &entries); err != nil {
		return nil, fmt.Errorf("examples: index.json: %w", err)
	}
	out := make([]Example, 0, len(entries))
	for _, e := range entries {
		ex, err := loadOne(fsys, e)
		if err != nil {
			return nil, fmt.Errorf("examples: %s: %w", e.ID, err)
		}
		out = append(out, ex)
	}
	return out, nil
}

func loadOne(fsys fs.FS, e entry) (Example, error) {
	if e.Main == "" {
		e.Main = "main.asy"
	}
	ex := Example{ID: e.ID, Title: e.Title, Category: e.Category, Description: e.Description, Formats: e.Formats, Main: e.Main}
	if e.ID == "" || e.Title == "" || e.Category == "" || len(e.Formats) == 0 {
		return ex, fmt.Errorf("id, title, category and formats are required")
	}
	dir := path.Join("gallery", e.ID)
	ents, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return ex, err
	}
	for _, d := range ents {
		data, err := fs.ReadFile(fsys, path.Join(dir, d.Name()))
		if err != nil {
			return ex, err
		}
		f := File{Filename: d.Name(), Main: d.Name() == e.Main, Content: string(data)}
		if slices.Contains(binaryExt, strings.ToLower(path.Ext(d.Name()))) {
			f.Content, f.Encoding = base64.StdEncoding.EncodeToString(data), "base64"
		}
		ex.Files = append(ex.Files, f)
	}
	slices.SortStableFunc(ex.Files, func(a, b File) int {
		if a.Main != b.Main {
			if a.Main {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Filename, b.Filename)
	})
	if len(ex.Files) == 0 || !ex.Files[0].Main {
		return ex, fmt.Errorf("no main file %s", e.Main)
	}
	return ex, nil
}
