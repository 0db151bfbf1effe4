package sandbox

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"time"
)

// pipes are the parent's ends of asy's stdio.
type pipes struct {
	out, err *os.File // read ends; err is nil when stderr is merged
	in       *os.File // write end; nil unless interactive
	child    []*os.File
}

// open makes the pipes; child is stdin, stdout, stderr of the process.
func (p *pipes) open(separate, interactive bool) error {
	outR, outW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("sandbox: stdout pipe: %w", err)
	}
	p.out, p.child = outR, []*os.File{nil, outW, outW}
	if separate {
		errR, errW, err := os.Pipe()
		if err != nil {
			p.closeAll()
			return fmt.Errorf("sandbox: stderr pipe: %w", err)
		}
		p.err, p.child[2] = errR, errW
	}
	if interactive {
		inR, inW, err := os.Pipe()
		if err != nil {
			p.closeAll()
			return fmt.Errorf("sandbox: stdin pipe: %w", err)
		}
		p.in, p.child[0] = inW, inR
	}
	return nil
}

func (p *pipes) closeAll() {
	for _, f := range append([]*os.File{p.out, p.err, p.in}, p.child...) {
		if f != nil {
			f.Close()
		}
	}
}

// failed reports a process that did not start, with what it printed (a
// bubblewrap error message, usually).
func (p *pipes) failed(err error) error {
	_ = p.out.SetReadDeadline(time.Now().Add(time.Second))
	msg, _ := io.ReadAll(io.LimitReader(p.out, 4*kiB))
	if p.err != nil {
		_ = p.err.SetReadDeadline(time.Now().Add(time.Second))
		m, _ := io.ReadAll(io.LimitReader(p.err, 4*kiB))
		msg = append(msg, m...)
	}
	for _, f := range []*os.File{p.out, p.err, p.in} {
		if f != nil {
			f.Close()
		}
	}
	if len(msg) > 0 {
		return fmt.Errorf("%w: %s", err, msg)
	}
	return err
}

// promptToken is an interactive asy's prompt: random, so that output is
// unlikely to contain it by chance, and framed by ASCII unit separators.
func promptToken() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "\x1fusher-prompt-" + hex.EncodeToString(b[:]) + "\x1f"
}
