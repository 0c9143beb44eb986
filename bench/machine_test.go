package bench

import (
	"runtime"
	"testing"
)

func TestMachine(t *testing.T) {
	if got := cpuModel([]byte("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\n\nprocessor : 1\nmodel name : other\n")); got != "AMD EPYC 7B13" {
		t.Errorf("cpu model %q", got)
	}
	if got := cpuModel([]byte("nothing")); got != "unknown" {
		t.Errorf("cpu model of nothing %q", got)
	}
	if got := memTotalMB([]byte("MemTotal:        8048576 kB\nMemFree: 1 kB\n")); got != 7859 {
		t.Errorf("memory %d", got)
	}
	m := ThisMachine()
	if m.Cores != runtime.NumCPU() || m.CPUModel == "" || m.GoVersion == "" {
		t.Errorf("%+v", m)
	}
}

func TestParseVersion(t *testing.T) {
	cases := []struct{ in, v, c string }{
		{"parley v0.3.0-12-gabc (commit abc1234, go1.26.8, linux/amd64)\n", "v0.3.0-12-gabc", "abc1234"},
		{"parley dev (commit unknown, go1.26.8, linux/amd64)", "dev", "unknown"},
		{"something else", "unknown", "unknown"},
	}
	for _, c := range cases {
		if v, cm := parseVersion(c.in); v != c.v || cm != c.c {
			t.Errorf("%q: %q %q", c.in, v, cm)
		}
	}
}
