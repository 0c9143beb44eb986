package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/parley-voice/parley/control/fault"

	"github.com/parley-voice/parley/control/runtime"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/session"
)

// Live transcript limits (documented on getLiveTranscript).
const (
	liveMaxWait   = 30 // seconds
	liveMaxLines  = 100
	liveRetention = 24 * time.Hour
)

// conversationView is the Conversation object; Transcript and Cost are set only in the
// ConversationWithTranscript answer of getConversation (and createChat).
type conversationView struct {
	Object          string          `json:"object"`
	ID              string          `json:"id"`
	ProjectID       string          `json:"project_id"`
	AgentID         string          `json:"agent_id"`
	AgentVersion    *int            `json:"agent_version"`
	Channel         string          `json:"channel"`
	Direction       string          `json:"direction"`
	Mode            string          `json:"mode"`
	Status          string          `json:"status"`
	EndReason       *string         `json:"end_reason"`
	ExternalID      *string         `json:"external_id"`
	Language        string          `json:"language"`
	FromNumber      *string         `json:"from_number"`
	ToNumber        *string         `json:"to_number"`
	PhoneNumberID   *string         `json:"phone_number_id"`
	Metadata        json.RawMessage `json:"metadata"`
	Variables       json.RawMessage `json:"variables"`
	CreatedAt       time.Time       `json:"created_at"`
	RingingAt       *time.Time      `json:"ringing_at"`
	StartedAt       *time.Time      `json:"started_at"`
	EndedAt         *time.Time      `json:"ended_at"`
	DurationSeconds *float64        `json:"duration_seconds"`
	Turns           []turnView      `json:"turns"`
	HasRecording    bool            `json:"has_recording"`
	Transcript      *[]lineView     `json:"transcript,omitempty"`
	Cost            *costView       `json:"cost,omitempty"`
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func viewConversation(c store.Conversation) conversationView {
	v := conversationView{Object: "conversation", ID: string(c.ID), ProjectID: string(c.ProjectID), AgentID: string(c.AgentID),
		Channel: c.Channel, Direction: c.Direction, Mode: string(c.Mode), Status: c.Status, EndReason: strPtr(c.EndReason),
		ExternalID: strPtr(c.ExternalID), Language: c.Language, FromNumber: strPtr(c.FromNumber), ToNumber: strPtr(c.ToNumber),
		PhoneNumberID: strPtr(string(c.PhoneNumberID)), Metadata: orEmpty(c.Metadata), Variables: orEmpty(c.Variables),
		CreatedAt: c.CreatedAt, RingingAt: c.RingingAt, StartedAt: c.StartedAt, EndedAt: c.EndedAt,
		Turns: viewTurns(c.Turns), HasRecording: c.Recording != ""}
	if c.AgentVersion > 0 {
		n := c.AgentVersion
		v.AgentVersion = &n
	}
	if c.StartedAt != nil && c.EndedAt != nil {
		d := c.EndedAt.Sub(*c.StartedAt).Seconds()
		v.DurationSeconds = &d
	}
	return v
}

func orEmpty(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("{}")
	}
	return raw
}

// turnView is the TurnMetrics object: when each stage of a voice turn happened, and the
// latencies between them in milliseconds.
type turnView struct {
	Turn            int         `json:"turn"`
	Endpointing     string      `json:"endpointing"`
	Interrupted     bool        `json:"interrupted"`
	SpeechEnd       *time.Time  `json:"speech_end"`
	STTFinal        *time.Time  `json:"stt_final"`
	EndOfTurn       *time.Time  `json:"end_of_turn"`
	LLMRequestSent  *time.Time  `json:"llm_request_sent"`
	LLMFirstToken   *time.Time  `json:"llm_first_token"`
	TTSFirstRequest *time.Time  `json:"tts_first_request"`
	TTSFirstByte    *time.Time  `json:"tts_first_byte"`
	FirstAudioOut   *time.Time  `json:"first_audio_out"`
	LatencyMS       latencyView `json:"latency_ms"`
}

