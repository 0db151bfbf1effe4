//go:build linux

// Command gctimer measures how late a wake-up comes while the garbage
// collector marks a large heap: it holds many small linked objects, runs
// full collections back to back (unless -gc=false), and times short waits
// on a time.Timer and on a Linux timerfd read through the network poller.
// It prints the overshoot past each wait: p50, p99 and max. It is the
// measurement behind the scheduled-job lateness tail in
// docs/benchmarks.md ("In process, the engine alone: memory per waiting
// job"); run with:
//
//	go run ./bench/gctimer -objects 3000000 -waits 200
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

// node is one small object of the held heap, with a pointer to mark.
type node struct {
	next *node
	n    int
}

func main() {
	objects := flag.Int("objects", 3_000_000, "small objects held on the heap")
	waits := flag.Int("waits", 200, "waits timed on each clock")
	wait := flag.Duration("wait", 20*time.Millisecond, "length of one wait")
	gc := flag.Bool("gc", true, "run full collections back to back while timing")
	procs := flag.Int("procs", 2, "GOMAXPROCS")
	flag.Parse()
	runtime.GOMAXPROCS(*procs)

	held := make([]*node, *objects)
	for i := range held {
		held[i] = &node{n: i}
		if i > 0 {
			held[i].next = held[i-1]
		}
	}
	stop := make(chan struct{})
	if *gc {
		go collect(stop)
	}
	timer := measure(*waits, *wait, timerWait)
	fd, err := newTimerfd()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gctimer:", err)
		os.Exit(1)
	}
	defer fd.Close()
	poller := measure(*waits, *wait, fd.wait)
	close(stop)
	runtime.KeepAlive(held)
	fmt.Printf("objects %d, GOMAXPROCS %d, collections back to back: %v\n", *objects, *procs, *gc)
	report("time.Timer", timer)
	report("timerfd", poller)
}

// collect runs full collections one after another until stop closes.
func collect(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
			runtime.GC()
		}
	}
}

// measure times n waits of d and returns each one's overshoot.
func measure(n int, d time.Duration, waitFor func(time.Duration) error) []time.Duration {
	late := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		if err := waitFor(d); err != nil {
			fmt.Fprintln(os.Stderr, "gctimer:", err)
			os.Exit(1)
		}
		late = append(late, time.Since(start)-d)
	}
	return late
}

func timerWait(d time.Duration) error {
	<-time.NewTimer(d).C
	return nil
}

// timerfd is a Linux timer whose expiry is read through the network
// poller (a nonblocking descriptor given to os.NewFile).
type timerfd struct {
	fd   int
	file *os.File
}

func newTimerfd() (*timerfd, error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("timerfd_create: %w", err)
	}
	return &timerfd{fd: fd, file: os.NewFile(uintptr(fd), "timerfd")}, nil
}

func (t *timerfd) wait(d time.Duration) error {
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(d))}
	if err := unix.TimerfdSettime(t.fd, 0, &spec, nil); err != nil {
		return fmt.Errorf("timerfd_settime: %w", err)
	}
	var buf [8]byte
	if _, err := t.file.Read(buf[:]); err != nil {
		return fmt.Errorf("reading the timerfd: %w", err)
	}
	return nil
}

func (t *timerfd) Close() error { return t.file.Close() }

// report prints the overshoot's p50, p99 and max.
func report(name string, late []time.Duration) {
	slices.Sort(late)
	pct := func(p int) time.Duration { return late[min(len(late)-1, len(late)*p/100)] }
	fmt.Printf("%-10s overshoot p50 %v  p99 %v  max %v\n", name, pct(50).Round(10*time.Microsecond),
		pct(99).Round(10*time.Microsecond), late[len(late)-1].Round(10*time.Microsecond))
}
