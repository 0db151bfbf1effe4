package sandboxtest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/sandbox/sandboxtest"
	"github.com/usherhq/usher/internal/testwait"
)

// However much a run writes, no call blocks, and a waiter sees the end.
func TestSinkNeverBlocks(t *testing.T) {
	s := sandboxtest.NewSink()
	const chunks = 100000
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range chunks - 1 {
			_ = s.Output("stdout", []byte("x"))
		}
		_ = s.Output("stderr", []byte("end"))
	}()
	s.WaitOutput(t, 30*time.Second, "end")
	testwait.Receive(t, 30*time.Second, done, "the writer's last call returned")
	if n := strings.Count(s.Text("stdout"), "x"); n != chunks-1 || s.Text("stderr") != "end" || s.Calls() != chunks {
		t.Fatalf("%d x on stdout, stderr %q, %d calls", n, s.Text("stderr"), s.Calls())
	}
}

func TestSinkFailOn(t *testing.T) {
	s := sandboxtest.NewSink()
	s.FailOn(2)
	if err := s.Output("stdout", []byte("a")); err != nil {
		t.Fatalf("call 1: %v", err)
	}
	if err := s.Result("svg", []byte("<svg/>")); err == nil || err.Error() != "client went away (call 2)" {
		t.Fatalf("call 2: %v", err)
	}
	if s.ImageCount() != 1 || s.Formats()[0] != "svg" || string(s.Image(0)) != "<svg/>" {
		t.Fatalf("images %d, formats %v", s.ImageCount(), s.Formats())
	}
}
