package asyqueue

import (
	"context"
	"errors"
	"fmt"

	"github.com/usherhq/usher/internal/sandbox"
	"github.com/usherhq/usher/internal/uploads"
	"github.com/usherhq/usher/internal/wire"
)

// denial is an error the client hears as `denied {error}`: something went
// wrong before any Asymptote code ran.
type denial struct{ text string }

func (d *denial) Error() string { return d.text }

func deny(format string, args ...any) error { return &denial{text: fmt.Sprintf(format, args...)} }

// upload is one file of a task as the client named it.
type upload struct {
	name    string
	hash    string
	main    bool
	data    []byte
	restore bool // named by hash; data comes from the upload store at run
}

// collector gathers a task's files and options up to an accepted `run`.
type collector struct {
	srv         *Server
	conn        *wire.Conn
	files       []*upload
	opts        sandbox.Task // the options so far; files are kept apart
	missingSent bool
}

// collect reads messages until a `run` whose files are all present, and
// returns the task. A *denial is the client's fault; other errors are the
// connection's (the client went away).
func (c *collector) collect(ctx context.Context) (sandbox.Task, error) {
	for {
		h, err := c.conn.ReadHeader(ctx)
		if err != nil {
			return sandbox.Task{}, c.readError(ctx, err)
		}
		switch h.Verb {
		case "add":
			err = c.add(ctx, h)
		case "options":
			err = c.options(h)
		case "run":
			var done bool
			done, err = c.run(ctx)
			if err == nil && done {
				return c.task(), nil
			}
		default:
			err = deny("%q before \"run\"", h.Verb)
		}
		if err != nil {
			return sandbox.Task{}, c.readError(ctx, err)
		}
	}
}

// readError turns a reading failure into a denial when it is the client's
// fault or the idle limit before run, and passes connection errors on.
func (c *collector) readError(ctx context.Context, err error) error {
	var d *denial
	switch {
	case errors.As(err, &d):
		return err
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return deny("no \"run\" within %v", c.srv.cfg.IdleBeforeRun)
	case wire.IsProtocol(err):
		var tl *wire.TooLargeError
		if errors.As(err, &tl) && tl.What != "header" {
			return c.srv.tooLarge()
		}
		return deny("%s", err.Error())
	}
	return err
}

func (c *collector) add(ctx context.Context, h wire.Header) error {
	var b addBody
	if err := wire.Decode(h, &b, "field"); err != nil {
		return err
	}
	if b.Filename == nil || b.Hash == nil {
		return deny("\"add\" needs \"filename\" and \"hash\"")
	}
	name, hash := *b.Filename, *b.Hash
	if err := sandbox.CheckFileName(name); err != nil {
		return deny("%s", err.Error())
	}
	if !validHash(hash) {
		return deny("hash of %q must be its SHA-256 in 64 lowercase hex digits", name)
	}
	up := &upload{name: name, hash: hash, main: b.Main != nil && *b.Main, restore: b.Restore != nil && *b.Restore}
	if !up.restore {
		data, err := c.conn.ReadPayload(ctx, h, "file "+name, c.srv.cfg.MaxUpload-c.uploaded())
		if err != nil {
			return err
		}
		if uploads.Hash(data) != hash {
			return deny("hash mismatch for %q: the bytes' SHA-256 is not %s", name, hash)
		}
		if err := sandbox.CheckFileContent(name, data); err != nil {
			return deny("%s", err.Error())
		}
		up.data = data
		c.srv.uploads.Put(ctx, hash, data)
	}
	return c.keep(up)
}

// keep adds up to the task, replacing a file of the same name only when
// that one was a restore still waiting for its bytes (a re-upload after
// `missing`).
func (c *collector) keep(up *upload) error {
	for i, f := range c.files {
		if f.name != up.name {
			continue
		}
		if !f.restore || f.data != nil {
			return addedTwice(up.name)
		}
		c.files[i] = up
		return nil
	}
	if len(c.files) >= c.srv.cfg.MaxFiles {
		return c.srv.tooMany()
	}
	c.files = append(c.files, up)
	return nil
}

func (c *collector) options(h wire.Header) error {
	return applyOptions(&c.opts, h, c.srv.d.Timeouts())
}

// run checks the task at `run`. It returns done=false after sending
// `missing` for restores the store no longer has; a second miss is denied.
func (c *collector) run(ctx context.Context) (done bool, err error) {
	var mains []string
	for _, f := range c.files {
		if f.main {
			mains = append(mains, f.name)
		}
	}
	if err := checkMains(len(c.files), mains, c.opts.Interactive); err != nil {
		return false, err
	}
	missing := c.restore(ctx)
	if len(missing) == 0 {
		if c.uploaded() > c.srv.cfg.MaxUpload {
			return false, c.srv.tooLarge()
		}
		return true, nil
	}
	if c.missingSent {
		return false, deny("files still missing after \"missing\": %s", missing[0].Filename)
	}
	c.missingSent = true
	if err := c.conn.Send(ctx, "missing", missing); err != nil {
		return false, err
	}
	return false, nil
}

// restore fills restored files from the upload store and lists those it
// no longer has.
func (c *collector) restore(ctx context.Context) []missingFile {
	var missing []missingFile
	hits := 0
	for _, f := range c.files {
		if !f.restore || f.data != nil {
			continue
		}
		if data, ok := c.srv.uploads.Get(ctx, f.hash); ok {
			f.data = data
			hits++
			continue
		}
		missing = append(missing, missingFile{Filename: f.name, Hash: f.hash})
	}
	c.srv.metrics.restored(hits, len(missing))
	return missing
}

func (c *collector) uploaded() int64 {
	var n int64
	for _, f := range c.files {
		n += int64(len(f.data))
	}
	return n
}

func (c *collector) task() sandbox.Task {
	t := c.opts
	for _, f := range c.files {
		t.Files = append(t.Files, sandbox.File{Name: f.name, Data: f.data, Main: f.main})
	}
	return t
}

// The denial texts a WebSocket session and an HTTP render share.

// checkMains wants one main file, Asymptote source; an interactive task
// (a shell) needs no file at all, and a main flag on one is ignored.
func checkMains(files int, mains []string, interactive bool) error {
	switch {
	case len(mains) > 1:
		return deny("two main files: mark exactly one file with \"main\": true")
	case interactive:
		return nil
	case files == 0:
		return deny("\"run\" with no files")
	case len(mains) == 0:
		return deny("no main file: mark one file with \"main\": true")
	}
	if err := sandbox.CheckMainName(mains[0]); err != nil {
		return deny("%s", err.Error())
	}
	return nil
}

func addedTwice(name string) error { return deny("file %q added twice", name) }

func (s *Server) tooLarge() error {
	return deny("upload too large: at most %d bytes in all", s.cfg.MaxUpload)
}

func (s *Server) tooMany() error { return deny("too many files: at most %d", s.cfg.MaxFiles) }
