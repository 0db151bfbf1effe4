package backend

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/sandbox"
	"github.com/usherhq/usher/internal/sandbox/sandboxtest"
)

func mainFile(source string) []sandbox.File {
	return []sandbox.File{{Name: "main.asy", Data: []byte(source), Main: true}}
}

func TestRemoteRelaysResultAndOutcome(t *testing.T) {
	tb := newTestBackend(t)
	sink := sandboxtest.NewSink()
	r := &Remote{URL: tb.url}
	e, err := r.Start(context.Background(), sandbox.Task{Files: mainFile("draw((0,0)--(1,1));"), Format: "png"}, sink)
	if err != nil {
		t.Fatal(err)
	}
	out := e.Wait()
	if !out.Success || out.Time <= 0 {
		t.Fatalf("outcome %+v, want success with a time", out)
	}
	if sink.ImageCount() != 1 || sink.Formats()[0] != "png" || !bytes.HasPrefix(sink.Image(0), []byte("\x89PNG")) {
		t.Fatalf("results %v, want one png image", sink.Formats())
	}
}

func TestRemoteShortenReachesTheBackend(t *testing.T) {
	tb := newTestBackend(t)
	r := &Remote{URL: tb.url}
	e, err := r.Start(context.Background(), sandbox.Task{Files: mainFile("while(true){}"), Timeout: 20 * time.Second}, sandboxtest.NewSink())
	if err != nil {
		t.Fatal(err)
	}
	tb.rec.start(t)
	e.Shorten(500 * time.Millisecond)
	if out := e.Wait(); out.Error != "Execution aborted due to the time limit (500ms)" {
		t.Fatalf("outcome %+v, want the shortened time limit", out)
	}
}

func TestRemoteInteractiveInput(t *testing.T) {
	tb := newTestBackend(t)
	sink := sandboxtest.NewSink()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e, err := (&Remote{URL: tb.url}).Start(ctx, sandbox.Task{Files: mainFile(""), Interactive: true}, sink)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Input([]byte("write(1+2);\n")); err != nil {
		t.Fatal(err)
	}
	answer := regexp.MustCompile(`(?m)(^|> )3$`)
	sink.WaitFor(t, 20*time.Second, func() bool { return answer.MatchString(sink.Text("")) }, "the answer 3 in the output")
	cancel()
	e.Wait()
	tb.rec.ended(t, 10*time.Second)
}

func TestRemoteReportsALostBackend(t *testing.T) {
	rec := &recorder{Starter: newTestRunner(t), tasks: make(chan sandbox.Task, 4), waited: make(chan sandbox.Outcome, 4)}
	b, err := New(Config{Starter: rec, MaxFiles: testMaxFiles, MaxUpload: testMaxUpload, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(b)
	defer srv.Close()
	link := newTCPLink(t, strings.TrimPrefix(srv.URL, "http://"))
	lost := make(chan struct{}, 1)
	r := &Remote{URL: "ws://" + link.addr(), Lost: func() { lost <- struct{}{} }}
	e, err := r.Start(context.Background(), sandbox.Task{Files: mainFile("while(true){}"), Timeout: 20 * time.Second}, sandboxtest.NewSink())
	if err != nil {
		t.Fatal(err)
	}
	rec.start(t)
	link.cut() // the network between queue server and backend fails
	if out := e.Wait(); out.Success || out.Error != GoneText {
		t.Fatalf("outcome %+v, want %q", out, GoneText)
	}
	select {
	case <-lost:
	default:
		t.Fatal("Lost was not called")
	}
	rec.ended(t, 10*time.Second)
}

// A backend that cannot be reached when its task starts went away for that
// task: the error is ErrGone, whose text is the protocol's
// (docs/design.md, "The queue protocol").
func TestRemoteDialFailureIsGone(t *testing.T) {
	srv := httptest.NewServer(nil)
	url := "ws" + strings.TrimPrefix(srv.URL, "http")
	srv.Close()
	_, err := (&Remote{URL: url}).Start(context.Background(), sandbox.Task{Files: mainFile("")}, sandboxtest.NewSink())
	if !errors.Is(err, ErrGone) {
		t.Fatalf("Start on a closed address = %v; want ErrGone", err)
	}
}

// tcpLink forwards TCP connections to a backend until cut, which breaks
// every connection at once: a real network failure between a queue server
// and its backend.
type tcpLink struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func newTCPLink(t *testing.T, target string) *tcpLink {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &tcpLink{ln: ln}
	t.Cleanup(l.cut)
	go l.accept(target)
	return l
}

func (l *tcpLink) addr() string { return l.ln.Addr().String() }

func (l *tcpLink) accept(target string) {
	for {
		in, err := l.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", target)
		if err != nil {
			in.Close()
			continue
		}
		l.mu.Lock()
		l.conns = append(l.conns, in, out)
		l.mu.Unlock()
		go func() { io.Copy(out, in); out.Close() }()
		go func() { io.Copy(in, out); in.Close() }()
	}
}

func (l *tcpLink) cut() {
	l.ln.Close()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		c.Close()
	}
}
