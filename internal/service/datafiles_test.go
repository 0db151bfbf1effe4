package service

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/sandbox"
)

// csvFigure plots the points of data.csv with the graph module.
const csvFigure = `import graph;
size(4cm);
file in = input("data.csv").line().csv();
string[] header = in;
real[][] a = in.dimension(0,0);
a = transpose(a);
draw(graph(a[0], a[1]), red);
xaxis("$x$"); yaxis("$y$");
`

const csvData = "x,y\n0,0\n1,1\n2,4\n3,9\n"

// photoFigure includes photo.png. graphic() of a PNG needs pdflatex: the
// default latex engine's dvi route reads only EPS (docs/sandbox.md, "Data
// files").
const photoFigure = `settings.tex = "pdflatex";
size(4cm);
label(graphic("photo.png", "width=2cm"), (0,0));
draw(unitcircle);
`

// testPNG is a real 8x8 PNG, a red square.
func testPNG(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 8, 8))
	for x := range 8 {
		for y := range 8 {
			img.Set(x, y, color.RGBA{R: 255, A: 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// runFiles sends files (the first is main) with options, runs them and
// returns every message up to the close.
func runFiles(t *testing.T, ts *testService, options map[string]any, files ...[2]string) []msg {
	t.Helper()
	c := dial(t, ts.srv)
	for i, f := range files {
		c.add(f[0], f[1], i == 0)
	}
	c.send("options", options)
	c.send("run", nil)
	return c.rest()
}

// outputOf is the output messages' text.
func outputOf(all []msg) string {
	var b strings.Builder
	for _, m := range all {
		if m.verb == "output" {
			b.Write(m.payload)
		}
	}
	return b.String()
}

// A figure that plots a CSV the task carries and one that includes a PNG
// the task carries compile in every 2D format, html included (asy's html
// page of a 2D figure is an svg in a page).
func TestDataFilesCompileInEveryFormat(t *testing.T) {
	ts := startService(t, 2, nil)
	photo := string(testPNG(t))
	figures := []struct {
		name  string
		files [][2]string
	}{
		{"csv plot", [][2]string{{"main.asy", csvFigure}, {"data.csv", csvData}}},
		{"png photo", [][2]string{{"main.asy", photoFigure}, {"photo.png", photo}}},
	}
	for _, fig := range figures {
		for _, format := range []string{"svg", "pdf", "png", "eps", "html"} {
			t.Run(fig.name+" "+format, func(t *testing.T) {
				all := runFiles(t, ts, map[string]any{"format": format}, fig.files...)
				if got := strings.Join(verbs(all), " "); got != "queue result complete" {
					t.Fatalf("messages %v, output %q", got, outputOf(all))
				}
				res := all[1]
				if res.body["format"] != format || !sandbox.HasMagic(format, res.payload) {
					t.Fatalf("result %v starts %q", res.body, res.payload[:min(16, len(res.payload))])
				}
				if done := all[2].body; done["success"] != true {
					t.Fatalf("complete %v, output %q", done, outputOf(all))
				}
				if fig.name == "png photo" && (format == "svg" || format == "html") && !bytes.Contains(res.payload, []byte("<image")) {
					t.Fatalf("the %s has no <image>: the photo is missing", format)
				}
			})
		}
	}
}

// Hostile data files get their own error, and a task running meanwhile
// is not disturbed.
func TestHostileDataFilesAreDenied(t *testing.T) {
	ts := startService(t, 1, nil)
	var wg sync.WaitGroup
	other := make(chan []msg, 1)
	wg.Go(func() {
		other <- runFiles(t, ts, map[string]any{"format": "svg", "timeout": 10000}, [2]string{"main.asy", csvFigure}, [2]string{"data.csv", csvData})
	})
	cases := []struct {
		name  string
		files [][2]string
		want  string
	}{
		{"png that is text", [][2]string{{"main.asy", photoFigure}, {"photo.png", "draw(unitcircle);"}},
			`file "photo.png" is not a PNG image: its content does not start with that format's signature`},
		{"disallowed extension", [][2]string{{"main.asy", quickFigure}, {"run.sh", "rm -rf /"}}, sandbox.ErrNameExtension.Error()},
		{"data file outside the task", [][2]string{{"main.asy", csvFigure}, {"../x.csv", csvData}}, `file name contains "/"`},
		{"main file not .asy", [][2]string{{"data.csv", csvData}}, `the main file must be Asymptote source ending in ".asy": "data.csv"`},
		{"csv that is not text", [][2]string{{"main.asy", csvFigure}, {"data.csv", "1,2\x00"}}, `file "data.csv" is not text: it contains a NUL byte at offset 3`},
		{"output's name", [][2]string{{"main.asy", "size(1cm);"}, {"out.png", string(testPNG(t))}}, sandbox.ErrNameReserved.Error()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			done := final(t, runFiles(t, ts, map[string]any{"format": "svg"}, tc.files...))
			if done.verb != "denied" || done.body["error"] != tc.want {
				t.Fatalf("%s %v, want denied %q", done.verb, done.body, tc.want)
			}
		})
	}
	wg.Wait()
	if all := <-other; final(t, all).body["success"] != true {
		t.Fatalf("the task running meanwhile: %v, output %q", final(t, all).body, outputOf(all))
	}
	ts.waitIdle(t)
}

// shell opens an interactive task without files and waits until it runs.
func shell(t *testing.T, ts *testService, options map[string]any) *client {
	t.Helper()
	c := dial(t, ts.srv)
	options["interactive"] = true
	c.send("options", options)
	c.send("run", nil)
	if _, q := c.until("queue"); q.body["passed"] != true {
		t.Fatalf("interactive queue %v", q.body)
	}
	return c
}

func (c *client) input(s string) {
	c.t.Helper()
	if err := c.conn.SendPayload(c.ctx, "input", nil, []byte(s)); err != nil {
		c.t.Fatal(err)
	}
}

// outputUntil reads until the output so far contains want and returns it.
func (c *client) outputUntil(want string) string {
	c.t.Helper()
	var out strings.Builder
	for !strings.Contains(out.String(), want) {
		m, ok := c.next()
		if !ok || m.verb == "complete" || m.verb == "denied" {
			c.t.Fatalf("%s %v before %q; output %q", m.verb, m.body, want, out.String())
		}
		out.Write(m.payload)
	}
	return out.String()
}

// A bare shell (no file at all) answers write(1+2) with 3, also when the
// input follows run at once. (Whether that input arrives before the start
// is a race this test does not force; TestInputBeforeStartIsKept in
// internal/asyqueue does.)
func TestBareShell(t *testing.T) {
	ts := startService(t, 1, nil)
	c := shell(t, ts, map[string]any{})
	c.input("write(1+2);\n")
	c.outputUntil("3\n")
	c.close()
	ts.waitIdle(t)

	c = dial(t, ts.srv)
	c.send("options", map[string]any{"interactive": true})
	c.send("run", nil)
	c.input("write(2+5);\n")
	c.outputUntil("7\n")
	c.close()
	ts.waitIdle(t)
}

// An interactive task ends at its timeout option, not the sandbox's
// maximum.
func TestShellHonoursTimeout(t *testing.T) {
	ts := startService(t, 1, nil)
	c := shell(t, ts, map[string]any{"timeout": 3000})
	began := time.Now()
	c.input("while(true) {}\n")
	done := final(t, c.rest())
	if done.verb != "complete" || done.body["error"] != "Execution aborted due to the time limit (3000ms)" {
		t.Fatalf("%s %v, want the time limit of 3000ms", done.verb, done.body)
	}
	if took := time.Since(began); took > 20*time.Second {
		t.Fatalf("ended after %v", took)
	}
	ts.waitIdle(t)
}

// A shell with no input for the idle time ends, says why on its output,
// and frees its backend.
func TestShellEndsWhenIdle(t *testing.T) {
	const idle = 1500 * time.Millisecond
	ts := startService(t, 1, func(c *Config) { c.Sandbox.Limits.InteractiveIdle = idle })
	c := shell(t, ts, map[string]any{"timeout": 30000})
	c.input("write(1+2);\n")
	c.outputUntil("3\n")
	began := time.Now()
	var out strings.Builder
	all := c.rest()
	for _, m := range all {
		out.Write(m.payload)
	}
	took := time.Since(began)
	if done := final(t, all); done.verb != "complete" || !strings.Contains(out.String(), sandbox.IdleNotice(idle)) {
		t.Fatalf("%s %v after output %q, want complete after the idle notice", done.verb, done.body, out.String())
	}
	if took > 15*time.Second {
		t.Fatalf("ended %v after the last input, want about %v", took, idle)
	}
	ts.waitIdle(t)
}
