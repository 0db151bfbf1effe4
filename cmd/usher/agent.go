package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/usherhq/usher/client"
	"github.com/usherhq/usher/internal/telemetry"
)

// agentOptions are the flags of `usher agent`.
type agentOptions struct {
	server, token, name string
	queues, caps        []string
	concurrency         int
	payload             string
	wait, killGrace     time.Duration
	renew               time.Duration
	exitWhenIdle        time.Duration
	untilWorkflow       string
	outputLimit         byteSize
	logLevel            slog.Level
}

func newAgentCommand() *cobra.Command {
	o := &agentOptions{payload: "args", outputLimit: 64 << 10}
	cmd := &cobra.Command{
		Use:   "agent [flags] -- COMMAND [ARG...]",
		Short: "Run a command for each job of the queues this agent serves",
		Long: `agent asks the server for jobs and runs COMMAND once per job, up to
--concurrency at a time, in its own process group. The job's payload is
passed as arguments (--payload args: a JSON string payload is appended as one
argument, an array as one argument per element, anything else as its JSON
text) or on standard input (--payload stdin: a string payload as its raw text,
anything else as JSON). The environment adds USHER_JOB_ID, USHER_JOB_QUEUE,
USHER_JOB_ATTEMPT and USHER_JOB_TIMEOUT_MS, and TRACEPARENT, the W3C trace
context of the job's span when tracing is on (OTEL_* variables, see
docs/operations.md), for the command to continue the trace; it drops
USHER_TOKEN and USHER_AGENT_TOKEN.

The command may write control lines to file descriptor 3 (USHER_CONTROL_FD):
"progress VALUE [MESSAGE]" (VALUE from 0 to 1, shown with the job at once),
"result JSON" (kept with the job), "snooze MS" (run again after MS
milliseconds, not counted as an attempt) or "cancel [MESSAGE]" (fail for
good, no retry). A line the agent cannot take is noted in the output.

Standard output and error, merged, are reported with the exit code (the last
--output-limit bytes). Success is exit code 0. At the job's time limit, or
when the server stops the job, the process group gets SIGTERM, then SIGKILL
after --kill-grace. While jobs run the lease is renewed; with no work the
agent long-polls (--wait) and backs off on errors.

The server hands out jobs of every queue whose required capabilities the
agent offers (--capability), or, with --queue, of the named queues only.

--exit-when-idle D ends the agent (exit 0) once no job has run for D;
--until-workflow ID ends it (exit 0) once that workflow has finished,
succeeded or failed. Either way running jobs finish and are reported first.

SIGTERM or SIGINT: stop fetching, let the running jobs finish and report
them, leave. A second signal aborts: the processes are killed and their jobs
reported failed.`,
		Example: `  usher agent --server http://sched:8080 --token "$AGENT_TOKEN" \
      --capability net --concurrency 8 -- nmap -sT -p 22,443
  usher agent --queue etl --payload stdin -- python3 etl.py
  usher agent -- sh -c 'echo "job $USHER_JOB_ID got $1"' job
  usher agent -- sh -c 'echo "progress 0.5 half way" >&3; echo "result {\"n\":1}" >&3'
  usher agent --queue etl --until-workflow 3 -- ./etl.sh`,
		Args: cobra.MinimumNArgs(1),
	}
	f := cmd.Flags()
	f.SetInterspersed(false)
	f.StringVar(&o.server, "server", defaultServer, "address of the usher server (also $USHER_SERVER)")
	f.StringVar(&o.token, "token", "", "API token with the agent role (also $USHER_TOKEN)")
	f.StringVar(&o.name, "name", "", "agent name, unique per process (default: host name and pid)")
	f.StringArrayVar(&o.queues, "queue", nil, "take jobs of this queue only (repeatable; default: every queue whose requirements the capabilities meet)")
	f.StringArrayVar(&o.caps, "capability", nil, "capability offered to queues' requirements (repeatable)")
	f.IntVar(&o.concurrency, "concurrency", 1, "jobs run at once")
	f.StringVar(&o.payload, "payload", o.payload, "how the payload reaches the command: args or stdin")
	f.DurationVar(&o.wait, "wait", 30*time.Second, "how long one request for work waits when there is none (at most 1m)")
	f.DurationVar(&o.killGrace, "kill-grace", 5*time.Second, "between SIGTERM and SIGKILL of a job's processes")
	f.DurationVar(&o.renew, "renew", 0, "lease renewal interval (default: a third of the server's lease)")
	f.Var(&o.outputLimit, "output-limit", "bytes of output reported per job (the tail)")
	f.DurationVar(&o.exitWhenIdle, "exit-when-idle", 0, "exit 0 once no job has run for this long (0: never)")
	f.StringVar(&o.untilWorkflow, "until-workflow", "", "exit 0 once this workflow has finished")
	f.TextVar(&o.logLevel, "log-level", slog.LevelInfo, "log level: debug, info, warn or error")
	envFallback(cmd, "USHER_AGENT_")
	cmd.RunE = func(cmd *cobra.Command, args []string) error { return o.run(cmd, args) }
	return cmd
}

