package bench

import (
	"testing"
	"time"
)

func TestLatenciesOutside(t *testing.T) {
	l := JambonzLatencies()
	if got := l.Outside(); got != 600*time.Millisecond+400*time.Millisecond+150*time.Millisecond {
		t.Errorf("outside %v", got)
	}
	l.LLMFirstChunkTokens, l.STTFinalDelay = 4, 50*time.Millisecond
	if got := l.LLMFirstChunk(); got != 450*time.Millisecond {
		t.Errorf("first chunk %v", got)
	}
	if got := l.Outside(); got != 1250*time.Millisecond {
		t.Errorf("outside %v", got)
	}
}
