package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"
)

const (
	// diskCheckEvery is how often the work directory's size is checked
	// against Limits.Disk.
	diskCheckEvery = 100 * time.Millisecond
	// drainGrace bounds how long the end of a run waits for output pipes
	// still held open by a process outside the killed tree (insecure mode).
	drainGrace = 5 * time.Second
)

// Start validates t, writes its files into a fresh work directory and starts
// asy. Cancelling ctx aborts the run. The sink receives output and images
// until Wait returns.
func (r *Runner) Start(ctx context.Context, t Task, sink Sink) (*Run, error) {
	t, err := r.limits.validate(t)
	if err != nil {
		return nil, err
	}
	if sink == nil {
		return nil, errors.New("sandbox: Start: nil Sink")
	}
	if r.insecure {
		r.log.Warn("sandbox: running a task WITHOUT the sandbox (insecure mode): the job can read host files and use the network")
	}
	dir, err := r.newWorkDir(t.Files)
	if err != nil {
		return nil, err
	}
	var mounts []string
	if r.display(t) {
		if mounts, err = r.shaderCacheMounts(dir); err != nil {
			return nil, errors.Join(fmt.Errorf("sandbox: prepare the work directory: %w", err), dir.remove())
		}
	}
	run := &Run{
		r: r, task: t, sink: sink, ctx: ctx, dir: dir, limit: t.Timeout, mounts: mounts,
		wake:    make(chan struct{}, 1),
		abortCh: make(chan string, 1),
		done:    make(chan struct{}),
	}
	run.takeSpare()
	if err := run.launch(); err != nil {
		run.releaseSpare()
		if rmErr := dir.remove(); rmErr != nil {
			r.log.Error("sandbox: cleanup after a failed start", "err", rmErr)
		}
		return nil, err
	}
	go run.supervise()
	return run, nil
}

// launch starts the process and the goroutines that serve it.
func (run *Run) launch() error {
	t := run.task
	token := ""
	if t.Interactive {
		token = promptToken()
	}
	mounts := run.mounts
	if run.spare != nil {
		mounts = append(spareMount(run.dir.path), mounts...)
	}
	cmd := run.r.command(run.dir, t, token, run.spare != nil, mounts)
	var p pipes
	if err := p.open(t.SeparateStderr, t.Interactive); err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = p.child[1], p.child[2]
	if p.in != nil { // else /dev/null: latex and friends get EOF, not a hang
		cmd.Stdin = p.child[0]
	}
	proc, err := startProcess(cmd, !run.r.insecure)
	for _, f := range p.child {
		if f != nil {
			f.Close()
		}
	}
	if err != nil {
		return p.failed(err)
	}
	run.proc, run.start = proc, proc.startAt
	run.startForwarder(p, token)
	if t.Interactive {
		run.in = newFeeder(p.in, run.r.limits.Upload)
		go run.in.loop()
	}
	go proc.wait()
	return nil
}

// startForwarder starts the stream readers and the forwarder's loop.
func (run *Run) startForwarder(p pipes, token string) {
	img := &images{
		dirfd: run.dir.fd, dir: run.dir.path,
		name: outputName + "." + run.task.Format,
		max:  run.r.limits.Image, hook: run.r.beforeImage,
	}
	f := newForwarder(run.sink, run.task.Format, run.r.limits.Output, token, img, run.requestAbort)
	f.files = []*os.File{p.out}
	go f.read(p.out, Stdout)
	if p.err != nil {
		f.files = append(f.files, p.err)
		go f.read(p.err, Stderr)
	}
	f.streams = len(f.files)
	run.out = f
	go f.loop()
}

// requestAbort asks the supervisor to abort; the first reason wins.
func (run *Run) requestAbort(reason string) {
	select {
	case run.abortCh <- reason:
	default:
	}
}

