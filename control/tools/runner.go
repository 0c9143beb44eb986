package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	apptools "github.com/parley-voice/parley/control/app/tools"
	"github.com/parley-voice/parley/control/app/vault"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/internal/netguard"
	"github.com/parley-voice/parley/session"
)

// Source makes the tools of conversations from their agents' references.tools, and records
// their calls. One Source serves a node.
type Source struct {
	Store *store.Store
	Vault *vault.Service
	Guard *netguard.Guard
	MCP   *MCP
	Log   *slog.Logger

	once   sync.Once
	rec    chan store.ToolCall
	stop   chan struct{}
	wg     sync.WaitGroup
	closed sync.Once
}

func (s *Source) log() *slog.Logger {
	if s.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Log
}

// start runs the recorder: calls are written in the background, in order, so recording adds
// nothing to a call's time; a full queue drops the record with a warning rather than wait.
func (s *Source) start() {
	s.once.Do(func() {
		s.rec = make(chan store.ToolCall, 1024)
		s.stop = make(chan struct{})
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			for {
				select {
				case c := <-s.rec:
					s.write(c)
				case <-s.stop:
					for {
						select {
						case c := <-s.rec:
							s.write(c)
						default:
							return
						}
					}
				}
			}
		}()
	})
}

func (s *Source) write(c store.ToolCall) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Store.InsertToolCall(ctx, c); err != nil {
		s.log().Warn("tools: record a tool call", "conversation", c.ConversationID, "tool", c.ToolName, "err", err)
	}
}

func (s *Source) record(c store.ToolCall) {
	s.start()
	select {
	case s.rec <- c:
	default:
		s.log().Warn("tools: the call record queue is full; a record is dropped", "conversation", c.ConversationID, "tool", c.ToolName)
	}
}

// Close writes the records still queued. Safe to call twice.
func (s *Source) Close() {
	s.closed.Do(func() {
		s.start()
		close(s.stop)
		s.wg.Wait()
	})
}

// Tools returns the tool declarations and the runner of a conversation: the HTTP tools and MCP
// tools that names (the definition's references.tools) resolve to in the conversation's
// project. It reads stored tool lists only; it never reaches an MCP server.
func (s *Source) Tools(ctx context.Context, c store.Conversation, names []string) ([]session.ToolSpec, session.ToolRunner, error) {
	if len(names) == 0 {
		return nil, nil, nil
	}
	res, err := apptools.Resolve(ctx, s.Store.Queries, c.OrgID, c.ProjectID, names)
	if err != nil {
		return nil, nil, err
	}
	vars := map[string]any{}
	if len(c.Variables) > 0 {
		_ = json.Unmarshal(c.Variables, &vars)
	}
	r := &Runner{src: s, conv: c, vars: vars, byName: map[string]*entry{}, test: c.Mode == store.ModeTest}
	var specs []session.ToolSpec
	for _, t := range res.Tools {
		sp, err := apptools.ParseSpec(t)
		if err != nil {
			s.log().Warn("tools: a stored tool cannot be read", "tool", t.ID, "err", err)
			continue
		}
		h, err := compileHTTP(sp)
		if err != nil {
			s.log().Warn("tools: a stored tool cannot be compiled", "tool", t.ID, "err", err)
			continue
		}
		timeout := time.Duration(sp.TimeoutMS) * time.Millisecond
		e := &entry{kind: "http", name: t.Name, http: h, secret: t.SecretID, timeout: timeout, testSafe: sp.TestSafe, mock: sp.MockResult}
		r.byName[t.Name] = e
		specs = append(specs, session.ToolSpec{Name: t.Name, Description: sp.Description, Parameters: sp.Parameters,
			Timeout: timeout, Filler: sp.Filler, SpeakResult: sp.ResultMode == "speak", Apology: sp.Apology})
	}
	taken := map[string]int{}
	for _, m := range res.MCP {
		taken[m.Tool.Name]++
	}
	for _, m := range res.MCP {
		name := m.Tool.Name
		if _, clash := r.byName[name]; clash || taken[name] > 1 || !store.ToolNamePattern.MatchString(name) {
			name = m.Server.Name + "__" + m.Tool.Name
			if len(name) > 64 || !store.ToolNamePattern.MatchString(name) {
				continue
			}
		}
		if _, clash := r.byName[name]; clash {
			continue
		}
		timeout := time.Duration(m.Spec.TimeoutMS) * time.Millisecond
		srv, spec := m.Server, m.Spec
		r.byName[name] = &entry{kind: "mcp", name: name, server: &srv, serverSpec: spec, mcpTool: m.Tool.Name, secret: m.Server.SecretID,
			timeout: timeout, testSafe: spec.TestSafe, mock: apptools.DefaultMock}
		specs = append(specs, session.ToolSpec{Name: name, Description: m.Tool.Description, Parameters: m.Tool.InputSchema, Timeout: timeout,
			SpeakResult: spec.ResultMode == "speak"})
	}
	if len(specs) == 0 {
		return nil, nil, nil
	}
	return specs, r, nil
}

