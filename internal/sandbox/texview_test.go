package sandbox

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
)

// The sandbox's read-only view of TeX (rootfsArgs: /usr and
// /var/lib/texmf) holds texlive-fonts-recommended and texlive-latex-extra,
// which scripts/deps.sh and the Dockerfile install: a label in Times
// (mathptmx) and a figure with PDF layers (ocgx2) compile in every 2D
// format, and the pdf has what the user asked for.
func TestTeXViewHasRecommendedFontsAndLatexExtra(t *testing.T) {
	r := newRunner(t, Limits{})
	figures := map[string]struct {
		src    string
		inPDF  string // what the pdf must contain
		reason string
	}{
		"times": {`usepackage("mathptmx");
size(3cm); draw(unitcircle);
label("Times $\int_0^1 x\,dx$", (0,0));
`, "NimbusRom", "a Times font (URW Nimbus Roman) embedded"},
		"ocgx2": {`usepackage("ocgx2");
size(3cm); draw(unitcircle, blue);
label("\begin{ocg}{Answer}{ans}{1}$x=2$\end{ocg}", (0,0));
`, "/OCProperties", "an optional content group (a PDF layer)"},
	}
	var wg sync.WaitGroup
	for name, fig := range figures {
		for _, format := range []string{FormatSVG, FormatPDF, FormatPNG} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				task := mainTask(fig.src)
				task.Format = format
				o, s := runTask(t, r, task)
				if !o.Success || s.ImageCount() != 1 {
					t.Errorf("%s in %s: %+v, %d images; output:\n%s", name, format, o, s.ImageCount(), s)
					return
				}
				if format == FormatPDF && !bytes.Contains(s.Image(0), []byte(fig.inPDF)) {
					t.Errorf("%s: the pdf lacks %s (%s)", name, fig.reason, fmt.Sprintf("%q", fig.inPDF))
				}
			}()
		}
	}
	wg.Wait()
}
