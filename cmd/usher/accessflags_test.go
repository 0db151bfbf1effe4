package main

import (
	"strings"
	"testing"
)

// Bad access flags stop `usher serve` before it opens anything, naming
// the value at fault.
func TestServeRefusesBadAccessFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--trusted-proxies", "10.0.0.0/8,proxy.example"}, `trusted proxy "proxy.example" is not a CIDR or an address`},
		{[]string{"--proxy-header", "X-Real-IP"}, `proxy header "X-Real-IP": use X-Forwarded-For or Forwarded`},
		{[]string{"--allowed-origins", "forum.example.org"}, `allowed origin "forum.example.org": give scheme://host[:port]`},
		{[]string{"--share-rate", "10/day"}, `rate "10/day": give N/s, N/m or N/h`},
		{[]string{"--render-rate", "lots"}, `rate "lots"`},
	} {
		args := append([]string{"serve", "--data", t.TempDir() + "/usher.db", "--backends", "0"}, c.args...)
		_, _, err := runCLI(t, "", args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("serve %v: %v; want an error with %q", c.args, err, c.want)
		}
	}
}
