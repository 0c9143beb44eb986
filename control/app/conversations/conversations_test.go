package conversations_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/app"
	"github.com/parley-voice/parley/control/app/conversations"
	"github.com/parley-voice/parley/control/fault"
	"github.com/parley-voice/parley/control/runtime"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/session"
)

// fakeRuntime stands in for the runtime: it ends conversations in the store and takes
// commands, or fails with the errors it is given.
type fakeRuntime struct {
	st     *store.Store
	endErr error
	cmdErr error

	mu    sync.Mutex
	ended []store.ConversationID
	cmds  []store.Command
}

func (f *fakeRuntime) End(ctx context.Context, id store.ConversationID, reason session.EndReason, ifIdle bool) error {
	if f.endErr != nil {
		return f.endErr
	}
	f.mu.Lock()
	f.ended = append(f.ended, id)
	f.mu.Unlock()
	_, err := f.st.EndConversation(ctx, id, store.ConversationEnd{Reason: string(reason), At: time.Now()})
	return err
}

func (f *fakeRuntime) Watch(store.ConversationID) (<-chan struct{}, func()) { return nil, func() {} }

func (f *fakeRuntime) Command(ctx context.Context, cmd store.Command) error {
	f.mu.Lock()
	f.cmds = append(f.cmds, cmd)
	f.mu.Unlock()
	return f.cmdErr
}

func (f *fakeRuntime) Listen(ctx context.Context, id store.ConversationID, mode string) (runtime.Listener, error) {
	return runtime.Listener{URL: "https://parley.test/listen/x", Token: "tok", Mode: mode, ExpiresAt: time.Now().Add(15 * time.Minute)}, nil
}

// world is an organization with two projects, a live and a test key reaching both, a key
// reaching only the second, and the service over a SQLite store.
type world struct {
	st                *store.Store
	org               store.Org
	p1, p2            store.Project
	live, test, only2 app.Actor
	rt                *fakeRuntime
	svc               *conversations.Service
}

