package texinfo

import (
	"context"
	"slices"
	"strings"
	"testing"
)

func TestParseLsR(t *testing.T) {
	const lsR = `% ls-R -- filename database for kpathsea; do not change this line.
./:
ls-R
tex

./tex/latex/psnfss:
mathptmx.sty
ot1ptm.fd
t1ptm.fd
ts1ptm.fd
omlztmcm.fd
psnfss.map

./tex/latex/ocgx2:
ocgx2.sty

./fonts/type1/urw/times:
utmr8a.pfb
notapackage.sty

./tex/generic/pgf/frontendlayer:
tikz.sty
../bad:name.sty
`
	tr := NewTree()
	if err := tr.ParseLsR(strings.NewReader(lsR)); err != nil {
		t.Fatal(err)
	}
	c := tr.Catalog()
	if want := []string{"mathptmx", "ocgx2", "tikz"}; !slices.Equal(c.Packages, want) {
		t.Errorf("packages %v; want %v", c.Packages, want)
	}
	want := []Family{{"ptm", []string{"OT1", "T1", "TS1"}}, {"ztmcm", []string{"OML"}}}
	if len(c.FontFamilies) != len(want) {
		t.Fatalf("families %+v; want %+v", c.FontFamilies, want)
	}
	for i := range want {
		if c.FontFamilies[i].Name != want[i].Name || !slices.Equal(c.FontFamilies[i].Encodings, want[i].Encodings) {
			t.Errorf("family %d: %+v; want %+v", i, c.FontFamilies[i], want[i])
		}
	}
}

func FuzzParseLsR(f *testing.F) {
	f.Add("./tex/latex/x:\na.sty\nt1ptm.fd\n")
	f.Add("%\n./tex/generic:\n\nb.sty\nu.fd\n")
	f.Fuzz(func(t *testing.T, in string) {
		tr := NewTree()
		if err := tr.ParseLsR(strings.NewReader(in)); err != nil {
			return
		}
		c := tr.Catalog()
		for _, p := range c.Packages {
			if !plainName(p) || !strings.Contains(in, p+".sty") {
				t.Fatalf("package %q from %q", p, in)
			}
		}
		for _, fam := range c.FontFamilies {
			if !plainName(fam.Name) || len(fam.Encodings) == 0 {
				t.Fatalf("family %+v from %q", fam, in)
			}
		}
	})
}

// The installed TeX has what the examples and a user expect: Times
// (mathptmx, ptm) and PDF layers (ocgx2).
func TestLoadInstalledTeX(t *testing.T) {
	c, err := Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"mathptmx", "ocgx2", "amsmath", "graphicx", "times"} {
		if _, ok := slices.BinarySearch(c.Packages, p); !ok {
			t.Errorf("package %s missing among %d", p, len(c.Packages))
		}
	}
	i := slices.IndexFunc(c.FontFamilies, func(f Family) bool { return f.Name == "ptm" })
	if i < 0 || !slices.Contains(c.FontFamilies[i].Encodings, "T1") {
		t.Errorf("no Times (ptm) in T1 among %d families", len(c.FontFamilies))
	}
}

// BenchmarkLoad is the start-up cost of /api/tex: kpsewhich and the ls-R
// databases (docs/benchmarks.md).
func BenchmarkLoad(b *testing.B) {
	for b.Loop() {
		if _, err := Load(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}
