package tts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// EspeakConfig configures the local espeak-ng synthesizer.
type EspeakConfig struct {
	// Path of the program; default "espeak-ng" looked up in PATH.
	Path string
	// Voice is the default voice ("en"); Request.Voice, then Request.Language, override it.
	Voice string
	// Speed in words per minute (-s); default 175.
	Speed int
	// Pitch 0-99 (-p); 0 leaves espeak-ng's default (50).
	Pitch int
	// ReadBuffer is the size of one pipe read in bytes. Default 4096.
	ReadBuffer int
}

// Espeak is a Synthesizer that runs espeak-ng locally: offline, instant, robotic. The text
// goes to the process on stdin (never on its command line), and its WAV output (22050 Hz) is
// parsed and resampled to the request's rate as it is produced.
type Espeak struct {
	cfg  EspeakConfig
	path string
}

// voicePattern accepts espeak-ng voice names such as "en", "en-us", "en+f3", "mb/mb-en1".
var voicePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_+./-]{0,63}$`)

// NewEspeak finds the program and returns the adapter.
func NewEspeak(cfg EspeakConfig) (*Espeak, error) {
	if cfg.Path == "" {
		cfg.Path = "espeak-ng"
	}
	p, err := exec.LookPath(cfg.Path)
	if err != nil {
		return nil, fmt.Errorf("%w: espeak-ng: %v", ErrInvalidOptions, err)
	}
	if cfg.Voice == "" {
		cfg.Voice = "en"
	}
	if !voicePattern.MatchString(cfg.Voice) {
		return nil, fmt.Errorf("%w: espeak-ng voice %q", ErrInvalidOptions, cfg.Voice)
	}
	if cfg.Speed == 0 {
		cfg.Speed = 175
	}
	if cfg.Speed < 80 || cfg.Speed > 450 {
		return nil, fmt.Errorf("%w: espeak-ng speed %d (80-450)", ErrInvalidOptions, cfg.Speed)
	}
	if cfg.Pitch < 0 || cfg.Pitch > 99 {
		return nil, fmt.Errorf("%w: espeak-ng pitch %d (0-99)", ErrInvalidOptions, cfg.Pitch)
	}
	if cfg.ReadBuffer <= 0 {
		cfg.ReadBuffer = 4096
	}
	return &Espeak{cfg: cfg, path: p}, nil
}

// Synthesize starts espeak-ng for r.Text.
func (e *Espeak) Synthesize(ctx context.Context, r Request) (Stream, error) {
	r, err := r.normalize()
	if err != nil {
		return nil, err
	}
	voice := r.Voice
	if voice == "" && r.Language != "" {
		voice = strings.ToLower(strings.ReplaceAll(r.Language, "_", "-"))
	}
	if voice == "" {
		voice = e.cfg.Voice
	}
	if !voicePattern.MatchString(voice) {
		return nil, fmt.Errorf("%w: espeak-ng voice %q", ErrInvalidRequest, voice)
	}
	args := []string{"--stdout", "--stdin", "-b", "1", "-v", voice, "-s", strconv.Itoa(e.cfg.Speed)}
	if e.cfg.Pitch > 0 {
		args = append(args, "-p", strconv.Itoa(e.cfg.Pitch))
	}
	sctx, cancel := context.WithCancel(ctx)
	cmd := exec.CommandContext(sctx, e.path, args...)
	cmd.Stdin = strings.NewReader(r.Text)
	stderr := &tailBuffer{max: 2048}
	cmd.Stderr = stderr
	// Our own pipe, so that Wait never closes the read end under a Read.
	pr, pw, err := os.Pipe()
	if err != nil {
		cancel()
		return nil, &ProviderError{Provider: "espeak-ng", Op: "synthesize", Err: err}
	}
	cmd.Stdout = pw
	if err := cmd.Start(); err != nil {
		cancel()
		pr.Close()
		pw.Close()
		return nil, &ProviderError{Provider: "espeak-ng", Op: "synthesize", Err: err}
	}
	pw.Close()
	exited := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	src := &wavSource{r: pr, buf: make([]byte, e.cfg.ReadBuffer)}
	s := &pcmStream{provider: "espeak-ng", src: src, format: formatLinear16, outRate: r.SampleRate, cancel: cancel}
	s.closeFn = func() error {
		<-exited
		return pr.Close()
	}
	s.finishFn = func(err error) error {
		if !errors.Is(err, io.EOF) {
			return err
		}
		<-exited
		if waitErr != nil && !s.closed.Load() {
			return &ProviderError{Provider: "espeak-ng", Op: "read", Message: strings.TrimSpace(stderr.String()), Err: waitErr}
		}
		if !src.started {
			return &ProviderError{Provider: "espeak-ng", Op: "read", Message: "no WAV data in output", Err: errBadWAV}
		}
		return err
	}
	return s, nil
}

// tailBuffer keeps the last max bytes written (stderr of a child process).
type tailBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	if over := b.buf.Len() - b.max; over > 0 {
		b.buf.Next(over)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
