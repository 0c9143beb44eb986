// Package cdp drives a headless Chromium from Go tests over the Chrome DevTools Protocol: it
// launches the browser with a fresh profile and the flags that keep it off the network, opens
// pages, evaluates JavaScript (awaiting promises) and collects the pages' console output. It is
// a minimal client of the protocol's JSON-over-WebSocket form (targets attached in flat mode),
// for tests only: production code must never import it.
package cdp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// BaseFlags are always passed: headless, no sandbox (containers), no GPU, and nothing that
// reaches the network on its own (QUIC, background networking, component updates, sync).
var BaseFlags = []string{
	"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
	"--disable-background-networking", "--disable-component-update", "--disable-sync",
	"--disable-default-apps", "--disable-extensions",
}

// Browser is a running Chromium.
type Browser struct {
	cmd    *exec.Cmd
	dir    string
	ws     *websocket.Conn
	wmu    sync.Mutex
	nextID atomic.Int64

	mu      sync.Mutex
	pending map[int64]chan reply
	pages   map[string]*Page // by session id
	closed  bool
	readErr error

	done     chan struct{} // the reader stopped
	procDone chan struct{} // the process exited
	stderr   *tail
}

type reply struct {
	Result json.RawMessage
	Err    error
}

type wireMsg struct {
	ID        int64           `json:"id,omitempty"`
	Method    string          `json:"method,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

// Launch starts the browser at bin with BaseFlags, a fresh --user-data-dir and extra flags, and
// connects to it.
func Launch(ctx context.Context, bin string, extra ...string) (*Browser, error) {
	dir, err := os.MkdirTemp("", "parley-chromium-*")
	if err != nil {
		return nil, err
	}
	args := append(append([]string{}, BaseFlags...), "--user-data-dir="+dir, "--remote-debugging-port=0")
	args = append(args, extra...)
	args = append(args, "about:blank")
	cmd := exec.Command(bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	b := &Browser{cmd: cmd, dir: dir, pending: map[int64]chan reply{}, pages: map[string]*Page{},
		done: make(chan struct{}), procDone: make(chan struct{}), stderr: &tail{}}
	urlCh := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			b.stderr.add(line)
			if !sent {
				if _, u, ok := strings.Cut(line, "DevTools listening on "); ok {
					urlCh <- strings.TrimSpace(u)
					sent = true
				}
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	go func() {
		_ = cmd.Wait()
		close(b.procDone)
	}()
	var wsURL string
	select {
	case wsURL = <-urlCh:
	case <-b.procDone:
		b.cleanup()
		return nil, fmt.Errorf("chromium exited before listening:\n%s", b.stderr.String())
	case <-ctx.Done():
		b.kill()
		return nil, fmt.Errorf("chromium did not start: %w\n%s", ctx.Err(), b.stderr.String())
	}
	ws, _, err := websocket.DefaultDialer.DialContext(ctx, wsURL, nil)
	if err != nil {
		b.kill()
		return nil, fmt.Errorf("connect to chromium: %w", err)
	}
	ws.SetReadLimit(64 << 20)
	b.ws = ws
	go b.reader()
	return b, nil
}

// Stderr returns the browser's last log lines.
func (b *Browser) Stderr() string { return b.stderr.String() }

func (b *Browser) reader() {
	defer close(b.done)
	for {
		var m wireMsg
		if err := b.ws.ReadJSON(&m); err != nil {
			b.mu.Lock()
			b.readErr = err
			for id, ch := range b.pending {
				ch <- reply{Err: fmt.Errorf("connection lost: %w", err)}
				delete(b.pending, id)
			}
			b.mu.Unlock()
			return
		}
		if m.ID != 0 {
			b.mu.Lock()
			ch := b.pending[m.ID]
			delete(b.pending, m.ID)
			b.mu.Unlock()
			if ch != nil {
				r := reply{Result: m.Result}
				if m.Error != nil {
					r.Err = fmt.Errorf("cdp error %d: %s", m.Error.Code, m.Error.Message)
				}
				ch <- r
			}
			continue
		}
		b.mu.Lock()
		p := b.pages[m.SessionID]
		b.mu.Unlock()
		if p != nil {
			p.event(m.Method, m.Params)
		}
	}
}

// call sends a command (to a page's session when sessionID is set) and waits for its result.
func (b *Browser) call(ctx context.Context, sessionID, method string, params, out any) error {
	id := b.nextID.Add(1)
	ch := make(chan reply, 1)
	b.mu.Lock()
	if b.closed || b.readErr != nil {
		b.mu.Unlock()
		return errors.New("cdp: browser connection is closed")
	}
	b.pending[id] = ch
	b.mu.Unlock()
	msg := map[string]any{"id": id, "method": method}
	if params != nil {
		msg["params"] = params
	}
	if sessionID != "" {
		msg["sessionId"] = sessionID
	}
	b.wmu.Lock()
	err := b.ws.WriteJSON(msg)
	b.wmu.Unlock()
	if err != nil {
		b.mu.Lock()
		delete(b.pending, id)
		b.mu.Unlock()
		return err
	}
	select {
	case r := <-ch:
		if r.Err != nil {
			return fmt.Errorf("%s: %w", method, r.Err)
		}
		if out != nil {
			return json.Unmarshal(r.Result, out)
		}
		return nil
	case <-ctx.Done():
		b.mu.Lock()
		delete(b.pending, id)
		b.mu.Unlock()
		return fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

// NewPage opens a blank tab and attaches to it.
func (b *Browser) NewPage(ctx context.Context) (*Page, error) {
	var t struct {
		TargetID string `json:"targetId"`
	}
	if err := b.call(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank"}, &t); err != nil {
		return nil, err
	}
	var a struct {
		SessionID string `json:"sessionId"`
	}
	if err := b.call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": t.TargetID, "flatten": true}, &a); err != nil {
		return nil, err
	}
	p := &Page{b: b, session: a.SessionID, target: t.TargetID}
	b.mu.Lock()
	b.pages[a.SessionID] = p
	b.mu.Unlock()
	for _, m := range []string{"Runtime.enable", "Page.enable"} {
		if err := p.call(ctx, m, nil, nil); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Close closes the browser (asking nicely, then killing it) and removes its profile.
func (b *Browser) Close() {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	_ = b.call(ctx, "", "Browser.close", nil, nil)
	cancel()
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	select {
	case <-b.procDone:
	case <-time.After(5 * time.Second):
		_ = b.cmd.Process.Kill()
		<-b.procDone
	}
	b.ws.Close()
	<-b.done
	b.cleanup()
}

func (b *Browser) kill() {
	_ = b.cmd.Process.Kill()
	<-b.procDone
	b.cleanup()
}

func (b *Browser) cleanup() { os.RemoveAll(b.dir) }

// Page is one tab.
type Page struct {
	b       *Browser
	session string
	target  string
	mu      sync.Mutex
	logs    []string
	loads   int
}

func (p *Page) call(ctx context.Context, method string, params, out any) error {
	return p.b.call(ctx, p.session, method, params, out)
}

func (p *Page) event(method string, params json.RawMessage) {
	switch method {
	case "Runtime.consoleAPICalled":
		var e struct {
			Type string `json:"type"`
			Args []struct {
				Value       any    `json:"value"`
				Description string `json:"description"`
			} `json:"args"`
		}
		if json.Unmarshal(params, &e) == nil {
			var parts []string
			for _, a := range e.Args {
				if a.Value != nil {
					parts = append(parts, fmt.Sprint(a.Value))
				} else {
					parts = append(parts, a.Description)
				}
			}
			p.log("console." + e.Type + ": " + strings.Join(parts, " "))
		}
	case "Runtime.exceptionThrown":
		var e struct {
			ExceptionDetails struct {
				Text      string `json:"text"`
				Exception struct {
					Description string `json:"description"`
				} `json:"exception"`
			} `json:"exceptionDetails"`
		}
		if json.Unmarshal(params, &e) == nil {
			p.log("exception: " + e.ExceptionDetails.Text + " " + e.ExceptionDetails.Exception.Description)
		}
	case "Page.loadEventFired":
		p.mu.Lock()
		p.loads++
		p.mu.Unlock()
	}
}

func (p *Page) log(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.logs) < 500 {
		p.logs = append(p.logs, s)
	}
}

// Logs returns the page's console output and uncaught exceptions.
func (p *Page) Logs() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.logs...)
}

// Navigate loads url and waits for its load event.
func (p *Page) Navigate(ctx context.Context, url string) error {
	p.mu.Lock()
	before := p.loads
	p.mu.Unlock()
	var r struct {
		ErrorText string `json:"errorText"`
	}
	if err := p.call(ctx, "Page.navigate", map[string]any{"url": url}, &r); err != nil {
		return err
	}
	if r.ErrorText != "" {
		return fmt.Errorf("navigate %s: %s", url, r.ErrorText)
	}
	for {
		p.mu.Lock()
		n := p.loads
		p.mu.Unlock()
		if n > before {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("navigate %s: %w", url, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Eval evaluates expr in the page as if the user had acted (so media may play), awaits it when
// it is a promise, and decodes its JSON value into out (which may be nil).
func (p *Page) Eval(ctx context.Context, expr string, out any) error {
	var r struct {
		Result struct {
			Type        string          `json:"type"`
			Value       json.RawMessage `json:"value"`
			Description string          `json:"description"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	err := p.call(ctx, "Runtime.evaluate", map[string]any{
		"expression": expr, "awaitPromise": true, "returnByValue": true, "userGesture": true,
	}, &r)
	if err != nil {
		return err
	}
	if r.ExceptionDetails != nil {
		return fmt.Errorf("javascript: %s %s", r.ExceptionDetails.Text, r.ExceptionDetails.Exception.Description)
	}
	if out != nil && len(r.Result.Value) > 0 {
		return json.Unmarshal(r.Result.Value, out)
	}
	return nil
}

// tail keeps the last lines of a log.
type tail struct {
	mu    sync.Mutex
	lines []string
}

func (t *tail) add(s string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, s)
	if len(t.lines) > 200 {
		t.lines = t.lines[len(t.lines)-200:]
	}
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, "\n")
}
