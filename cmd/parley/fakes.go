package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/parley-voice/parley/session/fakes"
)

// fakesFlags are the latencies and scripts of `parley fakes`; the defaults are jambonz's
// load-test mock latencies, so results compare across systems.
type fakesFlags struct {
	addr               string
	llmFirst, sttEvery time.Duration
	sttFinal, ttsFirst time.Duration
	llmTPS, ttsSpeed   float64
	script, sttScript  string
	espeak             bool
}

func (f *fakesFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.addr, "addr", "127.0.0.1:9100", "address to serve every fake on")
	fs.DurationVar(&f.llmFirst, "llm-first-token", 400*time.Millisecond, "LLM time to first token")
	fs.Float64Var(&f.llmTPS, "llm-tps", 60, "LLM tokens per second after the first (0: as fast as possible)")
	fs.StringVar(&f.script, "script", "", "LLM reply script (text: turns separated by ---, 'call NAME {json}' lines; or JSON); default echoes")
	fs.DurationVar(&f.sttEvery, "stt-interim-every", 250*time.Millisecond, "STT interim results every this much speech")
	fs.DurationVar(&f.sttFinal, "stt-final-delay", 0, "STT final result this long after the endpointing silence")
	fs.StringVar(&f.sttScript, "stt-script", "", "file with one transcript line per caller utterance")
	fs.DurationVar(&f.ttsFirst, "tts-first-byte", 150*time.Millisecond, "TTS time to first audio byte")
	fs.Float64Var(&f.ttsSpeed, "tts-speed", 4, "TTS speed against real time after the first byte")
	fs.BoolVar(&f.espeak, "tts-espeak", false, "TTS speaks with espeak-ng instead of a tone")
}

func (f *fakesFlags) options() (fakes.ServerOptions, error) {
	o := fakes.ServerOptions{LLMFirstToken: f.llmFirst, LLMTokensPerSec: f.llmTPS, STTInterimEvery: f.sttEvery,
		STTFinalDelay: f.sttFinal, TTSFirstByte: f.ttsFirst, TTSSpeed: f.ttsSpeed, TTSEspeak: f.espeak}
	if f.script != "" {
		s, err := fakes.LoadScript(f.script)
		if err != nil {
			return o, fmt.Errorf("--script: %w", err)
		}
		o.Script = s
	}
	if f.sttScript != "" {
		raw, err := os.ReadFile(f.sttScript)
		if err != nil {
			return o, fmt.Errorf("--stt-script: %w", err)
		}
		for _, l := range strings.Split(string(raw), "\n") {
			if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
				o.STTScript = append(o.STTScript, l)
			}
		}
	}
	return o, nil
}

// cmdFakes serves local fakes of every paid vendor (Deepgram, OpenAI, Anthropic, ElevenLabs) on
// one address, speaking their real protocols. Point Parley at it with PARLEY_FAKES_URL.
func cmdFakes(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("parley fakes", flag.ContinueOnError)
	fs.SetOutput(stdout)
	var f fakesFlags
	f.register(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return usageError{err.Error()}
	}
	o, err := f.options()
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", f.addr, err)
	}
	srv := fakes.NewServer(o)
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	log.Info("fakes serving", "addr", ln.Addr().String(), "llm_first_token", f.llmFirst, "llm_tps", f.llmTPS,
		"stt_interim_every", f.sttEvery, "stt_final_delay", f.sttFinal, "tts_first_byte", f.ttsFirst, "tts_speed", f.ttsSpeed)
	fmt.Fprintf(stdout, "fakes: point Parley at them with PARLEY_FAKES_URL=http://%s\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	srv.Close()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return hs.Shutdown(sctx)
}
