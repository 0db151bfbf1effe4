package sandbox

import (
	"strconv"
	"strings"
)

// 3D figures. asy renders 3D with OpenGL (freeglut and GLX): in every
// format, unless a file sets settings.render=0, it opens a window, renders
// the scene and reads the pixels back (png directly; svg and pdf embed the
// rendered bitmap). Without an X display freeglut fails ("failed to open
// display") and asy exits 0 without an image. Debian's asy 2.85 is built
// without OSMesa, so there is no offscreen rendering.
//
// So every task that may render 3D (detect3d.go) gets its own virtual
// display: an Xvfb started inside the task's sandbox, alongside asy, by the
// sandbox's PID 1 (displayScript). Its
// only socket is /tmp/.X11-unix/X0 in the task's private /tmp (no TCP, no
// abstract socket; the sandbox has its own network namespace anyway), so no
// other task can reach it, and it dies with the task like every process of
// the sandbox. (A task that finds a spare display ready, started for it
// in a sandbox of its own, uses that one instead: spare.go.) OpenGL runs
// in asy's own process through Mesa's software
// renderer (llvmpipe): the sandbox has no /dev/dri, so no GPU is reachable.
// docs/benchmarks.md has the cost; the alternatives that were measured
// are in its git history.

// render3D is how a Runner lets asy render 3D.
type render3D int

const (
	// render3DOpenGL starts an Xvfb for each task that may render 3D
	// (the default).
	render3DOpenGL render3D = iota
	// render3DVector passes -render=0: no display, 3D as vector graphics.
	// Only the benchmarks use it, to compare.
	render3DVector
	// render3DNone starts no display, as before 3D support: 3D figures
	// give "No image output". Only the benchmarks use it, to compare.
	render3DNone
)

const (
	// displayExitCode is the sandbox's exit code when its Xvfb did not
	// start (EX_SOFTWARE); the user sees "Execution failed with code 70"
	// after Xvfb's own messages.
	displayExitCode = 70
	// llvmpipeThreads fixes the number of Mesa's render threads, which
	// would otherwise follow the host's CPU count and could exhaust
	// Limits.Processes (threads count) on a large machine.
	llvmpipeThreads = 2
	// displayScreen is Xvfb's screen. asy renders in tiles of at most
	// maxtile (1024x768 by default), which must fit on the screen.
	displayScreen = "1024x768x24"
)

// displayScript is run by bash as the sandbox's PID 1: bash -c
// displayScript bash <Xvfb> <scratch dir> <wait> <command…>.
//
// It starts Xvfb on display :0 (the sandbox's /tmp is private, so :0 is
// always free there) and, with wait "socket", starts the command as soon
// as Xvfb's socket exists, not when Xvfb is ready: Xvfb creates its
// socket about 10 ms into its start, before the slow part (loading Mesa's
// swrast_dri.so for GLX, 40-300 ms), and a client that connects meanwhile
// waits in the listen queue until Xvfb serves it. asy connects only when
// it renders, after loading module three, so Xvfb's start overlaps asy's
// instead of preceding it (docs/benchmarks.md). With wait "ready" (the
// benchmarks' baseline) the command starts once Xvfb has written its
// display number to -displayfd, i.e. is ready.
//
// The wait checks every 2 ms (read -t on the -displayfd FIFO: no CPU
// spent, no process forked). If Xvfb dies first, the script prints
// Xvfb's log and exits 70; if Xvfb dies later, asy cannot render (No
// image output, or asy's error) and the script adds Xvfb's log to stderr.
// PID 1 keeps the FIFO open (Xvfb stops if it cannot write its number);
// the command does not get it. The kernel kills Xvfb when PID 1 exits.
//
// Environment of the command only: DISPLAY, LP_NUM_THREADS (see
// llvmpipeThreads) and MESA_SHADER_CACHE_DIR: Mesa would look for its
// shader cache in the passwd entry's home directory, and the sandbox has
// no /etc/passwd, so it must be told; it uses $HOME/.cache/mesa_shader_cache,
// where the task finds New's template bound read-only, with its own copy
// of the index (shadercache.go).
var displayScript = `x=$1 d=$2 wait=$3
shift 3
xlog() { echo "usher: the virtual display for 3D rendering (Xvfb) $1:" >&2; cat "$d/.x-log" >&2; }
mkfifo -m 600 "$d/.x-ready" && exec 9<>"$d/.x-ready" || exit ` + strconv.Itoa(displayExitCode) + `
"$x" :0 -displayfd 9 ` + strings.Join(xvfbArgs, " ") + ` \
	</dev/null >/dev/null 2>"$d/.x-log" &
xpid=$!
n=
until [ -n "$n" ] || { [ "$wait" = socket ] && [ -S /tmp/.X11-unix/X0 ]; }; do
	kill -0 $xpid 2>/dev/null || { xlog "did not start"; exit ` + strconv.Itoa(displayExitCode) + `; }
	read -r -t 0.002 -u 9 n
done
DISPLAY=:0 LP_NUM_THREADS=` + strconv.Itoa(llvmpipeThreads) + ` MESA_SHADER_CACHE_DIR="$HOME/.cache" "$@" 9<&-
rc=$?
kill -0 $xpid 2>/dev/null || xlog "stopped"
exit $rc
`

