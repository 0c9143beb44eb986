package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/parley-voice/parley/control/providers"
	"github.com/parley-voice/parley/session/fakes"
)

// TestProviders are the providers of test-mode conversations: the vendor fakes (package
// session/fakes), served on a loopback port of this node and reached through the real adapters,
// so a test conversation runs the engine exactly as a live one does, at no cost. The fake LLM
// answers "You said: …" unless scripted.
type TestProviders struct {
	*providers.Registry
	Fakes *fakes.Server
	srv   *http.Server
	ln    net.Listener
	done  chan struct{}
	once  sync.Once
}

// NewTestProviders starts the fakes on 127.0.0.1 and returns the providers that use them.
func NewTestProviders(log *slog.Logger) (*TestProviders, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("runtime: listen for the test providers: %w", err)
	}
	f := fakes.NewServer(fakes.ServerOptions{})
	tp := &TestProviders{Fakes: f, ln: ln, done: make(chan struct{}),
		srv: &http.Server{Handler: f, ReadHeaderTimeout: 5 * time.Second}}
	tp.Registry = providers.New(providers.Config{FakesURL: "http://" + ln.Addr().String(), Log: log})
	go func() {
		defer close(tp.done)
		if err := tp.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) && log != nil {
			log.Warn("test providers stopped", "err", err)
		}
	}()
	return tp, nil
}

// URL is the base URL of the fakes.
func (tp *TestProviders) URL() string { return "http://" + tp.ln.Addr().String() }

// Close stops the fakes. It is idempotent.
func (tp *TestProviders) Close() error {
	tp.once.Do(func() {
		tp.Fakes.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := tp.srv.Shutdown(ctx); err != nil {
			tp.srv.Close()
		}
		<-tp.done
	})
	return nil
}
