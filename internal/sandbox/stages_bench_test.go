package sandbox

import (
	"context"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/sandbox/sandboxtest"
)

// stages3D are the stages of a 3D task that BenchmarkStages3D times, in
// the order Start and the supervisor run them.
var stages3D = []string{
	"workdir",     // newWorkDir: the directory, the task's file, HOME
	"shadercache", // shaderCacheMounts: the index, or the copy
	"spare",       // takeSpare: the ready spare's socket moved in
	"launch",      // bubblewrap started, until it reports PID 1
	"run",         // the sandbox until its last process is gone
	"release",     // the spare killed and waited for
	"usage",       // the last check of the work directory's size
	"image",       // settle: the image read and sent
	"remove",      // the work directory removed
	"empty",       // for comparison: an empty sandbox of the same shape
}

// BenchmarkStages3D times the stages of a 3D png task (sphere3D) through
// a Runner with a ready spare display: the steps of Start and of the
// supervisor, repeated here one by one so that each can be timed (keep
// them in step with run.go). Two Runners, interleaved: "shipped" (the
// shader cache template bound read-only) and "copy" (copyShaderCache, a
// copy of its entries written into each task's HOME, as before). "empty"
// is a sandbox of the task's shape (its mounts, prlimit, sh, stdbuf) that
// runs true instead of asy: what bubblewrap and the wrappers cost. It
// reports each stage's median per Runner in milliseconds. Run it with
//
//	go test -run '^$' -bench Stages3D -benchtime 20x ./internal/sandbox/
func BenchmarkStages3D(b *testing.B) {
	shipped := newRunner(b, Limits{})
	copied := newRunner(b, Limits{})
	copied.copyShaderCache = true
	runners := []struct {
		name string
		r    *Runner
	}{{"shipped", shipped}, {"copy", copied}}
	times := map[string][]time.Duration{}
	for _, v := range runners { // a first task, untimed, starts the spares
		stagesOnce(b, v.r)
	}
	for i := 0; b.Loop(); i++ {
		for j := range runners {
			v := runners[(i+j)%len(runners)]
			for stage, d := range stagesOnce(b, v.r) {
				times[v.name+"-"+stage] = append(times[v.name+"-"+stage], d)
			}
		}
	}
	for _, v := range runners {
		for _, stage := range stages3D {
			b.ReportMetric(msOf(median(times[v.name+"-"+stage])), v.name+"-"+stage+"-ms")
		}
	}
}

// stagesOnce runs sphere3D to png through r as Start and the supervisor
// would, timing each stage, then waits for the next spare display.
func stagesOnce(b *testing.B, r *Runner) map[string]time.Duration {
	st := map[string]time.Duration{}
	mark := time.Now()
	lap := func(stage string) {
		now := time.Now()
		st[stage] += now.Sub(mark)
		mark = now
	}
	task, err := r.limits.validate(Task{Format: FormatPNG, Files: mainTask(sphere3D).Files})
	if err != nil {
		b.Fatal(err)
	}
	dir, err := r.newWorkDir(task.Files)
	if err != nil {
		b.Fatal(err)
	}
	lap("workdir")
	mounts, err := r.shaderCacheMounts(dir)
	if err != nil {
		b.Fatal(err)
	}
	lap("shadercache")
	run := &Run{
		r: r, task: task, sink: sandboxtest.NewSink(), ctx: context.Background(), dir: dir, limit: task.Timeout,
		mounts: mounts, wake: make(chan struct{}, 1), abortCh: make(chan string, 1), done: make(chan struct{}),
	}
	run.takeSpare()
	lap("spare")
	if err := run.launch(); err != nil {
		b.Fatal(err)
	}
	lap("launch")
	<-run.proc.exited
	st["run"], mark = run.proc.exitAt.Sub(mark), run.proc.exitAt
	run.releaseSpare()
	lap("release")
	run.drain()
	run.dir.usage(r.limits.Disk)
	lap("usage")
	if o := run.settle(""); !o.Success {
		b.Fatalf("%+v", o)
	}
	lap("image")
	if err := run.dir.remove(); err != nil {
		b.Fatal(err)
	}
	lap("remove")
	run.nextSpare()
	st["empty"] = emptyTask(b, r)
	if !r.spares.waitIdle() {
		b.Fatal("no spare display became ready")
	}
	return st
}

// emptyTask times a sandbox with a 3D task's mounts and wrappers that runs
// true, from before bubblewrap starts until the sandbox is gone.
func emptyTask(b *testing.B, r *Runner) time.Duration {
	dir, err := r.newWorkDir(nil)
	if err != nil {
		b.Fatal(err)
	}
	defer dir.remove()
	mounts, err := r.shaderCacheMounts(dir)
	if err != nil {
		b.Fatal(err)
	}
	argv := r.limits.prlimitArgs(r.tools.prlimit, true)
	argv = append(argv, r.tools.sh, "-c", spareScript, "sh", r.tools.stdbuf, "-oL", "/usr/bin/true")
	began := time.Now()
	p, err := startProcess(r.bwrapCommand(dir.path, mounts, argv), true)
	if err != nil {
		b.Fatal(err)
	}
	p.wait()
	if p.code != 0 {
		b.Fatalf("empty sandbox: exit %d", p.code)
	}
	return time.Since(began)
}
