package sandbox

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/sandbox/sandboxtest"
)

// figures3D are small 3D figures of the kinds users write. The file name of
// a figure must not shadow a module asy imports (a "graph.asy" would be
// loaded by graph3 instead of asy's own graph module).
var figures3D = []struct{ name, src string }{
	{name: "surface", src: `import graph3;
size(4cm);
currentprojection=orthographic(4,2,3);
real f(pair z) {return cos(2pi*z.x)*sin(2pi*z.y);}
draw(surface(f,(-1/2,-1/2),(1/2,1/2),20,Spline),lightgreen);
`},
	{name: "solid", src: `import solids;
size(4cm);
currentprojection=orthographic(3,1,2);
revolution r=cylinder(O,1,2,Z);
draw(surface(r),orange);
draw(r,black);
`},
	{name: "graph3 plot", src: `import graph3;
size(4cm,0);
currentprojection=perspective(5,4,2);
path3 g=graph(new triple(real t) {return (cos(t),sin(t),t/(2pi));},0,6pi,operator ..);
draw(g,red+1pt);
axes3("$x$","$y$","$z$",Arrow3);
`},
	{name: "3D label with LaTeX", src: `import three;
size(4cm);
currentprojection=orthographic(2,3,2);
draw(unitcube,blue+opacity(0.5));
label("$\displaystyle\int_0^1 x^2\,dx=\frac13$",(0.5,0.5,1.3));
`},
	{name: "2D and 3D", src: `import three;
picture pic3;
size(pic3,3cm);
draw(pic3,unitsphere,red);
add(pic3.fit(),(0,0),W);
size(6cm);
draw(shift(2,0)*unitcircle,blue);
label("$2$D",(2,0));
`},
}

// Every 3D figure compiles inside the sandbox, with the default limits, in
// png and in svg or pdf: a valid file of the format, a png with more than
// one colour, and the 3D part rendered (a bitmap in svg and pdf, which is what
// asy on a desktop produces too).
func TestRender3D(t *testing.T) {
	t.Parallel()
	r := newRunner(t, Limits{})
	for i, fig := range figures3D {
		// png: TestShaderTemplateCoversFigures renders each figure to png
		// and checks it as here. svg and pdf embed the same OpenGL bitmap
		// through different converters, so each figure is rendered in one
		// of them, in turn: every converter meets 2D and 3D mixed, labels
		// and surfaces, at half the 3D renders.
		format := []string{FormatSVG, FormatPDF}[i%2]
		// One at a time: 3D sandboxes starting together make a new one
		// reuse a finished one's PID namespace inode within the start-time
		// slack that assertGone allows.
		t.Run(fig.name+"/"+format, func(t *testing.T) {
			task := mainTask(fig.src)
			task.Format = format
			o, s := runTask(t, r, task)
			wantOutcome(t, o, true, "", s)
			if s.ImageCount() != 1 {
				t.Fatalf("%d images", s.ImageCount())
			}
			img := s.Image(0)
			if !HasMagic(format, img) {
				t.Fatalf("not a %s file: %q", format, img[:min(len(img), 40)])
			}
			checkRendered(t, format, img)
		})
	}
}

// A main file that draws 3D only through a module among the task's files
// gets its display too.
func TestRender3DThroughTaskModule(t *testing.T) {
	t.Parallel()
	r := newRunner(t, Limits{})
	task := Task{Format: FormatPNG, Files: []File{
		{Name: "main.asy", Data: []byte("import ball;\n"), Main: true},
		{Name: "ball.asy", Data: []byte("import three; size(3cm); draw(unitsphere, red);\n")},
	}}
	o, s := runTask(t, r, task)
	wantOutcome(t, o, true, "", s)
	checkRendered(t, FormatPNG, s.Image(0))
}

// checkRendered checks that the 3D scene made it into the image: a png
// that decodes and is not one flat colour; an svg or pdf with an embedded
// bitmap (asy's OpenGL rendering).
func checkRendered(t *testing.T, format string, img []byte) {
	t.Helper()
	switch format {
	case FormatPNG:
		if n := pngColours(t, img, 2); n < 2 {
			t.Fatalf("png is blank: %d colour", n)
		}
	case FormatSVG:
		if !bytes.Contains(img, []byte("<image")) {
			t.Fatal("svg has no rendered bitmap")
		}
	case FormatPDF:
		if !bytes.Contains(img, []byte("/Subtype/Image")) {
			t.Fatal("pdf has no rendered bitmap")
		}
	}
}

// pngColours decodes a png and counts its distinct colours, up to limit.
func pngColours(t *testing.T, data []byte, limit int) int {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("png does not decode: %v", err)
	}
	seen := map[[4]uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			seen[colourAt(img, x, y)] = true
			if len(seen) >= limit {
				return len(seen)
			}
		}
	}
	return len(seen)
}

