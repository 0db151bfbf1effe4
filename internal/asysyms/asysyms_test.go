package asysyms

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"
)

// Lines as asy 2.85's -l prints them.
func TestParseLine(t *testing.T) {
	tests := []struct {
		line string
		want Symbol
		ok   bool
	}{
		{"void draw(picture pic=<default>, explicit path[] g, pen p=<default>, Label legend=<default>, marker marker=<default>);",
			Symbol{"draw", KindFunction, "void draw(picture pic=<default>, explicit path[] g, pen p=<default>, Label legend=<default>, marker marker=<default>)"}, true},
		{"real sqrtEpsilon;", Symbol{"sqrtEpsilon", KindVariable, "real sqrtEpsilon"}, true},
		{"pen heavyred;", Symbol{"heavyred", KindVariable, "pen heavyred"}, true},
		{"marginT PenMargin(path, pen)(real begin, real end=<default>);",
			Symbol{"PenMargin", KindFunction, "marginT PenMargin(path, pen)(real begin, real end=<default>)"}, true},
		{"void()()[] map(void f()()(void()()), void()()[] a);",
			Symbol{"map", KindFunction, "void()()[] map(void f()()(void()()), void()()[] a)"}, true},
		{"void()()[] concat(... void()()[][]);",
			Symbol{"concat", KindFunction, "void()()[] concat(... void()()[][])"}, true},
		{"real[][] transpose(real[][] a);", Symbol{"transpose", KindFunction, "real[][] transpose(real[][] a)"}, true},
		{"  version version;  ", Symbol{"version", KindVariable, "version version"}, true},
		{"string operator +(string a, string b);", Symbol{}, false},
		{"pen operator cast(real);", Symbol{}, false},
		{"", Symbol{}, false},
		{"real sqrtEpsilon", Symbol{}, false}, // no semicolon
		{"sqrtEpsilon;", Symbol{}, false},     // no type
		{"real 2x;", Symbol{}, false},
		{"void f(int x;", Symbol{}, false},
		{"Asymptote version 2.85", Symbol{}, false},
	}
	for _, tc := range tests {
		got, ok := ParseLine(tc.line)
		if ok != tc.ok || got != tc.want {
			t.Errorf("ParseLine(%q) = %+v, %v; want %+v, %v", tc.line, got, ok, tc.want, tc.ok)
		}
	}
}

func TestParseAddsTypesAndDropsRepeats(t *testing.T) {
	in := "pen red;\npen red;\nreal[] cbrt(real[] a);\nvoid()()[] copy(void()()[] a, int depth=<default>);\nstring operator +(string a, string b);\n"
	got, err := Parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Symbol{
		{"red", KindVariable, "pen red"},
		{"cbrt", KindFunction, "real[] cbrt(real[] a)"},
		{"copy", KindFunction, "void()()[] copy(void()()[] a, int depth=<default>)"},
		{"pen", KindType, "pen"},
		{"real", KindType, "real"},
		{"void", KindType, "void"},
	}
	if len(got) != len(want) {
		t.Fatalf("Parse = %+v; want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("Parse[%d] = %+v; want %+v", i, got[i], want[i])
		}
	}
}

func FuzzParseLine(f *testing.F) {
	for _, s := range []string{"void draw(picture pic=<default>, path g);", "real pi;", "pen operator +(pen a, pen b);", "x;", "a b(;"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		s, ok := ParseLine(line)
		if !ok {
			return
		}
		if !ident.MatchString(s.Name) || s.Name == "operator" {
			t.Fatalf("name %q is not an identifier", s.Name)
		}
		if s.Kind != KindFunction && s.Kind != KindVariable {
			t.Fatalf("kind %q", s.Kind)
		}
		if !strings.Contains(s.Signature, " "+s.Name) || strings.HasSuffix(s.Signature, ";") {
			t.Fatalf("signature %q of %q", s.Signature, s.Name)
		}
		if utf8.ValidString(line) && !utf8.ValidString(s.Signature) {
			t.Fatalf("signature %q not UTF-8", s.Signature)
		}
		// Parsing the symbol's own declaration again gives it back.
		again, ok := ParseLine(s.Signature + ";")
		if !ok || again != s {
			t.Fatalf("reparse of %q = %+v, %v", s.Signature, again, ok)
		}
	})
}

// The installed asy answers: draw with its signatures, the plain types,
// and graph and three among the modules.
func TestLoadFromInstalledAsy(t *testing.T) {
	c, err := Load(context.Background(), "", "Asymptote version x")
	if err != nil {
		t.Fatal(err)
	}
	var draws int
	kinds := map[string]string{}
	for _, s := range c.Symbols {
		if s.Name == "draw" && s.Kind == KindFunction {
			draws++
			if !strings.Contains(s.Signature, " draw(") {
				t.Errorf("draw's signature %q", s.Signature)
			}
		}
		kinds[s.Name] = s.Kind
	}
	if draws < 5 {
		t.Errorf("%d signatures of draw; want its overloads", draws)
	}
	for name, kind := range map[string]string{"pen": KindType, "picture": KindType, "unitcircle": KindVariable, "label": KindFunction} {
		if kinds[name] != kind {
			t.Errorf("%s is %q; want %q", name, kinds[name], kind)
		}
	}
	mods := strings.Join(c.Modules, " ")
	for _, m := range []string{"graph", "three", "geometry", "plain"} {
		if !strings.Contains(" "+mods+" ", " "+m+" ") {
			t.Errorf("modules %v lack %s", c.Modules, m)
		}
	}
}

func TestLoadWithoutAsySaysSo(t *testing.T) {
	_, err := Load(context.Background(), "/nonexistent/asy", "")
	if err == nil || !strings.Contains(err.Error(), ErrNoAsy.Error()) {
		t.Fatalf("Load with no asy: %v", err)
	}
}

// BenchmarkLoad is the start-up cost of /api/symbols: asy -l, asy's
// system directory, the parse (docs/benchmarks.md).
func BenchmarkLoad(b *testing.B) {
	for b.Loop() {
		if _, err := Load(context.Background(), "", ""); err != nil {
			b.Fatal(err)
		}
	}
}
