package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The steps New checks, named in its errors.
const (
	stepFindBwrap  = "find bwrap"
	stepFindTools  = "find asy, prlimit, stdbuf, sh and Xvfb"
	stepWorkRoot   = "reach the work root"
	stepNamespaces = "create namespaces"
	stepRender     = "render test figures in the sandbox"
)

// selfTested remembers configurations whose sandbox already rendered the
// test figures in this process, so that many Runners cost one check, with
// the shader cache template the 3D figure left (*shaderTemplate);
// selfTestMu makes concurrent News wait for one check.
var (
	selfTested sync.Map
	selfTestMu sync.Mutex
)

// New checks that the sandbox works (bubblewrap present, namespaces can be
// created, asy runs inside) and returns a Runner. Without Insecure, a failing
// check is an error naming the Debian package or the failing step.
func New(cfg Config) (*Runner, error) {
	if err := cfg.Limits.check(); err != nil {
		return nil, err
	}
	r := &Runner{
		limits:   cfg.Limits.withDefaults(),
		insecure: cfg.Insecure,
		log:      cfg.Logger,
		uid:      cfg.SandboxUID,
		gid:      cfg.SandboxGID,
	}
	if r.log == nil {
		r.log = slog.Default()
	}
	if r.uid == 0 {
		r.uid = nobody
	}
	if r.gid == 0 {
		r.gid = nobody
	}
	r.asRoot = os.Geteuid() == 0 && !r.insecure
	if err := r.setWorkRoot(cfg.WorkRoot); err != nil {
		return nil, err
	}
	if err := r.findTools(cfg.BwrapPath); err != nil {
		return nil, err
	}
	r.setRule3D()
	if r.insecure {
		r.log.Warn("sandbox: INSECURE mode: asy runs without bubblewrap, as the server's user, with host files and network in reach")
		return r, nil
	}
	r.rootfs = rootfsArgs()
	if err := r.checkWorkRoot(); err != nil {
		return nil, err
	}
	if err := r.selfTest(); err != nil {
		return nil, err
	}
	if err := r.writeTemplateDir(); err != nil {
		return nil, stepError(stepWorkRoot, err)
	}
	if cfg.SpareDisplays >= 0 {
		r.spares = newSpares(r, max(cfg.SpareDisplays, 1))
	}
	return r, nil
}

// setRule3D finds which tasks need a virtual display. If asy's modules
// cannot be read, every task gets one: slower, never wrong.
func (r *Runner) setRule3D() {
	rule, err := newRule3D(r.tools.asy)
	if err != nil {
		r.log.Warn("sandbox: every task gets a virtual display: cannot tell which modules render 3D", "err", err)
	}
	r.rule3D = rule
}

// stepError names the failing step of New.
func stepError(step string, err error) error {
	return fmt.Errorf("sandbox: step %q failed: %w", step, err)
}