// entry is one tool of a conversation.
type entry struct {
	kind     string // http or mcp
	name     string
	http     *httpTool
	secret   store.SecretID
	timeout  time.Duration
	testSafe bool
	mock     json.RawMessage

	server     *store.MCPServer
	serverSpec apptools.ServerSpec
	mcpTool    string

	credOnce sync.Once
	cred     *vault.Credential
	credErr  error
}

// Runner runs the tools of one conversation (session.ToolRunner).
type Runner struct {
	src    *Source
	conv   store.Conversation
	vars   map[string]any
	byName map[string]*entry
	test   bool
}

// credential opens the tool's secret once per conversation.
func (r *Runner) credential(ctx context.Context, e *entry) (*vault.Credential, error) {
	if e.secret == "" {
		return nil, nil
	}
	e.credOnce.Do(func() {
		if r.src.Vault == nil {
			e.credErr = errors.New("no vault")
			return
		}
		c, err := r.src.Vault.Resolve(ctx, store.Scope{Org: r.conv.OrgID, Projects: []store.ProjectID{r.conv.ProjectID}}, e.secret)
		if err != nil {
			e.credErr = errors.New("its credential cannot be opened")
			r.src.log().Warn("tools: open a tool's secret", "tool", e.name, "err", err)
			return
		}
		e.cred = &c
	})
	return e.cred, e.credErr
}

// Call runs the tool called name with args (session.ToolRunner). A test-key conversation gets
// the tool's mock result unless the tool is test-safe.
func (r *Runner) Call(ctx context.Context, name string, args json.RawMessage) (string, error) {
	e := r.byName[name]
	if e == nil {
		return "", fmt.Errorf("unknown tool %s", name)
	}
	start := time.Now()
	var res string
	var err error
	status := "ok"
	var cred *vault.Credential
	switch {
	case r.test && !e.testSafe:
		res, status = string(e.mock), "mock"
	default:
		if e.timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, e.timeout)
			defer cancel()
		}
		cred, err = r.credential(ctx, e)
		if err == nil {
			res, err = r.call(ctx, e, args, cred)
		}
	}
	if err != nil {
		switch {
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			status = "timeout"
		case ctx.Err() != nil:
			status = "cancelled"
		default:
			status = "error"
		}
	}
	recArgs := args
	errText := ""
	if err != nil {
		errText = err.Error()
	}
	if cred != nil {
		recArgs = json.RawMessage(cred.Redact(string(args)))
		errText = cred.Redact(errText)
	}
	r.src.record(store.ToolCall{OrgID: r.conv.OrgID, ConversationID: r.conv.ID, ToolName: name, Kind: e.kind, Arguments: recArgs,
		Status: status, Duration: time.Since(start), ResultBytes: len(res), Error: errText, At: start})
	if err != nil {
		return "", errors.New(errText)
	}
	return res, nil
}

func (r *Runner) call(ctx context.Context, e *entry, args json.RawMessage, cred *vault.Credential) (string, error) {
	if e.kind == "mcp" {
		if r.src.MCP == nil {
			return "", errors.New("this node has no MCP client")
		}
		return r.src.MCP.Call(ctx, *e.server, e.serverSpec, cred, e.mcpTool, args)
	}
	v := values{vars: r.vars, args: map[string]any{}}
	if len(args) > 0 {
		d := json.NewDecoder(strings.NewReader(string(args)))
		d.UseNumber()
		if err := d.Decode(&v.args); err != nil {
			return "", errors.New("the arguments are not a JSON object")
		}
	}
	req, err := e.http.request(ctx, v, cred)
	if err != nil {
		return "", err
	}
	return e.http.do(r.src.client(), req, cred)
}

var clientOnce sync.Map // *netguard.Guard → *http.Client

// client is the guarded client (no redirects; each call's context bounds it).
func (s *Source) client() *http.Client {
	if c, ok := clientOnce.Load(s.Guard); ok {
		return c.(*http.Client)
	}
	c := s.Guard.Client(0)
	clientOnce.Store(s.Guard, c)
	return c
}
