package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/usherhq/usher/client"
	"github.com/usherhq/usher/jobtype"
)

// What a job's command can say beside its exit code (docs/agents.md,
// "What a handler can say"): lines written to the file descriptor named
// by USHER_CONTROL_FD (3), one command each:
//
//	progress VALUE [MESSAGE]   VALUE from 0 to 1; sent to the server at once
//	result JSON                the job's JSON result (the last one counts)
//	snooze MS                  run the job again after MS milliseconds, not
//	                           counted as an attempt (whatever the exit code)
//	cancel [MESSAGE]           fail the job for good, no retry
//
// A line the agent cannot take is noted at the end of the job's output.

// controlFD is the command's file descriptor of the control channel: the
// first of exec.Cmd's ExtraFiles.
const controlFD = 3

// maxControlLine caps a control line: a result at its limit and the word.
const maxControlLine = jobtype.MaxResult + 64

// control is what a command said on its control channel.
type control struct {
	mu     sync.Mutex
	snooze time.Duration
	cancel *string
	notes  []string
	done   chan struct{}
}

// openControl makes the control pipe: the command gets its write end.
func openControl() (read, write *os.File, err error) {
	read, write, err = os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("control pipe: %w", err)
	}
	return read, write, nil
}

// readControl reads the command's control lines until the pipe closes.
func readControl(ctx context.Context, r io.ReadCloser) *control {
	c := &control{done: make(chan struct{})}
	go func() {
		defer close(c.done)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 0, 4096), maxControlLine)
		for n := 1; sc.Scan(); n++ {
			if err := c.apply(ctx, sc.Text()); err != nil {
				c.note(fmt.Sprintf("usher: control line %d ignored: %v", n, err))
			}
		}
		if err := sc.Err(); err != nil {
			c.note(fmt.Sprintf("usher: control channel: %v", err))
			_, _ = io.Copy(io.Discard, r)
		}
	}()
	return c
}

func (c *control) note(s string) {
	c.mu.Lock()
	c.notes = append(c.notes, s)
	c.mu.Unlock()
}

// apply carries out one control line.
func (c *control) apply(ctx context.Context, line string) error {
	word, rest, _ := strings.Cut(strings.TrimRight(line, "\r"), " ")
	switch word {
	case "progress":
		v, msg, _ := strings.Cut(rest, " ")
		value, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("progress: value %q is not a number from 0 to 1", v)
		}
		return client.ReportProgress(ctx, value, msg)
	case "result":
		return client.SetResult(ctx, json.RawMessage(rest))
	case "snooze":
		ms, err := strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
		if err != nil || ms < 1 || ms > jobtype.MaxSnoozeMs {
			return fmt.Errorf("snooze: %q is not a number of milliseconds from 1 to %d", rest, jobtype.MaxSnoozeMs)
		}
		c.mu.Lock()
		c.snooze = time.Duration(ms) * time.Millisecond
		c.mu.Unlock()
	case "cancel":
		c.mu.Lock()
		c.cancel = &rest
		c.mu.Unlock()
	default:
		return fmt.Errorf("unknown command %q (progress, result, snooze or cancel)", word)
	}
	return nil
}

// finish waits for the channel to close (the process group was killed,
// so it does, or it is closed after two seconds) and returns the notes
// and the error that ends the job: a cancel or snooze if the command
// asked for one, else exitErr.
func (c *control) finish(r io.Closer, exitErr error) (notes string, err error) {
	t := time.NewTimer(2 * time.Second)
	select {
	case <-c.done:
	case <-t.C:
		r.Close()
		<-c.done
	}
	t.Stop()
	r.Close()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.notes) > 0 {
		notes = strings.Join(c.notes, "\n") + "\n"
	}
	switch {
	case c.cancel != nil:
		msg := *c.cancel
		if msg == "" && exitErr != nil {
			msg = exitErr.Error()
		}
		var cause error = &exitError{code: 1, msg: msg}
		var ee *exitError
		if errors.As(exitErr, &ee) {
			cause = &exitError{code: ee.code, msg: msg}
		}
		if msg == "" {
			cause = nil
		}
		return notes, client.CancelJob(cause)
	case c.snooze > 0:
		return notes, client.Snooze(c.snooze)
	}
	return notes, exitErr
}