// resolve applies USHER_SERVER and USHER_TOKEN (and the token file) where
// neither a flag nor a USHER_AGENT_ variable gave a value.
func (o *agentOptions) resolve(cmd *cobra.Command) error {
	co := clientOpts{server: o.server, token: o.token}
	if err := co.resolve(cmd); err != nil {
		return err
	}
	o.server, o.token = co.server, co.token
	if o.payload != "args" && o.payload != "stdin" {
		return fmt.Errorf("--payload %q: use args or stdin", o.payload)
	}
	if o.concurrency < 1 {
		return fmt.Errorf("--concurrency %d: at least 1", o.concurrency)
	}
	if o.exitWhenIdle < 0 {
		return fmt.Errorf("--exit-when-idle %s is negative", o.exitWhenIdle)
	}
	return nil
}

func (o *agentOptions) run(cmd *cobra.Command, argv []string) error {
	if err := o.resolve(cmd); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: o.logLevel}))
	_, stopTracing, err := startTracing(cmd.Context(), "usher-agent")
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	defer stopTracing()
	r := &commandRunner{argv: argv, stdin: o.payload == "stdin", killGrace: o.killGrace,
		outputLimit: int(o.outputLimit), env: jobEnviron()}
	w := &client.Worker{
		Client: client.New(o.server, o.token), Agent: o.name, Capabilities: o.caps,
		Concurrency: o.concurrency, WaitMs: int(o.wait.Milliseconds()), RenewInterval: o.renew,
		Grace: o.killGrace + 5*time.Second, Logger: log,
		ExitWhenIdle: o.exitWhenIdle, UntilWorkflow: o.untilWorkflow,
	}
	if len(o.queues) == 0 {
		w.Default = r.run
	} else {
		w.Handlers = map[string]client.Handler{}
		for _, q := range o.queues {
			w.Handlers[q] = r.run
		}
	}
	ctx, stop := context.WithCancel(cmd.Context())
	defer stop()
	done := make(chan struct{})
	defer close(done)
	go onSignals(log, stop, w.Abort, done)
	if err := w.Run(ctx); err != nil {
		co := clientOpts{server: o.server, token: o.token}
		return co.explain(err)
	}
	return nil
}

// onSignals turns the first SIGINT or SIGTERM into a graceful stop and the
// second into an abort.
func onSignals(log *slog.Logger, stop, abort func(), done <-chan struct{}) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	for _, step := range []struct {
		msg string
		act func()
	}{
		{"agent: stopping: running jobs finish first (signal again to abort them)", stop},
		{"agent: aborting: killing the running jobs", abort},
	} {
		select {
		case s := <-sigs:
			log.Warn(step.msg, "signal", s.String())
			step.act()
		case <-done:
			return
		}
	}
}

// jobEnviron is the agent's environment without its token.
func jobEnviron() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "USHER_TOKEN=") || strings.HasPrefix(kv, "USHER_AGENT_TOKEN=") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// commandRunner runs the agent's command for a job.
type commandRunner struct {
	argv        []string
	stdin       bool
	killGrace   time.Duration
	outputLimit int
	env         []string
}

// exitError is a job's command failing: its exit code (128 + the signal
// for one killed by a signal, 127 when it could not start) and why.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// ExitCode is the code the job is reported with.
func (e *exitError) ExitCode() int { return e.code }