type latencyView struct {
	Endpointing   *float64 `json:"endpointing"`
	LLMFirstToken *float64 `json:"llm_first_token"`
	TTSFirstByte  *float64 `json:"tts_first_byte"`
	Total         *float64 `json:"total"`
	ParleyShare   *float64 `json:"parley_share"`
}

func viewTurns(raw json.RawMessage) []turnView {
	var ms []session.TurnMetrics
	_ = json.Unmarshal(raw, &ms)
	out := make([]turnView, 0, len(ms))
	t := func(x time.Time) *time.Time {
		if x.IsZero() || x.Year() < 2000 {
			return nil
		}
		return &x
	}
	ms2 := func(a, b time.Time) *float64 {
		if d := session.Span(a, b); d > 0 && a.Year() >= 2000 {
			f := float64(d.Microseconds()) / 1000
			return &f
		}
		return nil
	}
	for _, m := range ms {
		v := turnView{Turn: m.Turn, Endpointing: m.Endpointing, Interrupted: m.Interrupted,
			SpeechEnd: t(m.SpeechEnd), STTFinal: t(m.STTFinal), EndOfTurn: t(m.EndOfTurn), LLMRequestSent: t(m.LLMRequestSent),
			LLMFirstToken: t(m.LLMFirstToken), TTSFirstRequest: t(m.TTSFirstRequest), TTSFirstByte: t(m.TTSFirstByte),
			FirstAudioOut: t(m.FirstAudioOut),
			LatencyMS: latencyView{Endpointing: ms2(m.SpeechEnd, m.EndOfTurn), LLMFirstToken: ms2(m.LLMRequestSent, m.LLMFirstToken),
				TTSFirstByte: ms2(m.TTSFirstRequest, m.TTSFirstByte), Total: ms2(m.SpeechEnd, m.FirstAudioOut)}}
		if share := m.ParleyShare(); share > 0 {
			f := float64(share.Microseconds()) / 1000
			v.LatencyMS.ParleyShare = &f
		}
		out = append(out, v)
	}
	return out
}

// costView is the ConversationCost object.
type costView struct {
	Object          string  `json:"object"`
	Currency        string  `json:"currency"`
	TotalMicros     int64   `json:"total_micros"`
	Total           string  `json:"total"`
	Charged         bool    `json:"charged"`
	Final           bool    `json:"final"`
	STTSeconds      float64 `json:"stt_seconds"`
	LLMInputTokens  int     `json:"llm_input_tokens"`
	LLMOutputTokens int     `json:"llm_output_tokens"`
	TTSCharacters   int     `json:"tts_characters"`
	CallSeconds     float64 `json:"call_seconds"`
}

func viewCost(c store.Conversation) *costView {
	var k session.Cost
	_ = json.Unmarshal(c.Cost, &k)
	return &costView{Object: "conversation_cost", Currency: "USD", TotalMicros: c.CostMicros, Total: formatUSD(c.CostMicros),
		Charged: c.Mode == store.ModeLive && c.CostMicros > 0, Final: c.Ended(),
		STTSeconds: k.STTSeconds, LLMInputTokens: k.LLMInputTokens, LLMOutputTokens: k.LLMOutputTokens, TTSCharacters: k.TTSCharacters, CallSeconds: k.CallSeconds}
}

// formatUSD renders micro-dollars as a decimal string with six places.
func formatUSD(micros int64) string {
	sign := ""
	if micros < 0 {
		sign, micros = "-", -micros
	}
	return fmt.Sprintf("%s%d.%06d", sign, micros/1_000_000, micros%1_000_000)
}

// lineView is the TranscriptLine object.
type lineView struct {
	Seq         int64           `json:"seq"`
	Role        string          `json:"role"`
	Text        string          `json:"text"`
	Start       time.Time       `json:"start"`
	End         time.Time       `json:"end"`
	Interrupted bool            `json:"interrupted"`
	Meta        json.RawMessage `json:"meta"`
}