// nudge wakes the supervisor without blocking.
func nudge(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Shorten lowers the wall-clock limit to timeout counted from the start of
// the run, if that is earlier than the current limit; a later limit is
// ignored. A limit already passed (timeout ≤ the time run so far, 0
// included) stops the run at once with the time-limit error naming timeout.
func (run *Run) Shorten(timeout time.Duration) {
	run.mu.Lock()
	if timeout < run.limit {
		run.limit = max(timeout, 0)
	}
	run.mu.Unlock()
	nudge(run.wake)
}

// remaining is the time left before the wall-clock limit, and the limit.
func (run *Run) remaining() (time.Duration, time.Duration) {
	run.mu.Lock()
	defer run.mu.Unlock()
	return run.limit - time.Since(run.start), run.limit
}

// Input feeds data to asy's stdin. It fails for a task that is not
// interactive or has ended, and when more than Limits.Upload bytes wait
// for an asy that is not reading. Each Input restarts the idle clock.
func (run *Run) Input(data []byte) error {
	if run.in == nil {
		return errors.New("sandbox: input to a task that is not interactive")
	}
	if err := run.in.feed(data); err != nil {
		return err
	}
	nudge(run.wake)
	return nil
}

// CloseInput ends asy's stdin, as when an interactive session idles for
// Limits.InteractiveIdle: asy finishes the commands it has, exits, and the
// run ends with the usual outcome (success when it drew a picture).
func (run *Run) CloseInput() error {
	if run.in == nil {
		return errors.New("sandbox: input to a task that is not interactive")
	}
	run.in.close()
	return nil
}

// Wait waits for the run to end and returns its outcome. When Wait returns,
// no process of the task is left and its work directory is gone.
func (run *Run) Wait() Outcome {
	<-run.done
	return run.outcome
}

// supervise watches the run until its process tree is gone, then settles
// the outcome, sends the final image and removes the work directory.
func (run *Run) supervise() {
	defer close(run.done)
	reason := run.watch()
	run.releaseSpare()
	run.drain()
	if run.idled {
		run.tellIdle()
	}
	if _, over := run.dir.usage(run.r.limits.Disk); over && reason == "" {
		reason = outputLimitText(run.r.limits.Disk) // filled faster than watch looks
	}
	if run.in != nil {
		run.in.stop()
	}
	run.outcome = run.settle(reason)
	if run.r.afterRun != nil {
		run.r.afterRun(run.dir.path)
	}
	if err := run.dir.remove(); err != nil {
		run.r.log.Error("sandbox: work directory left behind", "dir", run.dir.path, "err", err)
	}
	run.nextSpare()
}

// takeSpare gives a task that needs a display a ready spare display of
// the Runner's (spare.go), moved into its work directory; without one, the
// task starts its own Xvfb.
func (run *Run) takeSpare() {
	p := run.r.spares
	if p == nil || run.r.insecure || !run.r.display(run.task) {
		return
	}
	sp := p.take()
	if sp == nil {
		return
	}
	if err := sp.hand(run.dir); err != nil {
		run.r.log.Warn("sandbox: the task starts its own display", "err", err)
		p.release(sp)
		return
	}
	run.spare = sp
}

// releaseSpare kills the task's spare display, once the task's processes
// are gone.
func (run *Run) releaseSpare() {
	if run.spare != nil {
		run.r.spares.release(run.spare)
	}
}

// nextSpare starts the next spare display in the background after a task
// that needed one, once the task is over: a Runner whose tasks are all 2D
// never starts any.
func (run *Run) nextSpare() {
	if p := run.r.spares; p != nil && !run.r.insecure && run.r.display(run.task) {
		p.refill()
	}
}

// watch enforces the wall clock, the idle clock, the disk limit and
// cancellation until the process tree is gone. It returns why the run was
// aborted, or "".
func (run *Run) watch() string {
	var reason string
	abort := func(why string) {
		if reason == "" {
			reason = why
		}
		run.proc.kill()
	}
	rem, _ := run.remaining()
	deadline := time.NewTimer(max(rem, 0))
	defer deadline.Stop()
	idle := run.idleTimer()
	defer idle.Stop()
	disk := time.NewTicker(diskCheckEvery)
	defer disk.Stop()
	ctxDone := run.ctx.Done()
	for {
		select {
		case <-run.proc.exited:
			return reason
		case <-deadline.C:
			_, limit := run.remaining()
			abort(timeLimitText(limit))
		case <-run.wake:
			rem, limit := run.remaining()
			if rem <= 0 {
				abort(timeLimitText(limit))
			}
			deadline.Reset(max(rem, 0))
			run.resetIdle(idle)
		case <-idle.C:
			run.idled = true
			run.in.close()
		case why := <-run.abortCh:
			abort(why)
		case <-ctxDone:
			ctxDone = nil
			abort("Execution aborted: " + context.Cause(run.ctx).Error())
		case <-disk.C:
			if _, over := run.dir.usage(run.r.limits.Disk); over {
				abort(outputLimitText(run.r.limits.Disk))
			}
		}
	}
}

// idleTimer is the interactive idle clock; it never fires otherwise.
func (run *Run) idleTimer() *time.Timer {
	t := time.NewTimer(run.r.limits.InteractiveIdle)
	if run.in == nil {
		t.Stop()
	}
	return t
}

// resetIdle restarts the idle clock when input arrived since the last time.
func (run *Run) resetIdle(idle *time.Timer) {
	if run.in != nil && run.in.active() {
		idle.Reset(run.r.limits.InteractiveIdle)
	}
}

// drain waits for the forwarder to see the end of every stream. The killed
// tree held the only write ends, so this is quick; the grace only matters
// in insecure mode, where a process that left asy's group may hold them.
func (run *Run) drain() {
	select {
	case <-run.out.done:
	case <-time.After(drainGrace):
		run.r.log.Warn("sandbox: output pipes still open after the task ended; closing them")
		run.out.stopReaders()
		<-run.out.done
	}
}

// settle decides the outcome. An aborted run sends no image (asy may have
// been killed mid-write); a failed run still sends the image it wrote.
func (run *Run) settle(reason string) Outcome {
	o := Outcome{Time: run.proc.exitAt.Sub(run.start)}
	f := run.out
	if reason == "" {
		reason = f.reason // asked for just as the process exited
	}
	if reason != "" {
		o.Error = reason
		return o
	}
	err := f.sendImage()
	switch {
	case f.reason != "": // the Sink failed on the image
		o.Error = f.reason
	case run.proc.code != 0:
		o.Error = exitCodeText(run.proc.code)
	case errors.Is(err, errImageTooBig):
		o.Error = outputLimitText(run.r.limits.Image)
	case f.imageSent:
		o.Success = true
	default:
		o.Error = noImageText
		run.explainNoImage()
	}
	return o
}

// tellIdle writes IdleNotice on the task's output once the output has
// been drained (the Sink is never called concurrently).
func (run *Run) tellIdle() {
	stream := Stdout
	if run.task.SeparateStderr {
		stream = Stderr
	}
	_ = run.sink.Output(stream, []byte(IdleNotice(run.r.limits.InteractiveIdle))) // the outcome says the rest
}

// explainNoImage tells the user, on stderr (or stdout when merged), when
// asy wrote its picture in another format than the task's: a file that
// sets settings.outformat. The task's format option decides the format
// (the result message names it), so the run stays "No image output".
func (run *Run) explainNoImage() {
	other := run.out.img.otherImage()
	if other == "" {
		return
	}
	stream := Stdout
	if run.task.SeparateStderr {
		stream = Stderr
	}
	msg := fmt.Sprintf("usher: asy wrote %s, not %s.%s: the format is the task's format option; settings.outformat in a file cannot change it\n",
		other, outputName, run.task.Format)
	_ = run.sink.Output(stream, []byte(msg)) // the outcome says the rest
}
