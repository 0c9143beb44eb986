package bench

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"math"
	"sort"
	"strings"
)

// SVG panel geometry.
const (
	svgPanelW  = 400
	svgPanelH  = 320
	svgMarginL = 62
	svgMarginR = 16
	svgMarginT = 34
	svgMarginB = 46
)

var svgColors = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"}

// svgSeries is a named line or set of points.
type svgSeries struct {
	name   string
	xs, ys []float64
	step   bool // draw as a step function (a CDF)
	dashed bool
}

// SVG draws the report's picture: the turn latency CDF of every step, and cores per call and
// MB per call against concurrency. It is plain SVG 1.1, written by hand.
func (r *Report) SVG() string {
	var cdf, cores, mem []svgSeries
	coreByScenario := map[string]*svgSeries{}
	memByScenario := map[string]*svgSeries{}
	var order []string
	for _, sc := range r.Scenarios {
		for _, st := range sc.Steps {
			if len(st.LatencySamples) > 0 {
				pts := CDF(st.LatencySamples, 200)
				s := svgSeries{name: fmt.Sprintf("%s ×%d", seriesName(sc.Name, st.Kind), st.Concurrency), step: true}
				for _, p := range pts {
					s.xs, s.ys = append(s.xs, p.X), append(s.ys, p.F)
				}
				cdf = append(cdf, s)
			}
			if st.Concurrency > 0 && st.CoresPerCall > 0 {
				key := seriesName(sc.Name, st.Kind)
				if coreByScenario[key] == nil {
					coreByScenario[key] = &svgSeries{name: key}
					memByScenario[key] = &svgSeries{name: key}
					order = append(order, key)
				}
				c := coreByScenario[key]
				c.xs, c.ys = append(c.xs, float64(st.Concurrency)), append(c.ys, st.CoresPerCall)
				if st.MBPerCall > 0 {
					m := memByScenario[key]
					m.xs, m.ys = append(m.xs, float64(st.Concurrency)), append(m.ys, st.MBPerCall)
				}
			}
		}
	}
	for _, k := range order {
		cores = append(cores, *coreByScenario[k])
		if len(memByScenario[k].xs) > 0 {
			mem = append(mem, *memByScenario[k])
		}
	}
	if len(cores) > 0 {
		maxX := 0.0
		for _, s := range cores {
			for _, x := range s.xs {
				maxX = math.Max(maxX, x)
			}
		}
		cores = append(cores, svgSeries{name: "target G.711 0.003", xs: []float64{0, maxX}, ys: []float64{0.003, 0.003}, dashed: true})
		mem = append(mem, svgSeries{name: "target 0.25 MB", xs: []float64{0, maxX}, ys: []float64{0.25, 0.25}, dashed: true})
	}
	var b bytes.Buffer
	w := 3 * svgPanelW
	fmt.Fprintf(&b, `<?xml version="1.0" encoding="UTF-8"?>`+"\n")
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n", w, svgPanelH+20, w, svgPanelH+20)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	title := fmt.Sprintf("Parley %s on %d cores (%s)", r.Parley.Commit, r.Machine.Cores, r.Machine.CPUModel)
	fmt.Fprintf(&b, `<text x="%d" y="14" font-size="12" font-weight="bold">%s</text>`+"\n", 8, esc(title))
	svgPanel(&b, 0, 20, "Turn latency CDF (caller's ear)", "latency (ms)", "fraction of turns", cdf, true)
	svgPanel(&b, svgPanelW, 20, "Parley cores per call", "concurrent calls", "cores per call", cores, false)
	svgPanel(&b, 2*svgPanelW, 20, "Parley memory per call", "concurrent calls", "MB RSS per call", mem, false)
	b.WriteString("</svg>\n")
	return b.String()
}

func seriesName(scenario, kind string) string {
	if scenario == kind {
		return scenario
	}
	return scenario + " " + kind
}