func newWorld(t *testing.T) *world {
	t.Helper()
	ctx := t.Context()
	dir := t.TempDir()
	st, err := store.Open(ctx, store.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	w := &world{st: st}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	w.org, err = st.CreateOrg(ctx, "Acme")
	must(err)
	w.p1, err = st.CreateProject(ctx, w.org.ID, "One")
	must(err)
	w.p2, err = st.CreateProject(ctx, w.org.ID, "Two")
	must(err)
	key := func(test bool, projects ...store.ProjectID) app.Actor {
		k, _, err := st.CreateKey(ctx, store.NewKey{OrgID: w.org.ID, Name: "k", Test: test, Scopes: []string{"*"}, AllProjects: len(projects) == 0, ProjectIDs: projects})
		must(err)
		return app.KeyActor(k, w.org, "req_1")
	}
	w.live, w.test, w.only2 = key(false), key(true), key(false, w.p2.ID)
	w.rt = &fakeRuntime{st: st}
	w.svc = &conversations.Service{Store: st, Runtime: w.rt, DataDir: dir}
	return w
}

// conv stores a conversation of p in channel and mode, moved to status.
func (w *world) conv(t *testing.T, p store.ProjectID, channel string, mode store.Mode, status string) store.Conversation {
	t.Helper()
	ctx := t.Context()
	c := store.Conversation{OrgID: w.org.ID, ProjectID: p, AgentID: "0190a6f0-0000-7000-8000-0000000000aa", Channel: channel,
		Direction: "outbound", Mode: mode, Language: "en", ToNumber: "+14155550100"}
	if channel == store.ChannelChat {
		c.Status = store.ConvInProgress
	}
	c, err := w.st.CreateConversation(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	switch status {
	case store.ConvInProgress:
		if _, err := w.st.SetConversationStatus(ctx, c.ID, store.ConvInProgress, time.Now()); err != nil {
			t.Fatal(err)
		}
	case store.ConvEnded:
		if _, err := w.st.EndConversation(ctx, c.ID, store.ConversationEnd{Reason: "completed", At: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	c, err = w.st.GetConversation(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// wantCode fails unless err is the classified error of code.
func wantCode(t *testing.T, what string, err error, code string) {
	t.Helper()
	var fe *fault.Error
	if !errors.As(err, &fe) || fe.Code != code {
		t.Fatalf("%s: got %v, want %s", what, err, code)
	}
}

func TestReach(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	c := w.conv(t, w.p1.ID, store.ChannelPhone, store.ModeLive, store.ConvEnded)
	if got, err := w.svc.Get(ctx, w.live, string(c.ID), conversations.Include{Transcript: true, Cost: true}); err != nil ||
		got.ID != string(c.ID) || got.Transcript == nil || got.Cost == nil {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	for name, act := range map[string]app.Actor{"other mode": w.test, "other project": w.only2} {
		_, err := w.svc.Get(ctx, act, string(c.ID), conversations.Include{})
		wantCode(t, "Get "+name, err, fault.CodeConversationNotFound)
		_, err = w.svc.Transcript(ctx, act, string(c.ID))
		wantCode(t, "Transcript "+name, err, fault.CodeConversationNotFound)
		_, err = w.svc.Delete(ctx, act, string(c.ID))
		wantCode(t, "Delete "+name, err, fault.CodeConversationNotFound)
		_, err = w.svc.Note(ctx, act, string(c.ID), conversations.NoteCreate{Text: "n"})
		wantCode(t, "Note "+name, err, fault.CodeConversationNotFound)
	}
	_, err := w.svc.Get(ctx, w.live, "not-an-id", conversations.Include{})
	wantCode(t, "Get a malformed id", err, fault.CodeConversationNotFound)
	if cs, err := w.svc.List(ctx, w.test, conversations.Filter{}, store.Page{}); err != nil || len(cs) != 0 {
		t.Fatalf("List with the other mode = %v, %v", cs, err)
	}
	_, err = w.svc.List(ctx, w.only2, conversations.Filter{ProjectID: string(w.p1.ID)}, store.Page{})
	wantCode(t, "List of a project out of reach", err, fault.CodeProjectNotFound)
}

func TestDelete(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	call := w.conv(t, w.p1.ID, store.ChannelPhone, store.ModeLive, store.ConvInProgress)
	_, err := w.svc.Delete(ctx, w.live, string(call.ID))
	wantCode(t, "a call in progress", err, fault.CodeCallInProgress)

	// An ended call: its recording leaves the disk; the event and the audit are recorded.
	ended := w.conv(t, w.p1.ID, store.ChannelPhone, store.ModeLive, store.ConvEnded)
	rel := "recordings/" + string(ended.ID) + ".wav"
	path := filepath.Join(w.svc.DataDir, rel)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("RIFF"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := w.st.SetConversationRecording(ctx, ended.ID, rel); err != nil {
		t.Fatal(err)
	}
	rec, err := w.svc.Recording(ctx, w.live, string(ended.ID))
	if err != nil || rec.Size != 4 || rec.ContentType != "audio/wav" || rec.Name != string(ended.ID)+".wav" {
		t.Fatalf("Recording = %+v, %v", rec, err)
	}
	rec.File.Close()
	got, err := w.svc.Delete(ctx, w.live, string(ended.ID))
	if err != nil || !got.Deleted || got.ID != string(ended.ID) {
		t.Fatalf("Delete = %+v, %v", got, err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the recording is still on disk: %v", err)
	}
	_, err = w.svc.Delete(ctx, w.live, string(ended.ID))
	wantCode(t, "delete twice", err, fault.CodeConversationNotFound)
	_, err = w.svc.Get(ctx, w.live, string(ended.ID), conversations.Include{})
	wantCode(t, "get deleted", err, fault.CodeConversationNotFound)
	del, err := w.svc.ListDeleted(ctx, w.live, conversations.Filter{}, store.Page{})
	if err != nil || len(del) != 1 || del[0].ID != string(ended.ID) {
		t.Fatalf("ListDeleted = %+v, %v", del, err)
	}
	evs, err := w.st.ListEvents(ctx, w.org.ID, store.ModeLive, "", 10)
	if err != nil || len(evs) != 1 || evs[0].Type != "conversation.deleted" {
		t.Fatalf("events = %+v, %v", evs, err)
	}
	au, err := w.st.ListAudit(ctx, store.AuditFilter{OrgID: w.org.ID, Actions: []string{"conversation.deleted"}})
	if err != nil || len(au) != 1 || au[0].ObjectID != string(ended.ID) {
		t.Fatalf("audit = %+v, %v", au, err)
	}

	// An open chat is closed (charged by the runtime), then deleted; while its agent answers, 409.
	chat := w.conv(t, w.p1.ID, store.ChannelChat, store.ModeLive, "")
	w.rt.endErr = runtime.ErrBusy
	_, err = w.svc.Delete(ctx, w.live, string(chat.ID))
	wantCode(t, "a busy chat", err, fault.CodeAgentBusy)
	w.rt.endErr = nil
	if _, err := w.svc.Delete(ctx, w.live, string(chat.ID)); err != nil {
		t.Fatalf("Delete an open chat: %v", err)
	}
	if len(w.rt.ended) != 1 || w.rt.ended[0] != chat.ID {
		t.Fatalf("ended by the runtime: %v", w.rt.ended)
	}
	noRuntime := *w.svc
	noRuntime.Runtime = nil
	other := w.conv(t, w.p1.ID, store.ChannelChat, store.ModeLive, "")
	_, err = noRuntime.Delete(ctx, w.live, string(other.ID))
	wantCode(t, "an open chat without a runtime", err, fault.CodeCallInProgress)
}

func TestSteer(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	live := w.conv(t, w.p1.ID, store.ChannelPhone, store.ModeLive, store.ConvInProgress)
	cmd, err := w.svc.Say(ctx, w.live, string(live.ID), conversations.SayCreate{Text: "Hello"})
	if err != nil || cmd.Kind != store.CommandSay || cmd.Status != store.CommandPending || string(cmd.Params) != `{"text":"Hello"}` {
		t.Fatalf("Say = %+v, %v", cmd, err)
	}
	if got, err := w.svc.Command(ctx, w.live, string(live.ID), cmd.ID); err != nil || got.ID != cmd.ID {
		t.Fatalf("Command = %+v, %v", got, err)
	}
	other := w.conv(t, w.p1.ID, store.ChannelPhone, store.ModeLive, store.ConvInProgress)
	_, err = w.svc.Command(ctx, w.live, string(other.ID), cmd.ID)
	wantCode(t, "the command of another conversation", err, fault.CodeCommandNotFound)
	_, err = w.svc.Command(ctx, w.test, string(live.ID), cmd.ID)
	wantCode(t, "the command with the other mode", err, fault.CodeConversationNotFound)

	tr, err := w.svc.Transfer(ctx, w.live, string(live.ID), conversations.TransferCreate{Destination: "sip:desk@pbx.example.com"})
	if err != nil || string(tr.Params) != `{"destination":"sip:desk@pbx.example.com","mode":"cold"}` {
		t.Fatalf("Transfer = %+v, %v", tr, err)
	}
	_, err = w.svc.Transfer(ctx, w.live, string(live.ID), conversations.TransferCreate{Destination: "desk"})
	wantCode(t, "a bad destination", err, fault.CodeValidationFailed)
	chat := w.conv(t, w.p1.ID, store.ChannelChat, store.ModeLive, "")
	_, err = w.svc.Transfer(ctx, w.live, string(chat.ID), conversations.TransferCreate{Destination: "+14155550100"})
	wantCode(t, "transfer a chat", err, fault.CodeNotTransferable)
	pending := w.conv(t, w.p1.ID, store.ChannelPhone, store.ModeLive, "")
	_, err = w.svc.Note(ctx, w.live, string(pending.ID), conversations.NoteCreate{Text: "n"})
	wantCode(t, "a call not answered", err, fault.CodeConversationNotLive)

	// No node runs it: an end command ends it in the store and is done; another fails.
	w.rt.cmdErr = runtime.ErrNotLive
	_, err = w.svc.Say(ctx, w.live, string(other.ID), conversations.SayCreate{Text: "x"})
	wantCode(t, "say to a lost call", err, fault.CodeConversationNotLive)
	end, err := w.svc.End(ctx, w.live, string(other.ID))
	if err != nil || end.Status != store.CommandDone {
		t.Fatalf("End a lost call = %+v, %v", end, err)
	}
	_, err = w.svc.End(ctx, w.live, string(other.ID))
	wantCode(t, "end an ended call", err, fault.CodeConversationEnded)

	noRuntime := *w.svc
	noRuntime.Runtime = nil
	_, err = noRuntime.Note(ctx, w.live, string(live.ID), conversations.NoteCreate{Text: "n"})
	wantCode(t, "without a runtime", err, fault.CodeConversationNotLive)

	au, err := w.st.ListAudit(ctx, store.AuditFilter{OrgID: w.org.ID, Actions: []string{"conversation.say", "conversation.transfer", "conversation.end"}})
	if err != nil || len(au) != 4 {
		t.Fatalf("audit = %d events, %v; want 4", len(au), err)
	}
}

func TestListen(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	live := w.conv(t, w.p1.ID, store.ChannelPhone, store.ModeLive, store.ConvInProgress)
	li, err := w.svc.Listen(ctx, w.live, string(live.ID), conversations.ListenCreate{})
	if err != nil || li.Mode != "listen" || li.ConversationID != string(live.ID) {
		t.Fatalf("Listen = %+v, %v", li, err)
	}
	test := w.conv(t, w.p1.ID, store.ChannelPhone, store.ModeTest, store.ConvInProgress)
	_, err = w.svc.Listen(ctx, w.test, string(test.ID), conversations.ListenCreate{Mode: "takeover"})
	wantCode(t, "a test call", err, fault.CodeNoAudio)
}

func TestLive(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	c := w.conv(t, w.p1.ID, store.ChannelPhone, store.ModeLive, store.ConvInProgress)
	start := time.Now()
	v, err := w.svc.Live(ctx, w.live, string(c.ID), 0, 50*time.Millisecond)
	if err != nil || len(v.Lines) != 0 || v.Ended || v.NextAfter != 0 {
		t.Fatalf("Live with no line = %+v, %v", v, err)
	}
	if time.Since(start) < 50*time.Millisecond {
		t.Fatal("Live answered before wait ran out")
	}
	now := time.Now()
	lines := make([]store.ConversationLine, conversations.LiveMaxLines+1)
	for i := range lines {
		lines[i] = store.ConversationLine{Seq: int64(i + 1), Role: "user", Text: "x", Start: now, End: now}
	}
	if err := w.st.AppendLines(ctx, c.ID, lines); err != nil {
		t.Fatal(err)
	}
	if _, err := w.st.EndConversation(ctx, c.ID, store.ConversationEnd{Reason: "completed", At: now}); err != nil {
		t.Fatal(err)
	}
	v, err = w.svc.Live(ctx, w.live, string(c.ID), 0, time.Second)
	if err != nil || len(v.Lines) != conversations.LiveMaxLines || v.Ended || v.NextAfter != conversations.LiveMaxLines {
		t.Fatalf("first page = %d lines, ended %v, next %d, %v", len(v.Lines), v.Ended, v.NextAfter, err)
	}
	v, err = w.svc.Live(ctx, w.live, string(c.ID), v.NextAfter, time.Second)
	if err != nil || len(v.Lines) != 1 || !v.Ended {
		t.Fatalf("last page = %d lines, ended %v, %v", len(v.Lines), v.Ended, err)
	}
	chat := w.conv(t, w.p1.ID, store.ChannelChat, store.ModeLive, "")
	_, err = w.svc.Live(ctx, w.live, string(chat.ID), 0, 0)
	wantCode(t, "a chat", err, fault.CodeNoLiveTranscript)
}

// TestAnyCase finds conversations, commands, projects and agents by ids in any case, as the
// API takes them.
func TestAnyCase(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	c := w.conv(t, w.p1.ID, store.ChannelPhone, store.ModeLive, store.ConvInProgress)
	up := strings.ToUpper(string(c.ID))
	if got, err := w.svc.Get(ctx, w.live, up, conversations.Include{}); err != nil || got.ID != string(c.ID) {
		t.Fatalf("Get %s = %+v, %v", up, got, err)
	}
	cmd, err := w.svc.Note(ctx, w.live, up, conversations.NoteCreate{Text: "n"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.svc.Command(ctx, w.live, up, strings.ToUpper(cmd.ID)); err != nil {
		t.Fatalf("Command in upper case: %v", err)
	}
	f := conversations.Filter{ProjectID: strings.ToUpper(string(w.p1.ID)), AgentID: strings.ToUpper(string(c.AgentID))}
	if cs, err := w.svc.List(ctx, w.live, f, store.Page{}); err != nil || len(cs) != 1 {
		t.Fatalf("List in upper case = %v, %v", cs, err)
	}
}