func colourAt(img image.Image, x, y int) [4]uint32 {
	r, g, b, a := img.At(x, y).RGBA()
	return [4]uint32{r, g, b, a}
}

// The blank check can fail: a png of one flat colour counts one.
func TestPNGColoursSeesBlank(t *testing.T) {
	t.Parallel()
	img := image.NewRGBA(image.Rect(0, 0, 8, 8))
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	if n := pngColours(t, buf.Bytes(), 2); n != 1 {
		t.Fatalf("blank png: %d colours", n)
	}
}

// Without a display (the state before 3D support), a 3D figure exits 0
// without an image: that is "No image output", and freeglut's complaint is
// in the output. The figure mixing 2D and 3D fails outright: latex misses
// the rendered picture it should include.
func TestRender3DWithoutDisplay(t *testing.T) {
	t.Parallel()
	r := newRunner(t, Limits{})
	r.render3D = render3DNone
	task := mainTask(figures3D[0].src)
	task.Format = FormatPNG
	o, s := runTask(t, r, task)
	wantOutcome(t, o, false, "No image output", s)
	if out := s.Text(""); !strings.Contains(out, "failed to open display") {
		t.Errorf("output %q", tail(out, 2000))
	}
	o, s = runTask(t, r, mainTask(figures3D[len(figures3D)-1].src))
	wantOutcome(t, o, false, "Execution failed with code 1", s)
}

// A 3D figure is bound by the same limits as any task, with the protocol's
// error texts: an endless loop of 3D frames, a canvas too large to render
// (asy's renderer runs out of address space, says "out of memory" and asy
// exits 0 without an image) and an image over Limits.Image.
func TestHostile3D(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		limits  Limits
		format  string
		src     string
		timeout time.Duration
		want    string
		out     string // the output contains it
	}{
		{name: "huge canvas", format: FormatPNG,
			src:  `import three; size(100000cm); draw(unitsphere);`,
			want: "No image output", out: "out of memory"},
		{name: "huge resolution", format: FormatSVG,
			src:  `import three; settings.render=64; size(40cm); draw(unitsphere);`,
			want: "No image output", out: "out of memory"},
		{name: "image over the limit", limits: Limits{Image: 2000}, format: FormatPNG,
			src:  figures3D[0].src,
			want: "Execution aborted due to the output limit (2000B)"},
		{name: "endless animation", format: FormatPNG, timeout: 3 * time.Second,
			src:  `import three; size(2cm); for(int i = 0;; ++i) { erase(); draw(rotate(i, Z)*unitcube, red); shipout("frame" + string(i)); }`,
			want: "Execution aborted due to the time limit (3000ms)"},
		{name: "spin after 3D", format: FormatSVG, timeout: 2 * time.Second,
			src:  `import three; size(2cm); draw(unitsphere); shipout(); while(true) {}`,
			want: "Execution aborted due to the time limit (2000ms)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newRunner(t, tc.limits)
			task := mainTask(tc.src)
			task.Format, task.Timeout = tc.format, tc.timeout
			o, s := runTask(t, r, task)
			wantOutcome(t, o, false, tc.want, s)
			if out := s.Text(""); !strings.Contains(out, tc.out) {
				t.Errorf("output lacks %q: %q", tc.out, tail(out, 2000))
			}
			if s.ImageCount() != 0 {
				t.Errorf("sent %d images", s.ImageCount())
			}
			checkNextTask(t, r)
		})
	}
}