func viewLine(l store.ConversationLine) lineView {
	return lineView{Seq: l.Seq, Role: l.Role, Text: l.Text, Start: l.Start, End: l.End, Interrupted: l.Interrupted, Meta: orEmpty(l.Meta)}
}

func viewLines(ls []store.ConversationLine) []lineView {
	out := make([]lineView, len(ls))
	for i, l := range ls {
		out[i] = viewLine(l)
	}
	return out
}

// viewSessionLine is the TranscriptLine of a line the engine has just made.
func viewSessionLine(l session.Line) lineView {
	meta := json.RawMessage("{}")
	if len(l.Meta) > 0 {
		if b, err := json.Marshal(l.Meta); err == nil {
			meta = b
		}
	}
	end := l.End
	if end.Before(l.Start) {
		end = l.Start
	}
	return lineView{Seq: l.Seq, Role: string(l.Role), Text: l.Text, Start: l.Start.UTC(), End: end.UTC(), Interrupted: l.Interrupted, Meta: meta}
}

// errConversationNotFound is the 404 of a conversation the key does not reach.
func errConversationNotFound(id string) error {
	return fault.E(fault.CodeConversationNotFound, "No conversation %s is reachable with this key.", quoteID(id))
}

// reachableConversation returns the conversation at the path parameter conversation_id if the
// key reaches it: same organization, a project in reach, the key's own mode, not deleted.
func reachableConversation(r *http.Request, q *store.Queries) (store.Conversation, error) {
	raw := pathParam(r, "conversation_id")
	p := PrincipalFrom(r.Context())
	id, err := store.ParseID[store.ConversationID](raw)
	if err != nil {
		return store.Conversation{}, errConversationNotFound(raw)
	}
	c, err := q.GetConversation(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) || err == nil && (c.OrgID != p.Org.ID || !p.Key.Reaches(c.ProjectID) || c.Mode != p.Key.Mode || c.Deleted()) {
		return store.Conversation{}, errConversationNotFound(raw)
	}
	return c, err
}

func (a *API) listConversations(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	c := callFrom(ctx)
	pg, err := pageOf(c)
	if err != nil {
		return err
	}
	f := store.ConversationFilter{OrgID: c.p.Org.ID, Mode: c.p.Key.Mode, ProjectIDs: reach(c.p), Status: c.query["status"],
		Channel: c.query["channel"], Direction: c.query["direction"], ExternalID: c.query["external_id"], Limit: pg.limit + 1}
	if err := a.projectFilter(r, c, &f.ProjectIDs); err != nil {
		return err
	}
	if raw, ok := c.query["agent_id"]; ok {
		f.AgentID, _ = store.ParseID[store.AgentID](raw)
	}
	for name, dst := range map[string]**time.Time{"created_after": &f.CreatedAfter, "created_before": &f.CreatedBefore} {
		if raw, ok := c.query[name]; ok {
			t, _ := time.Parse(time.RFC3339Nano, raw) // checked by checkQuery
			*dst = &t
		}
	}
	if pg.after != "" {
		if f.BeforeID, err = store.ParseID[store.ConversationID](pg.after); err != nil {
			return fault.E(fault.CodeInvalidCursor, "The cursor is not one this list gave out.")
		}
	}
	cs, err := a.Store.ListConversations(ctx, f)
	if err != nil {
		return err
	}
	views := make([]conversationView, len(cs))
	for i, cv := range cs {
		views[i] = viewConversation(cv)
	}
	respond(w, http.StatusOK, makeList(pg, views, func(v conversationView) string { return v.ID }))
	return nil
}