// run is the Handler: it runs the command for one job and returns its
// output, and an *exitError unless it exited 0.
func (r *commandRunner) run(ctx context.Context, job *client.LeasedJob) (string, error) {
	args, input, err := r.input(job.Payload)
	if err != nil {
		return "", &exitError{code: 2, msg: err.Error()}
	}
	cmd := exec.Command(r.argv[0], append(r.argv[1:len(r.argv):len(r.argv)], args...)...)
	cmd.Env = append(r.env[:len(r.env):len(r.env)], "USHER_JOB_ID="+job.ID, "USHER_JOB_QUEUE="+job.Queue,
		"USHER_JOB_ATTEMPT="+strconv.Itoa(job.Attempt), "USHER_JOB_TIMEOUT_MS="+strconv.FormatInt(job.TimeoutMs, 10),
		"USHER_CONTROL_FD="+strconv.Itoa(controlFD))
	if tp := telemetry.Traceparent(ctx); tp != "" {
		cmd.Env = append(cmd.Env, "TRACEPARENT="+tp)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	ctlR, ctlW, err := openControl()
	if err != nil {
		return "", &exitError{code: 127, msg: err.Error()}
	}
	cmd.ExtraFiles = []*os.File{ctlW}
	p, err := startProcess(cmd, input, r.outputLimit)
	ctlW.Close()
	if err != nil {
		ctlR.Close()
		return "", &exitError{code: 127, msg: fmt.Sprintf("starting %s: %v", r.argv[0], err)}
	}
	ctl := readControl(ctx, ctlR)
	k := &killer{pgid: cmd.Process.Pid, grace: r.killGrace}
	stopWatch := context.AfterFunc(ctx, func() { k.kill(errors.Is(context.Cause(ctx), client.ErrAborted)) })
	waitErr := cmd.Wait()
	stopWatch()
	k.done()
	out := p.finish()
	notes, err := ctl.finish(ctlR, exitErr(waitErr))
	return out + notes, err
}

// input is the job's payload as extra arguments or as standard input.
func (r *commandRunner) input(payload json.RawMessage) (args []string, stdin []byte, err error) {
	if len(payload) == 0 || string(payload) == "null" {
		return nil, nil, nil
	}
	var s string
	isString := json.Unmarshal(payload, &s) == nil
	if r.stdin {
		if isString {
			return nil, []byte(s), nil
		}
		return nil, payload, nil
	}
	if isString {
		return []string{s}, nil, nil
	}
	var items []json.RawMessage
	if json.Unmarshal(payload, &items) != nil {
		return []string{string(payload)}, nil, nil
	}
	for _, it := range items {
		if json.Unmarshal(it, &s) == nil {
			args = append(args, s)
		} else {
			args = append(args, string(it))
		}
	}
	return args, nil, nil
}

// exitErr describes how the command ended; nil for exit code 0.
func exitErr(err error) error {
	if err == nil {
		return nil
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return &exitError{code: 1, msg: err.Error()}
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return &exitError{code: 128 + int(ws.Signal()), msg: "killed by signal " + ws.Signal().String()}
	}
	return &exitError{code: ee.ExitCode(), msg: ee.Error()}
}

// killer signals a job's process group: SIGTERM, then SIGKILL after the
// grace (at once when aborting), and SIGKILL to whatever is left when the
// job's main process ended.
type killer struct {
	pgid  int
	grace time.Duration

	mu    sync.Mutex
	ended bool
	timer *time.Timer
}

func (k *killer) kill(now bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ended {
		return
	}
	if now {
		_ = syscall.Kill(-k.pgid, syscall.SIGKILL)
		return
	}
	_ = syscall.Kill(-k.pgid, syscall.SIGTERM)
	k.timer = time.AfterFunc(k.grace, func() { k.kill(true) })
}

// done kills what is left of the group once its leader was reaped.
func (k *killer) done() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.ended = true
	if k.timer != nil {
		k.timer.Stop()
	}
	_ = syscall.Kill(-k.pgid, syscall.SIGKILL)
}

// process holds the pipes of a started job command.
type process struct {
	out    *os.File
	copied chan struct{}
	buf    *tailBuffer
}

// startProcess starts cmd with stdout and stderr merged into one pipe read
// into a tail buffer of limit bytes, and input (if any) on stdin. Pipes of
// its own, not os/exec's, so that Wait returns when the process ends even
// if a child it left behind still holds them.
func startProcess(cmd *exec.Cmd, input []byte, limit int) (*process, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("output pipe: %w", err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	var in *os.File
	if input != nil {
		var inr *os.File
		if inr, in, err = os.Pipe(); err != nil {
			pr.Close()
			pw.Close()
			return nil, fmt.Errorf("input pipe: %w", err)
		}
		cmd.Stdin = inr
		defer inr.Close()
	}
	err = cmd.Start()
	pw.Close()
	if err != nil {
		pr.Close()
		if in != nil {
			in.Close()
		}
		return nil, err
	}
	p := &process{out: pr, copied: make(chan struct{}), buf: newTailBuffer(limit)}
	go func() {
		defer close(p.copied)
		_, _ = p.buf.ReadFrom(pr)
	}()
	if in != nil {
		go func() {
			_, _ = in.Write(input)
			in.Close()
		}()
	}
	return p, nil
}

// finish waits briefly for the output pipe to drain (the group was
// killed, so it closes) and returns the output.
func (p *process) finish() string {
	t := time.NewTimer(2 * time.Second)
	select {
	case <-p.copied:
	case <-t.C:
		p.out.Close()
		<-p.copied
	}
	t.Stop()
	p.out.Close()
	return p.buf.String()
}

// tailBuffer keeps the last limit bytes written to it.
type tailBuffer struct {
	limit int
	buf   []byte
	cut   int64
}

func newTailBuffer(limit int) *tailBuffer {
	return &tailBuffer{limit: max(limit, 1)}
}

// ReadFrom reads r to its end, keeping the tail.
func (t *tailBuffer) ReadFrom(r interface{ Read([]byte) (int, error) }) (int64, error) {
	chunk := make([]byte, 32<<10)
	var total int64
	for {
		n, err := r.Read(chunk)
		total += int64(n)
		t.write(chunk[:n])
		if err != nil {
			return total, err
		}
	}
}

func (t *tailBuffer) write(b []byte) {
	t.buf = append(t.buf, b...)
	if over := len(t.buf) - t.limit; over > t.limit {
		t.cut += int64(over)
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
}

// String is the kept output, led by a note of what was cut.
func (t *tailBuffer) String() string {
	b := t.buf
	cut := t.cut
	if over := len(b) - t.limit; over > 0 {
		cut += int64(over)
		b = b[over:]
	}
	if cut == 0 {
		return string(b)
	}
	return fmt.Sprintf("[… %d bytes of output cut …]\n", cut) + string(b)
}
