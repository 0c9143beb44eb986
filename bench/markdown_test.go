package bench

import (
	"strings"
	"testing"
)

func TestMarkdown(t *testing.T) {
	md := sampleReport().Markdown("latest.svg")
	for _, want := range []string{
		"- Machine: 2 cores, AMD EPYC <test> & co, 4000 MB, Linux 6.1, go1.26",
		"- Parley: v1 (commit abc1234)",
		"command: `make bench-e2e`",
		"| capacity | sip | 200 calls | 200 | 0 | 400 |",
		"| rate | sip | 400/s | 800 | 3 |",
		"sip 503 ×3",
		"highest concurrency passing (p95 within +25% of the baseline, under 0.5% failed): **200**",
		"highest rate with no failure: **300 calls/s**, p95 setup 3.5 ms",
		"| Cores per G.711 call | ≤ 0.0020 | 0.0018 cores | yes |",
		"| WebRTC Opus call | ≤ 0.012 cores | 0.0200 cores at 5 calls (judged at 5 calls) | **no** |",
		"- a warning",
		"![turn latency CDF and cores per call](latest.svg)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
}