// projectFilter narrows a list to the project_id query parameter (404 when out of reach).
func (a *API) projectFilter(r *http.Request, c *call, dst *[]store.ProjectID) error {
	raw, ok := c.query["project_id"]
	if !ok {
		return nil
	}
	pr, err := reachableProject(r, a.Store.Queries, raw)
	if err != nil {
		return err
	}
	*dst = []store.ProjectID{pr.ID}
	return nil
}

// deletedView is the DeletedConversation object.
type deletedView struct {
	Object    string    `json:"object"`
	ID        string    `json:"id"`
	ProjectID string    `json:"project_id"`
	AgentID   string    `json:"agent_id"`
	Channel   string    `json:"channel"`
	Direction string    `json:"direction"`
	Mode      string    `json:"mode"`
	CreatedAt time.Time `json:"created_at"`
	DeletedAt time.Time `json:"deleted_at"`
}

func (a *API) listDeletedConversations(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	c := callFrom(ctx)
	pg, err := pageOf(c)
	if err != nil {
		return err
	}
	f := store.ConversationFilter{OrgID: c.p.Org.ID, Mode: c.p.Key.Mode, ProjectIDs: reach(c.p), Deleted: true, Limit: pg.limit + 1}
	if err := a.projectFilter(r, c, &f.ProjectIDs); err != nil {
		return err
	}
	if raw, ok := c.query["agent_id"]; ok {
		f.AgentID, _ = store.ParseID[store.AgentID](raw)
	}
	if pg.after != "" {
		if f.BeforeID, err = store.ParseID[store.ConversationID](pg.after); err != nil {
			return fault.E(fault.CodeInvalidCursor, "The cursor is not one this list gave out.")
		}
	}
	cs, err := a.Store.ListConversations(ctx, f)
	if err != nil {
		return err
	}
	views := make([]deletedView, len(cs))
	for i, cv := range cs {
		views[i] = deletedView{Object: "deleted_conversation", ID: string(cv.ID), ProjectID: string(cv.ProjectID), AgentID: string(cv.AgentID),
			Channel: cv.Channel, Direction: cv.Direction, Mode: string(cv.Mode), CreatedAt: cv.CreatedAt, DeletedAt: *cv.DeletedAt}
	}
	respond(w, http.StatusOK, makeList(pg, views, func(v deletedView) string { return v.ID }))
	return nil
}

func (a *API) getConversation(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	c := callFrom(ctx)
	conv, err := reachableConversation(r, a.Store.Queries)
	if err != nil {
		return err
	}
	var include []string
	if raw, ok := c.query["include"]; ok {
		include = strings.Split(raw, ",")
	}
	for inc, perm := range map[string]string{"transcript": "transcripts:read", "cost": "billing:read"} {
		if slices.Contains(include, inc) && !c.p.Key.HasScope(perm) {
			e := fault.E(fault.CodeMissingPermission, "include=%s needs the permission %s, which this key lacks.", inc, perm)
			e.Extra = map[string]any{"permission": perm}
			return e
		}
	}
	v := viewConversation(conv)
	if slices.Contains(include, "transcript") {
		ls, err := a.Store.AllLines(ctx, conv.ID)
		if err != nil {
			return err
		}
		lv := viewLines(ls)
		v.Transcript = &lv
	}
	if slices.Contains(include, "cost") {
		v.Cost = viewCost(conv)
	}
	respond(w, http.StatusOK, v)
	return nil
}

// deletedAnswer is the Deleted object.
type deletedAnswer struct {
	Object  string `json:"object"`
	ID      string `json:"id"`
	Deleted bool   `json:"deleted"`
}

