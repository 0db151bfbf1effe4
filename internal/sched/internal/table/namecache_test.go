package table

import (
	"strings"
	"testing"
)

// A cached name is found by the very string and by an equal one built
// elsewhere; other names and a cleared cache find nothing.
func TestNameCacheFindsEqualNames(t *testing.T) {
	var c NameCache[int]
	v, w := 1, 2
	names := []string{"q", "web-high", "scan-low"}
	c.Put(names[1], &v)
	c.Put(names[0], &w)
	for _, tc := range []struct {
		name string
		want *int
	}{
		{names[1], &v},
		{strings.Clone(names[1]), &v},
		{names[0], &w},
		{names[1][:3], nil},
		{names[2], nil},
	} {
		if got := c.Get(tc.name); got != tc.want {
			t.Errorf("Get(%q) = %p, want %p", tc.name, got, tc.want)
		}
	}
	c.Clear()
	if c.Get(names[1]) != nil {
		t.Error("a cleared cache found a name")
	}
}

// Equal strings hash alike, and the seed changes the hash.
func TestStringHashDependsOnContentAndSeed(t *testing.T) {
	for _, s := range []string{"", "a", "abcd", "asy-1230", "a longer id of many bytes"} {
		if String(s, 1) != String(strings.Clone(s), 1) {
			t.Errorf("%q: equal strings hash apart", s)
		}
		if String(s, 1) == String(s, 2) {
			t.Errorf("%q: two seeds hash alike", s)
		}
	}
}