func esc(s string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// niceTicks returns about n round tick values covering [0, max].
func niceTicks(max float64, n int) []float64 {
	if max <= 0 || math.IsNaN(max) || math.IsInf(max, 0) {
		max = 1
	}
	raw := max / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var ts []float64
	for v := 0.0; v <= max+step*0.999; v += step {
		ts = append(ts, math.Round(v/step)*step)
		if len(ts) > 50 {
			break
		}
	}
	return ts
}

// niceRange returns about n round ticks covering [lo, hi], starting at a round value at or below
// lo (0 when lo is near 0 compared with the range).
func niceRange(lo, hi float64, n int) []float64 {
	if lo < 0 || hi-lo <= 0 || lo < (hi-lo)/2 {
		return niceTicks(hi, n)
	}
	ts := niceTicks(hi-lo, n)
	step := ts[1] - ts[0]
	start := math.Floor(lo/step) * step
	var out []float64
	for v := start; v <= hi+step*0.999 && len(out) <= 50; v += step {
		out = append(out, math.Round(v/step)*step)
	}
	return out
}

func fmtTick(v float64) string {
	switch {
	case v == 0:
		return "0"
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 1:
		return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.2f", v), "0"), ".")
	default:
		return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.4f", v), "0"), ".")
	}
}

// svgPanel draws one chart with axes, ticks, series and a legend at (ox, oy).
func svgPanel(b *bytes.Buffer, ox, oy int, title, xlabel, ylabel string, series []svgSeries, cdf bool) {
	x0, y0 := float64(ox+svgMarginL), float64(oy+svgPanelH-svgMarginB)
	pw, ph := float64(svgPanelW-svgMarginL-svgMarginR), float64(svgPanelH-svgMarginT-svgMarginB)
	fmt.Fprintf(b, `<g>`+"\n"+`<text x="%.0f" y="%d" font-size="12" text-anchor="middle">%s</text>`+"\n", x0+pw/2, oy+18, esc(title))
	minX, maxX, maxY := math.Inf(1), 0.0, 0.0
	for _, s := range series {
		for i := range s.xs {
			minX, maxX, maxY = math.Min(minX, s.xs[i]), math.Max(maxX, s.xs[i]), math.Max(maxY, s.ys[i])
		}
	}
	if cdf {
		maxY = 1
	}
	if len(series) == 0 || maxX <= 0 {
		fmt.Fprintf(b, `<rect x="%.0f" y="%.0f" width="%.0f" height="%.0f" fill="none" stroke="#999"/>`+"\n", x0, y0-ph, pw, ph)
		fmt.Fprintf(b, `<text x="%.0f" y="%.0f" text-anchor="middle" fill="#666">no data</text>`+"\n</g>\n", x0+pw/2, y0-ph/2)
		return
	}
	xt, yt := niceTicks(maxX, 5), niceTicks(maxY*1.05+0.3*maxY*float64(min(len(series), 6))/4, 5) // headroom for the legend
	if cdf {
		xt = niceRange(minX, maxX, 5)
		yt = []float64{0, 0.25, 0.5, 0.75, 1}
	}
	xmin, xmax, ymax := xt[0], xt[len(xt)-1], yt[len(yt)-1]
	px := func(v float64) float64 { return x0 + (v-xmin)/(xmax-xmin)*pw }
	py := func(v float64) float64 { return y0 - v/ymax*ph }
	for _, t := range xt {
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/>`, px(t), y0, px(t), y0-ph)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", px(t), y0+14, fmtTick(t))
	}
	for _, t := range yt {
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/>`, x0, py(t), x0+pw, py(t))
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", x0-4, py(t)+4, fmtTick(t))
	}
	fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#333"/>`+"\n", x0, y0-ph, pw, ph)
	fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x0+pw/2, oy+svgPanelH-10, esc(xlabel))
	fmt.Fprintf(b, `<text transform="translate(%d,%.1f) rotate(-90)" text-anchor="middle">%s</text>`+"\n", ox+14, y0-ph/2, esc(ylabel))
	for i, s := range series {
		color := svgColors[i%len(svgColors)]
		dash := ""
		if s.dashed {
			color, dash = "#555", ` stroke-dasharray="5,4"`
		}
		var pts []string
		idx := make([]int, len(s.xs))
		for k := range idx {
			idx[k] = k
		}
		if !s.step {
			sort.SliceStable(idx, func(a, c int) bool { return s.xs[idx[a]] < s.xs[idx[c]] })
		}
		prevY := 0.0
		for n, k := range idx {
			if s.step {
				if n == 0 {
					pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(s.xs[k]), py(0)))
				} else {
					pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(s.xs[k]), py(prevY)))
				}
				prevY = s.ys[k]
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(s.xs[k]), py(s.ys[k])))
		}
		fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="1.6"%s points="%s"><title>%s</title></polyline>`+"\n", color, dash, strings.Join(pts, " "), esc(s.name))
		if !s.step && !s.dashed {
			for _, k := range idx {
				fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>%s: %s at %s</title></circle>`+"\n", px(s.xs[k]), py(s.ys[k]), color, esc(s.name), fmtTick(s.ys[k]), fmtTick(s.xs[k]))
			}
		}
		// Legend, top right inside the plot (bottom right for the CDF, whose curves rise there;
		// per-call costs are highest at low concurrency, on the left).
		ly := y0 - ph + 14 + float64(i)*13
		lx := x0 + pw*0.5
		if cdf {
			ly = y0 - 8 - float64(len(series)-1-i)*13
			lx = x0 + pw*0.55
		}
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"%s/><text x="%.1f" y="%.1f">%s</text>`+"\n",
			lx, ly-4, lx+14, ly-4, color, dash, lx+18, ly, esc(s.name))
	}
	b.WriteString("</g>\n")
}
