package bench

import (
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"
)

// checkXML fails unless s is well-formed XML.
func checkXML(t *testing.T, s string) {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(s))
	for {
		_, err := d.Token()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v", err)
		}
	}
}

func TestSVGIsValidXML(t *testing.T) {
	r := sampleReport()
	svg := r.SVG()
	checkXML(t, svg)
	if !strings.HasPrefix(svg, "<?xml") || !strings.Contains(svg, `<svg xmlns="http://www.w3.org/2000/svg"`) {
		t.Fatal("not an SVG document")
	}
	// Three CDF curves, two cores-per-call series plus the target line, two memory series plus
	// the target line.
	if n := strings.Count(svg, "<polyline"); n != 3+3+3 {
		t.Errorf("%d polylines", n)
	}
	if !strings.Contains(svg, "AMD EPYC &lt;test&gt; &amp; co") {
		t.Error("the title is not escaped")
	}
	empty := (&Report{}).SVG()
	checkXML(t, empty)
	if strings.Count(empty, "no data") != 3 {
		t.Error("an empty report does not say there is no data")
	}
}

func TestNiceTicks(t *testing.T) {
	cases := []struct {
		max  float64
		last float64
	}{{1234, 1250}, {0.0031, 0.004}, {1, 1}, {0, 1}, {87, 100}}
	for _, c := range cases {
		ts := niceTicks(c.max, 5)
		if ts[0] != 0 || ts[len(ts)-1] != c.last || ts[len(ts)-1] < c.max {
			t.Errorf("niceTicks(%v) = %v", c.max, ts)
		}
	}
	if fmtTick(0.0025) != "0.0025" || fmtTick(1500) != "1500" || fmtTick(2.5) != "2.5" {
		t.Error("fmtTick")
	}
}

func TestNiceRange(t *testing.T) {
	ts := niceRange(1153, 1290, 5)
	if ts[0] > 1153 || ts[len(ts)-1] < 1290 || ts[0] < 1000 {
		t.Errorf("niceRange = %v", ts)
	}
	if ts := niceRange(3, 900, 5); ts[0] != 0 {
		t.Errorf("a range near zero starts at %v", ts[0])
	}
}
