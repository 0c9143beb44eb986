package tts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/parley-voice/parley/media/internal/retry"
	"io"
	"log/slog"
	"net/http"
	"time"
)

// httpSpec is one streaming synthesis request, shared by the HTTP adapters.
type httpSpec struct {
	provider   string
	client     *http.Client
	url        string
	header     http.Header
	body       []byte
	maxRetries int
	bo         retry.Backoff
	firstByte  time.Duration
	log        *slog.Logger
	parseErr   func(raw []byte) (code, msg string)
}

// open sends the request, retrying 5xx, 429 and network failures that happen before an answer
// (never auth or other 4xx, never a first-byte timeout: the latency budget is spent). On
// success the response body is live and the stall watch is armed for the first audio byte.
func (h *httpSpec) open(ctx context.Context) (*http.Response, context.CancelFunc, *stallWatch, error) {
	for attempt := 0; ; attempt++ {
		resp, cancel, w, err := h.attempt(ctx)
		if err == nil {
			return resp, cancel, w, nil
		}
		var pe *ProviderError
		again := errors.As(err, &pe) && pe.Temporary() && !pe.Is(ErrTimeout)
		if !again || attempt >= h.maxRetries || ctx.Err() != nil {
			return nil, nil, nil, err
		}
		h.log.Warn(h.provider+": request failed, retrying", "attempt", attempt+1, "err", err)
		if !retry.Wait(ctx, nil, h.bo.Delay(attempt+1)) {
			return nil, nil, nil, &ProviderError{Provider: h.provider, Op: "synthesize", Err: ctx.Err()}
		}
	}
}

func (h *httpSpec) attempt(ctx context.Context) (*http.Response, context.CancelFunc, *stallWatch, error) {
	sctx, cancel := context.WithCancel(ctx)
	w := newStallWatch(h.firstByte, cancel)
	fail := func(pe *ProviderError) (*http.Response, context.CancelFunc, *stallWatch, error) {
		w.disarm()
		cancel()
		if w.fired.Load() {
			pe.Err = fmt.Errorf("%w: no answer within %v", ErrTimeout, h.firstByte)
		}
		return nil, nil, nil, pe
	}
	req, err := http.NewRequestWithContext(sctx, http.MethodPost, h.url, bytes.NewReader(h.body))
	if err != nil {
		return fail(&ProviderError{Provider: h.provider, Op: "synthesize", Err: err})
	}
	req.Header = h.header.Clone()
	resp, err := h.client.Do(req)
	if err != nil {
		return fail(&ProviderError{Provider: h.provider, Op: "synthesize", Err: err})
	}
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		pe := &ProviderError{Provider: h.provider, Op: "synthesize", Status: resp.StatusCode}
		pe.Code, pe.Message = h.parseErr(raw)
		return fail(pe)
	}
	w.disarm() // Read re-arms it while it waits for audio
	return resp, cancel, w, nil
}

// newHTTPStream wraps a live response in a pcmStream.
func newHTTPStream(provider string, resp *http.Response, cancel context.CancelFunc, w *stallWatch, src chunkSource, format sampleFormat, outRate int, stall time.Duration) *pcmStream {
	w.stall = stall
	return &pcmStream{
		provider: provider,
		src:      src,
		format:   format,
		outRate:  outRate,
		watch:    w,
		cancel:   cancel,
		closeFn:  resp.Body.Close,
	}
}