func (a *API) deleteConversation(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	conv, err := reachableConversation(r, a.Store.Queries)
	if err != nil {
		return err
	}
	if err := writableProject(r, a.Store.Queries, conv.ProjectID); err != nil {
		return err
	}
	if !conv.Ended() {
		if conv.Channel != store.ChannelChat && conv.Channel != store.ChannelWhatsApp {
			return fault.E(fault.CodeCallInProgress, "The call is %s; end it (POST /v1/conversations/%s/end) before deleting it.", strings.ReplaceAll(conv.Status, "_", " "), conv.ID)
		}
		// An open chat is charged for what it used, then deleted.
		if a.Runtime == nil {
			return fault.E(fault.CodeCallInProgress, "The chat is open and this node cannot close it.")
		}
		if err := a.Runtime.End(ctx, conv.ID, session.EndAPI, true); errors.Is(err, runtime.ErrBusy) {
			return fault.E(fault.CodeAgentBusy, "The agent is answering a message in this chat; delete it once the answer has come.")
		} else if err != nil {
			return err
		}
	}
	var files []string
	err = a.change(w, r, func(tx *store.Tx, au *auditor) (int, any, error) {
		files = nil
		before, err := tx.DeleteConversation(ctx, conv.ID, a.now())
		if errors.Is(err, store.ErrConflict) {
			return 0, nil, errConversationNotFound(string(conv.ID)) // deleted by a racing request
		}
		if err != nil {
			return 0, nil, err
		}
		if before.Recording != "" {
			files = append(files, before.Recording)
		}
		atts, err := tx.DeleteConversationAttachments(ctx, conv.ID)
		if err != nil {
			return 0, nil, err
		}
		for _, at := range atts {
			files = append(files, at.Path)
		}
		data, _ := json.Marshal(runtime.EventData(before))
		if _, err := tx.InsertEvent(ctx, store.Event{OrgID: conv.OrgID, ProjectID: conv.ProjectID, Mode: conv.Mode, Type: "conversation.deleted",
			ConversationID: conv.ID, AgentID: conv.AgentID, Data: data}); err != nil {
			return 0, nil, err
		}
		if err := au.record("conversation.deleted", "conversation", string(conv.ID), conv.ProjectID, map[string]any{
			"channel": conv.Channel, "attachments": len(atts), "recording": before.Recording != ""}); err != nil {
			return 0, nil, err
		}
		return http.StatusOK, deletedAnswer{Object: "conversation", ID: string(conv.ID), Deleted: true}, nil
	})
	if err != nil {
		return err
	}
	for _, f := range files {
		if err := os.Remove(a.dataPath(f)); err != nil && !errors.Is(err, os.ErrNotExist) {
			a.Log.WarnContext(ctx, "conversation deleted, but a file of it was not removed", "conversation", conv.ID, "file", f, "err", err)
		}
	}
	return nil
}

// dataPath is the absolute path of a file kept under the data directory.
func (a *API) dataPath(rel string) string { return filepath.Join(a.DataDir, filepath.FromSlash(rel)) }

// transcriptView is the Transcript object.
type transcriptView struct {
	Object         string     `json:"object"`
	ConversationID string     `json:"conversation_id"`
	Status         string     `json:"status"`
	Ended          bool       `json:"ended"`
	Lines          []lineView `json:"lines"`
}

func (a *API) getTranscript(w http.ResponseWriter, r *http.Request) error {
	conv, err := reachableConversation(r, a.Store.Queries)
	if err != nil {
		return err
	}
	ls, err := a.Store.AllLines(r.Context(), conv.ID)
	if err != nil {
		return err
	}
	respond(w, http.StatusOK, transcriptView{Object: "transcript", ConversationID: string(conv.ID), Status: conv.Status, Ended: conv.Ended(), Lines: viewLines(ls)})
	return nil
}

// liveView is the LiveTranscript object.
type liveView struct {
	Object         string     `json:"object"`
	ConversationID string     `json:"conversation_id"`
	Status         string     `json:"status"`
	Lines          []lineView `json:"lines"`
	NextAfter      int64      `json:"next_after"`
	Ended          bool       `json:"ended"`
}