func (r *Runner) setWorkRoot(root string) error {
	if root == "" {
		root = os.TempDir()
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return stepError(stepWorkRoot, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return stepError(stepWorkRoot, err)
	}
	if !fi.IsDir() {
		return stepError(stepWorkRoot, fmt.Errorf("%s is not a directory", abs))
	}
	r.workRoot = abs
	return nil
}

// findTools looks up bwrap, asy, prlimit, stdbuf, sh, bash and Xvfb.
func (r *Runner) findTools(bwrap string) error {
	var err error
	if r.tools.asy, err = lookUnderUsr("asy"); err != nil {
		return stepError(stepFindTools, fmt.Errorf("%w (install the Debian package \"asymptote\")", err))
	}
	if r.tools.prlimit, err = lookUnderUsr("prlimit"); err != nil {
		return stepError(stepFindTools, fmt.Errorf("%w (install the Debian package \"util-linux\")", err))
	}
	if r.tools.stdbuf, err = lookUnderUsr("stdbuf"); err != nil {
		return stepError(stepFindTools, fmt.Errorf("%w (install the Debian package \"coreutils\")", err))
	}
	if r.tools.sh, err = lookUnderUsr("sh"); err != nil {
		return stepError(stepFindTools, fmt.Errorf("%w (install the Debian package \"dash\")", err))
	}
	if r.tools.bash, err = lookUnderUsr("bash"); err != nil {
		return stepError(stepFindTools, fmt.Errorf("%w (install the Debian package \"bash\")", err))
	}
	if r.tools.xvfb, err = lookUnderUsr("Xvfb"); err != nil {
		return stepError(stepFindTools, fmt.Errorf("%w (install the Debian package \"xvfb\", the virtual display for 3D)", err))
	}
	if r.insecure {
		return nil
	}
	if bwrap == "" {
		bwrap = "bwrap"
	}
	if r.tools.bwrap, err = exec.LookPath(bwrap); err != nil {
		return stepError(stepFindBwrap, fmt.Errorf("bubblewrap is not installed (install the Debian package \"bubblewrap\"): %w", err))
	}
	return nil
}

func lookUnderUsr(name string) (string, error) {
	path, err := exec.LookPath(name)
	if err != nil {
		return "", err
	}
	return underUsr(path)
}

// checkWorkRoot makes sure bubblewrap, started as the sandbox uid, can reach
// the work root: every directory on the way must be searchable by it.
func (r *Runner) checkWorkRoot() error {
	if !r.asRoot {
		return nil
	}
	for dir := r.workRoot; ; dir = filepath.Dir(dir) {
		fi, err := os.Stat(dir)
		if err != nil {
			return stepError(stepWorkRoot, err)
		}
		if !searchable(fi, r.uid, r.gid) {
			return stepError(stepWorkRoot, fmt.Errorf(
				"the sandbox uid %d cannot enter %s on the way to the work root %s (make it searchable: chmod o+x)",
				r.uid, dir, r.workRoot))
		}
		if dir == "/" {
			return nil
		}
	}
}

// searchable reports whether uid:gid may enter the directory fi.
func searchable(fi os.FileInfo, uid, gid int) bool {
	mode := fi.Mode().Perm()
	owner, group := statOwner(fi)
	switch {
	case owner == uid:
		return mode&0o100 != 0
	case group == gid:
		return mode&0o010 != 0
	}
	return mode&0o001 != 0
}

// selfTest runs an empty sandbox (namespaces, mounts, rlimits), then asy
// with a LaTeX label to svg (latex, dvisvgm) and a 3D figure with a LaTeX
// label to png (Xvfb, OpenGL, latex, ghostscript), whose shader cache
// becomes r's template (shadercache.go). It checks the machine, with the
// default limits: limits configured too small for asy show as failing
// tasks, not here.
func (r *Runner) selfTest() error {
	key := fmt.Sprint(r.tools, r.uid, r.gid, r.asRoot)
	selfTestMu.Lock()
	defer selfTestMu.Unlock()
	if cache, ok := selfTested.Load(key); ok {
		r.shaderCache = cache.(*shaderTemplate)
		return nil
	}
	probe := &Runner{
		limits: DefaultLimits(), workRoot: r.workRoot, log: r.log, tools: r.tools,
		asRoot: r.asRoot, uid: r.uid, gid: r.gid, rootfs: r.rootfs,
	}
	if err := probe.emptySandbox(); err != nil {
		return namespacesError(err, readHostFacts("/", os.Getenv))
	}
	cache, err := probe.renderTests()
	if err != nil {
		return stepError(stepRender, fmt.Errorf(
			"%w (the Debian packages asymptote, texlive-latex-base, dvisvgm, ghostscript and xvfb are needed)", err))
	}
	selfTested.Store(key, cache)
	r.shaderCache = cache
	return nil
}

// renderTests renders the test figures and returns the shader cache that
// the 3D one left.
//
// The template can lack a few entries when the machine is busy: Mesa
// stores what it compiled from threads of the lowest priority
// (SCHED_IDLE), and asy renders each 3D picture in a process of its own
// that exits without waiting for them (1-2 of about 60 entries lost under
// a load of 4-10 on 2 cores). Tasks that need them compile them, as
// without a template. Rendering the figure again until a pass adds nothing
// would fill the gap, at the price of a pass (2.5 s on an idle machine, 8
// s and more on a busy one) at every New, so it is not done.
func (r *Runner) renderTests() (*shaderTemplate, error) {
	if err := r.renderTest(FormatSVG, testFigure); err != nil {
		return nil, fmt.Errorf("%s: %w", FormatSVG, err)
	}
	var cache *shaderTemplate
	var cacheErr error
	r.afterRun = func(workDir string) { cache, cacheErr = readShaderCache(workDir) }
	defer func() { r.afterRun = nil }()
	if err := r.renderTest(FormatPNG, testFigure3D); err != nil {
		return nil, fmt.Errorf("%s: %w", FormatPNG, err)
	}
	if cacheErr != nil {
		return nil, fmt.Errorf("%s: %w", FormatPNG, cacheErr)
	}
	return cache, nil
}

// emptySandbox runs prlimit true in a sandbox on a scratch work directory.
func (r *Runner) emptySandbox() error {
	dir, err := r.newWorkDir(nil)
	if err != nil {
		return err
	}
	defer dir.remove()
	argv := append(r.limits.prlimitArgs(r.tools.prlimit, true), "/usr/bin/true")
	cmd := r.bwrapCommand(dir.path, nil, argv)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	p, err := startProcess(cmd, true)
	if err != nil {
		if said := strings.TrimSpace(out.String()); said != "" {
			// bwrap gave up before the sandbox ran: its words say why.
			return fmt.Errorf("%s failed: %s", r.tools.bwrap, said)
		}
		return err
	}
	stop := time.AfterFunc(30*time.Second, p.kill)
	p.wait()
	stop.Stop()
	if p.code != 0 {
		return fmt.Errorf("%s exited with code %d: %s", r.tools.bwrap, p.code, strings.TrimSpace(out.String()))
	}
	return nil
}

// testFigure has a LaTeX label, so latex runs too.
const testFigure = `size(2cm); draw(unitcircle); label("$x^2$", (0,0));`

// testFigure3D is rendered with OpenGL on the task's virtual display. Its
// five pictures make asy and Mesa compile what most figures need, so that
// the shader cache they leave serves them (TestShaderTemplateCoversFigures):
// a scene with everything (lit, coloured and transparent surfaces, lines,
// arrows, dots, a 3D LaTeX label) and an opaque one, in both kinds of
// projection, since Mesa compiles different variants for a scene without
// transparency, and a stack of transparent cubes, whose depth makes asy
// compile a larger blending shader. Only the last picture is out.png; the
// others are eps, which asy renders the same way but without a pdflatex
// and two ghostscript runs each (the template is the same as with png,
// and New takes 1-2 s less). (A 2D label on a 3D picture would spoil its
// perspective sizing.)
const testFigure3D = `import graph3; import palette;
void mixed(picture pic) {
  size(pic,3cm);
  surface s=surface(new real(pair z) {return z.x*z.y;},(-1,-1),(1,1),4,Spline);
  s.colors(palette(s.map(zpart),Rainbow())); draw(pic,s);
  draw(pic,shift(0,0,1.5)*unitsphere,red); draw(pic,shift(2,0,0)*unitcube,blue+opacity(0.5));
  draw(pic,(0,0,0)--(0,0,2)--(1,1,2),green+1pt,Arrow3); draw(pic,(0,0,0)--(1,0,0)); dot(pic,(1,1,1));
  label(pic,"$x^2$",(0,0,2.2));
}
void solid(picture pic) {size(pic,2cm); draw(pic,unitsphere,red);}
void glass(picture pic) {size(pic,2cm); for(int i=0; i < 2; ++i) draw(pic,shift(0,0,1.5i)*unitcube,blue+opacity(0.5));}
projection O=orthographic(4,2,3), P=perspective(10,8,6);
picture a; solid(a); shipout("solid",a,P=O,format="eps");
picture b; mixed(b); shipout("mixed",b,P=O,format="eps");
picture c; solid(c); shipout("solidp",c,P=P,format="eps");
picture d; glass(d); shipout("glass",d,P=orthographic(0,0,1),format="eps");
currentprojection=P; mixed(currentpicture);
`

// renderTestLimit bounds one test figure of the start-up check: a hung
// sandbox is caught, while a machine busy with other work (a 3D png takes
// several seconds of CPU) still starts.
const renderTestLimit = 90 * time.Second

// renderTest renders src through the Runner itself.
func (r *Runner) renderTest(format, src string) error {
	ctx, cancel := context.WithTimeout(context.Background(), renderTestLimit)
	defer cancel()
	sink := &collectSink{}
	run, err := r.Start(ctx, Task{
		Files:  []File{{Name: "usher-selftest.asy", Data: []byte(src), Main: true}},
		Format: format,
	}, sink)
	if err != nil {
		return err
	}
	o := run.Wait()
	if !o.Success || len(sink.images) != 1 || !HasMagic(format, sink.images[0]) {
		return fmt.Errorf("outcome %q, output: %s", o.Error, tail(sink.output.String(), 2000))
	}
	return nil
}

// HasMagic reports whether image starts as a file of format should: svg
// with "<?xml" or "<svg", pdf with "%PDF", png with its 8-byte signature,
// html with "<!DOCTYPE html", eps with "%!PS-Adobe", v3d (gzip-compressed
// XDR) with gzip's two bytes.
func HasMagic(format string, image []byte) bool {
	switch format {
	case FormatSVG:
		return bytes.HasPrefix(image, []byte("<?xml")) || bytes.HasPrefix(image, []byte("<svg"))
	case FormatPDF:
		return bytes.HasPrefix(image, []byte("%PDF"))
	case FormatPNG:
		return bytes.HasPrefix(image, []byte("\x89PNG\r\n\x1a\n"))
	case FormatHTML:
		return bytes.HasPrefix(image, []byte("<!DOCTYPE html"))
	case FormatEPS:
		return bytes.HasPrefix(image, []byte("%!PS-Adobe"))
	case FormatV3D:
		return bytes.HasPrefix(image, []byte("\x1f\x8b"))
	}
	return false
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// collectSink keeps what a run sends (New's self-test).
type collectSink struct {
	output bytes.Buffer
	images [][]byte
}

func (c *collectSink) Output(_ string, data []byte) error {
	c.output.Write(data)
	return nil
}

func (c *collectSink) Result(_ string, image []byte) error {
	c.images = append(c.images, image)
	return nil
}

// statOwner is the uid and gid owning fi, or -1, -1.
func statOwner(fi os.FileInfo) (int, int) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return -1, -1
	}
	return int(st.Uid), int(st.Gid)
}