// Settings a file may set, as asy documents them: settings.render=0 gives
// vector 3D (shadings, no bitmap; dvisvgm turns shadings into small
// bitmaps, so the check uses pdf), settings.render=n renders n pixels per
// bp. The
// service refuses the others with a clear message: settings.outformat
// cannot change the task's format ("No image output" and a line saying
// why). settings.prc embeds the 3D scene as PRC (LaTeX's media9 package,
// from texlive-latex-extra; it shows in Adobe Reader only).
func TestSettingsInFile(t *testing.T) {
	t.Parallel()
	r := newRunner(t, Limits{})
	const sphere = "import three; size(3cm); draw(unitsphere, red);\n"
	run := func(t *testing.T, format, src string) (Outcome, *sandboxtest.Sink) {
		task := mainTask(src)
		task.Format = format
		return runTask(t, r, task)
	}
	t.Run("render=0", func(t *testing.T) {
		t.Parallel()
		o, s := run(t, FormatPDF, "settings.render=0;\n"+sphere)
		wantOutcome(t, o, true, "", s)
		if pdf := s.Image(0); bytes.Contains(pdf, []byte("/Subtype/Image")) || !bytes.Contains(pdf, []byte("/ShadingType")) {
			t.Fatal("settings.render=0 did not give vector 3D (PostScript shadings, no bitmap)")
		}
	})
	t.Run("render=4", func(t *testing.T) {
		t.Parallel()
		_, plain := run(t, FormatPNG, sphere)
		o, s := run(t, FormatPNG, "settings.render=4;\n"+sphere)
		wantOutcome(t, o, true, "", s)
		if w, w4 := pngWidth(t, plain.Image(0)), pngWidth(t, s.Image(0)); w4 < 3*w {
			t.Fatalf("render=4 gives %d pixels, the default %d", w4, w)
		}
	})
	t.Run("outformat", func(t *testing.T) {
		t.Parallel()
		o, s := run(t, FormatPNG, `settings.outformat="pdf";`+"\n"+sphere)
		wantOutcome(t, o, false, "No image output", s)
		if out := s.Text(""); !strings.Contains(out, "usher: asy wrote out.pdf, not out.png") {
			t.Fatalf("no explanation: %q", tail(out, 2000))
		}
	})
	t.Run("prc", func(t *testing.T) {
		t.Parallel()
		o, s := run(t, FormatPDF, "settings.prc=true;\n"+sphere)
		wantOutcome(t, o, true, "", s)
		if !bytes.Contains(s.Image(0), []byte("/Subtype/3D")) {
			t.Fatal("settings.prc=true gave a pdf without a 3D annotation")
		}
	})
}

func pngWidth(t *testing.T, data []byte) int {
	t.Helper()
	cfg, err := png.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("png does not decode: %v", err)
	}
	return cfg.Width
}

// An interactive session draws 3D too: each 3D drawing command sends a
// rendered png (asy runs with -noV, so it never waits on a window).
func TestInteractive3D(t *testing.T) {
	t.Parallel()
	r := newRunner(t, Limits{})
	task := interactiveTask()
	task.Format = FormatPNG
	run, s := start(t, context.Background(), r, task)
	input(t, run, "import three; size(3cm);\n")
	input(t, run, "draw(unitsphere, red);\n")
	s.WaitFor(t, outputWait, func() bool { return s.ImageCount() == 1 }, "the first image")
	input(t, run, "draw(shift(2,0,0)*unitcube, blue);\n")
	s.WaitFor(t, outputWait, func() bool { return s.ImageCount() == 2 }, "the second image")
	for i := range 2 {
		checkRendered(t, FormatPNG, s.Image(i))
	}
	if err := run.CloseInput(); err != nil {
		t.Fatal(err)
	}
	o := run.Wait()
	assertGone(t, run)
	wantOutcome(t, o, true, "", s)
}

// The 3D formats beyond svg, pdf and png: html is asy's WebGL page with
// its viewer inlined (nothing loaded from the internet when it is
// viewed), eps the rendering in PostScript, v3d asy's own 3D format. A 2D figure in html is
// an svg in a page. A picture mixing 2D and 3D cannot be html: asy 2.85
// fails on it (the rendered picture latex should include does not exist).
func TestRender3DOtherFormats(t *testing.T) {
	t.Parallel()
	r := newRunner(t, Limits{})
	for _, tc := range []struct {
		name, format, src string
		want              []string // the file contains each
	}{
		{"surface", FormatHTML, figures3D[0].src, []string{"AsyGL", "<canvas"}},
		{"graph3 plot", FormatHTML, figures3D[2].src, []string{"AsyGL"}},
		{"3D label with LaTeX", FormatHTML, figures3D[3].src, []string{"AsyGL"}},
		{"2D", FormatHTML, figure, []string{"<svg"}},
		{"solid", FormatEPS, figures3D[1].src, []string{"%%BoundingBox"}},
		{"solid", FormatV3D, figures3D[1].src, nil},
	} {
		t.Run(tc.name+"/"+tc.format, func(t *testing.T) {
			t.Parallel()
			task := mainTask(tc.src)
			task.Format = tc.format
			o, s := runTask(t, r, task)
			wantOutcome(t, o, true, "", s)
			img := s.Image(0)
			if !HasMagic(tc.format, img) {
				t.Fatalf("not a %s file: %q", tc.format, img[:min(len(img), 40)])
			}
			for _, w := range tc.want {
				if !bytes.Contains(img, []byte(w)) {
					t.Errorf("no %q in the %s file", w, tc.format)
				}
			}
			if tc.format == FormatHTML && regexp.MustCompile(`<script[^>]+src=|<link[^>]+href=`).Match(img) {
				t.Error("the page loads something from elsewhere")
			}
		})
	}
	t.Run("2D and 3D/html", func(t *testing.T) {
		t.Parallel()
		task := mainTask(figures3D[4].src)
		task.Format = FormatHTML
		o, s := runTask(t, r, task)
		wantOutcome(t, o, false, "Execution failed with code 1", s)
	})
}