func (a *API) getLiveTranscript(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	c := callFrom(ctx)
	conv, err := reachableConversation(r, a.Store.Queries)
	if err != nil {
		return err
	}
	if conv.Channel == store.ChannelChat || conv.Channel == store.ChannelWhatsApp {
		return fault.E(fault.CodeNoLiveTranscript, "A %s conversation has no live transcript; read GET /v1/conversations/%s/transcript.", conv.Channel, conv.ID)
	}
	after, _ := strconv.ParseInt(c.query["after"], 10, 64)
	wait, _ := strconv.Atoi(c.query["wait"])
	deadline := time.NewTimer(time.Duration(wait) * time.Second)
	defer deadline.Stop()
	answer := func(cv store.Conversation, lines []store.ConversationLine, more bool) error {
		v := liveView{Object: "live_transcript", ConversationID: string(cv.ID), Status: cv.Status, Lines: viewLines(lines), NextAfter: after,
			Ended: cv.Ended() && !more}
		if len(lines) > 0 {
			v.NextAfter = lines[len(lines)-1].Seq
		}
		w.Header().Set("Cache-Control", "no-store")
		respond(w, http.StatusOK, v)
		return nil
	}
	if conv.Ended() && conv.EndedAt != nil && a.now().Sub(*conv.EndedAt) > liveRetention {
		return answer(conv, nil, false) // lines are kept one day here; the transcript has them all
	}
	for {
		var woke <-chan struct{}
		release := func() {}
		if a.Runtime != nil {
			woke, release = a.Runtime.Watch(conv.ID)
		}
		// The status first: once it says ended, every line is stored.
		cur, err := a.Store.GetConversation(ctx, conv.ID)
		if err != nil {
			release()
			return err
		}
		lines, err := a.Store.ListLines(ctx, conv.ID, after, liveMaxLines+1)
		if err != nil {
			release()
			return err
		}
		more := len(lines) > liveMaxLines
		if more {
			lines = lines[:liveMaxLines]
		}
		if len(lines) > 0 || cur.Ended() {
			release()
			return answer(cur, lines, more)
		}
		select {
		case <-woke:
			release()
		case <-deadline.C:
			release()
			return answer(cur, nil, false)
		case <-ctx.Done():
			release()
			return ctx.Err()
		}
	}
}

func (a *API) getRecording(w http.ResponseWriter, r *http.Request) error {
	conv, err := reachableConversation(r, a.Store.Queries)
	if err != nil {
		return err
	}
	notFound := fault.E(fault.CodeRecordingNotFound, "Conversation %s has no recording.", conv.ID)
	if conv.Recording == "" {
		return notFound
	}
	f, err := os.Open(a.dataPath(conv.Recording))
	if errors.Is(err, os.ErrNotExist) {
		return notFound
	}
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	size := st.Size()
	ctype := "audio/wav"
	if strings.HasSuffix(conv.Recording, ".ogg") || strings.HasSuffix(conv.Recording, ".opus") {
		ctype = "audio/ogg"
	}
	first, last, partial, err := parseRange(r.Header.Get("Range"), size)
	if err != nil {
		e := fault.E(fault.CodeRangeNotSatisfiable, "The recording has %d bytes; the Range %q asks for others.", size, r.Header.Get("Range"))
		w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", size))
		return e
	}
	h := w.Header()
	h.Set("Content-Type", ctype)
	h.Set("Accept-Ranges", "bytes")
	h.Set("Content-Length", strconv.FormatInt(last-first+1, 10))
	h.Set("Content-Disposition", fmt.Sprintf(`inline; filename="%s%s"`, conv.ID, filepath.Ext(conv.Recording)))
	status := http.StatusOK
	if partial {
		h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", first, last, size))
		status = http.StatusPartialContent
	}
	if _, err := f.Seek(first, 0); err != nil {
		return err
	}
	w.WriteHeader(status)
	if r.Method == http.MethodHead {
		return nil
	}
	_, _ = io.CopyN(w, f, last-first+1)
	return nil
}