// displayScriptInsecure is displayScript for insecure mode, run by sh as
// asy's parent: sh -c displayScriptInsecure sh <Xvfb> <scratch dir>
// <command…>. There /tmp is the host's, so Xvfb picks a free display
// number and writes it to -displayfd once it accepts connections: the
// read on the FIFO is the synchronisation (the command starts only then),
// and it ends early (empty) if Xvfb dies before that. At the end Xvfb
// gets SIGTERM and is waited for, so that it removes its socket and lock
// file from the host's /tmp.
var displayScriptInsecure = `x=$1 d=$2
shift 2
mkfifo -m 600 "$d/.x-ready" || exit ` + strconv.Itoa(displayExitCode) + `
"$x" -displayfd 9 ` + strings.Join(xvfbArgs, " ") + ` \
	9>"$d/.x-ready" </dev/null >/dev/null 2>"$d/.x-log" &
xpid=$!
read -r n <"$d/.x-ready"
rm -f "$d/.x-ready"
case $n in
''|*[!0-9]*)
	echo "usher: the virtual display for 3D rendering (Xvfb) did not start:" >&2
	cat "$d/.x-log" >&2
	exit ` + strconv.Itoa(displayExitCode) + `;;
esac
DISPLAY=:$n LP_NUM_THREADS=` + strconv.Itoa(llvmpipeThreads) + ` MESA_SHADER_CACHE_DIR="$HOME/.cache" "$@"
rc=$?
kill -TERM $xpid && wait $xpid
exit $rc
`

// spareScript is run by sh as the sandbox's PID 1 of a task that got a
// spare display (spare.go), already serving on /tmp/.X11-unix/X0: sh -c
// spareScript sh <command…>. The command's environment is displayScript's.
var spareScript = `DISPLAY=:0 LP_NUM_THREADS=` + strconv.Itoa(llvmpipeThreads) + ` MESA_SHADER_CACHE_DIR="$HOME/.cache" "$@"
exit $?
`

// wrapCommand is argv (stdbuf and asy) wrapped as PID 1's command line:
// sh and spareScript when the task got a spare display (x11), bash and
// displayScript with an Xvfb when t may render 3D with OpenGL
// (detect3d.go), else sh running argv and exiting with its status.
// scratch is where the script keeps its FIFO and Xvfb's log: /tmp in the
// sandbox, the task's HOME in insecure mode (sh and displayScriptInsecure).
func (r *Runner) wrapCommand(scratch string, t Task, x11 bool, argv []string) []string {
	switch {
	case x11:
		return append([]string{r.tools.sh, "-c", spareScript, "sh"}, argv...)
	case !r.display(t):
		return append([]string{r.tools.sh, "-c", `"$@"; exit $?`, "sh"}, argv...)
	case r.insecure:
		return append([]string{r.tools.sh, "-c", displayScriptInsecure, "sh", r.tools.xvfb, scratch}, argv...)
	}
	wait := "socket"
	if r.displayReady {
		wait = "ready"
	}
	return append([]string{r.tools.bash, "-c", displayScript, "bash", r.tools.xvfb, scratch, wait}, argv...)
}

// display reports whether t gets a virtual display. html and v3d never
// need one: asy writes the 3D scene's primitives for WebGL and renders
// nothing itself.
func (r *Runner) display(t Task) bool {
	if t.Format == FormatHTML || t.Format == FormatV3D {
		return false
	}
	return r.render3D == render3DOpenGL && r.rule3D.needsDisplay(t)
}

// renderArgs are asy's extra options for the Runner's 3D mode.
func (r *Runner) renderArgs() []string {
	if r.render3D == render3DVector {
		return []string{"-render=0"}
	}
	return nil
}