// parseRange reads a single-range Range header (RFC 9110 §14.1.2): "bytes=a-b", "bytes=a-" or
// "bytes=-n". No header, or a form this server does not serve (several ranges, another unit),
// answers the whole file. A range outside the file is an error (416).
func parseRange(h string, size int64) (first, last int64, partial bool, err error) {
	whole := func() (int64, int64, bool, error) { return 0, size - 1, false, nil }
	spec, ok := strings.CutPrefix(strings.TrimSpace(h), "bytes=")
	if h == "" || !ok || strings.Contains(spec, ",") {
		return whole()
	}
	a, b, ok := strings.Cut(strings.TrimSpace(spec), "-")
	if !ok {
		return whole()
	}
	switch {
	case a == "" && b == "":
		return whole()
	case a == "":
		n, perr := strconv.ParseInt(b, 10, 64)
		if perr != nil || n < 0 {
			return whole()
		}
		if n == 0 || size == 0 {
			return 0, 0, false, errors.New("empty suffix range")
		}
		return max(size-n, 0), size - 1, true, nil
	}
	first, perr := strconv.ParseInt(a, 10, 64)
	if perr != nil || first < 0 {
		return whole()
	}
	last = size - 1
	if b != "" {
		l, perr := strconv.ParseInt(b, 10, 64)
		if perr != nil || l < first {
			return whole()
		}
		last = min(l, size-1)
	}
	if first >= size {
		return 0, 0, false, errors.New("range starts past the end")
	}
	return first, last, true, nil
}

// mapRuntimeError turns a runtime error into the problem the API answers.
func mapRuntimeError(err error, phone bool) error {
	var pe *fault.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &pe):
		return err
	case errors.Is(err, runtime.ErrNoMedia), errors.Is(err, runtime.ErrNoTrunk):
		if phone {
			return &fault.Error{Status: 501, Code: fault.CodePhoneUnavailable, Detail: "This deployment places no phone calls: no node runs the media role with a SIP trunk.", Cause: err}
		}
		return &fault.Error{Status: 501, Code: fault.CodeVoiceUnavailable, Detail: "This deployment runs no voice: no node runs the media role with browser calls.", Cause: err}
	case errors.Is(err, runtime.ErrUnreachable):
		return &fault.Error{Status: 502, Code: fault.CodeUpstreamUnreachable, Detail: "The call could not be placed: the service that carries it could not be reached. Retry shortly.", Cause: err, RetryAfter: 2 * time.Second}
	case errors.Is(err, runtime.ErrProvider):
		return &fault.Error{Status: 502, Code: fault.CodeProviderUnavailable, Detail: "The agent's language or speech provider is not available. Retry shortly.", Cause: err, RetryAfter: 2 * time.Second}
	case errors.Is(err, runtime.ErrTooMany):
		e := fault.E(fault.CodeTooManyCalls, "The organization has as many calls going as it may; retry when one has ended.")
		e.RetryAfter = 5 * time.Second
		return e
	case errors.Is(err, runtime.ErrBusy):
		return fault.E(fault.CodeAgentBusy, "The agent is still answering the last message; send the next one once the answer has come.")
	case errors.Is(err, runtime.ErrEnded):
		return fault.E(fault.CodeConversationEnded, "The conversation has ended.")
	case errors.Is(err, runtime.ErrLengthReached):
		return fault.E(fault.CodeChatLengthReached, "The chat has reached its length; start another chat.")
	case errors.Is(err, runtime.ErrNotLive), errors.Is(err, runtime.ErrNotAnswered):
		return fault.E(fault.CodeConversationNotLive, "The conversation is not live: the call is not answered yet, or it has just ended.")
	case errors.Is(err, runtime.ErrUnsupported):
		return fault.E(fault.CodeNoAudio, "The conversation has no audio to listen to.")
	case errors.Is(err, context.Canceled):
		return err
	}
	return err
}
