// Package fault is the classified error of the control plane: an *Error knows its HTTP
// status and its stable code, and Codes catalogues every code with what it means. The domain
// layer, the jobs and the transport all return these; package problem renders them as RFC 9457
// documents. This package must never import net/http: the domain layer depends on it.
package fault

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Internal is the code of an unexpected fault on the service's side.
const Internal = "internal_error"

// TypeBase prefixes the type URI of each code in a problem document (RFC 9457 §3.1.1). The
// transport's problem package writes it; the domain names a type with it where an answer lists
// several problems (an import's refused rows).
const TypeBase = "https://parley.dev/problems/"

// FieldError names one place in the request that does not fit: Pointer, an RFC 6901 JSON
// pointer into the JSON body, or Parameter, the name of a query parameter or header.
type FieldError struct {
	Pointer   string `json:"pointer"`
	Code      string `json:"code"`
	Detail    string `json:"detail"`
	Parameter string `json:"parameter,omitempty"`
}

// MarshalJSON writes pointer for a body error (even "", the whole body) and parameter instead
// for a parameter error.
func (f FieldError) MarshalJSON() ([]byte, error) {
	if f.Parameter != "" {
		return json.Marshal(struct {
			Parameter string `json:"parameter"`
			Code      string `json:"code"`
			Detail    string `json:"detail"`
		}{f.Parameter, f.Code, f.Detail})
	}
	type plain struct {
		Pointer string `json:"pointer"`
		Code    string `json:"code"`
		Detail  string `json:"detail"`
	}
	return json.Marshal(plain{f.Pointer, f.Code, f.Detail})
}

// Error is an API error that knows its HTTP status and stable code.
type Error struct {
	Status     int
	Code       string
	Detail     string
	Errors     []FieldError
	RetryAfter time.Duration
	// Extra members added to the document (for example "opens_at").
	Extra map[string]any
	// Cause is logged, never shown to the client.
	Cause error
}

func (e *Error) Error() string {
	if e.Cause != nil {
		return e.Code + ": " + e.Detail + ": " + e.Cause.Error()
	}
	return e.Code + ": " + e.Detail
}

func (e *Error) Unwrap() error { return e.Cause }

// New returns an *Error with the status, code and detail.
func New(status int, code, detail string) *Error {
	return &Error{Status: status, Code: code, Detail: detail}
}

// Codes of the 401 and browser causes: the same status, a distinct code each.
const (
	CodeMissingKey   = "missing_api_key"
	CodeMalformedKey = "malformed_api_key"
	CodeUnknownKey   = "unknown_api_key"
	CodeRevokedKey   = "revoked_api_key"
	CodeExpiredKey   = "expired_api_key"
	CodeLiveBrowser  = "live_key_in_browser"
)

// errorCode is one stable code of a problem document: its status and what it means. Every code
// the API can answer is in codes, and the OpenAPI document lists them all (x-error-codes) and,
// per operation, the ones it can answer.
type Code struct {
	Status      int
	Description string
}

// Problem codes, besides the 401 codes of auth.go.
const (
	CodeMissingPermission     = "missing_permission"
	CodeLiveKeyRequired       = "live_key_required"
	CodeOrganizationFrozen    = "organization_frozen"
	CodeProjectFrozen         = "project_frozen"
	CodeRouteNotFound         = "route_not_found"
	CodeMethodNotAllowed      = "method_not_allowed"
	CodeAgentNotFound         = "agent_not_found"
	CodeProjectNotFound       = "project_not_found"
	CodeVersionNotFound       = "version_not_found"
	CodePhoneNumberNotFound   = "phone_number_not_found"
	CodeAgentNameTaken        = "agent_name_taken"
	CodeIdempotencyMissing    = "idempotency_key_missing"
	CodeIdempotencyTooLong    = "idempotency_key_too_long"
	CodeIdempotencyInvalid    = "idempotency_key_invalid"
	CodeIdempotencyReused     = "idempotency_key_reused"
	CodeIdempotencyInUse      = "idempotency_key_in_use"
	CodeBodyTooLarge          = "body_too_large"
	CodeHeadersTooLarge       = "request_headers_too_large"
	CodeUnsupportedMediaType  = "unsupported_media_type"
	CodeMalformedJSON         = "malformed_json"
	CodeValidationFailed      = "validation_failed"
	CodeInvalidDefinition     = "invalid_definition"
	CodeKindMismatch          = "definition_kind_mismatch"
	CodeDirectionMismatch     = "definition_direction_mismatch"
	CodeInvalidParameter      = "invalid_parameter"
	CodeUnknownParameter      = "unknown_parameter"
	CodeInvalidCursor         = "invalid_cursor"
	CodeCursorMismatch        = "cursor_mismatch"
	CodeAgentOtherProject     = "agent_in_other_project"
	CodeRateLimited           = "rate_limited"
	CodeServiceUnavailable    = "service_unavailable"
	CodeInternal              = Internal
	CodeUnexpectedBodyContent = "body_not_allowed"

	// Conversations, calls and chats.
	CodeConversationNotFound   = "conversation_not_found"
	CodeScheduledCallNotFound  = "scheduled_call_not_found"
	CodeCommandNotFound        = "command_not_found"
	CodeRecordingNotFound      = "recording_not_found"
	CodeAgentNotPublished      = "agent_not_published"
	CodeAgentNotOutbound       = "agent_not_outbound"
	CodeAgentNotInbound        = "agent_not_inbound"
	CodeChannelDisabled        = "agent_channel_disabled"
	CodeNoNumberToCallFrom     = "no_number_to_call_from"
	CodeDoNotCall              = "number_on_do_not_call_list"
	CodeCreditExhausted        = "credit_exhausted"
	CodeOutsideCallWindow      = "outside_call_window"
	CodeTooManyCalls           = "too_many_calls"
	CodeDailyLimit             = "daily_limit_reached"
	CodePhoneUnavailable       = "phone_calls_unavailable"
	CodeVoiceUnavailable       = "voice_unavailable"
	CodeUpstreamUnreachable    = "upstream_unreachable"
	CodeProviderUnavailable    = "provider_unavailable"
	CodeConversationEnded      = "conversation_ended"
	CodeConversationNotLive    = "conversation_not_live"
	CodeCallInProgress         = "call_in_progress"
	CodeAgentBusy              = "agent_busy"
	CodeChatLengthReached      = "chat_length_reached"
	CodeNotAChat               = "not_a_chat"
	CodeNoLiveTranscript       = "no_live_transcript"
	CodeNotTransferable        = "not_transferable"
	CodeNoAudio                = "no_audio"
	CodeScheduledNotCancelable = "scheduled_call_not_cancellable"
	CodeRangeNotSatisfiable    = "range_not_satisfiable"
	CodeUnsupportedImage       = "unsupported_image_type"
	// issue 22 item 7
	CodeTransferNotAllowed = "transfer_destination_not_allowed"

	// Billing and audit.
	CodeAllProjectsRequired = "all_projects_key_required"

	// issue 14: events, webhooks and post-call analysis.
	CodeUnknownEventType     = "unknown_event_type"
	CodeReceiverNotFound     = "webhook_receiver_not_found"
	CodeDeliveryNotFound     = "webhook_delivery_not_found"
	CodeInvalidWebhookURL    = "invalid_webhook_url"
	CodeReceiverLimit        = "webhook_receiver_limit_reached"
	CodeReceiverAgent        = "webhook_agent_not_found"
	CodeConversationNotEnded = "conversation_not_ended"

	// issue 15: contacts, the do-not-call list and campaigns.
	CodeContactNotFound   = "contact_not_found"
	CodeContactExists     = "contact_exists"
	CodeDoNotCallNotFound = "number_not_on_do_not_call_list"
	CodeCampaignNotFound  = "campaign_not_found"
	CodeCampaignState     = "campaign_state_conflict"
	CodeUnreadableImport  = "unreadable_import"

	// issue 16: knowledge bases, documents and crawls.
	CodeKnowledgeBaseNotFound   = "knowledge_base_not_found"
	CodeKnowledgeDocNotFound    = "knowledge_document_not_found"
	CodeKnowledgeCrawlNotFound  = "knowledge_crawl_not_found"
	CodeKnowledgeBaseNameTaken  = "knowledge_base_name_taken"
	CodeKnowledgeBaseInUse      = "knowledge_base_in_use"
	CodeUnsupportedDocumentType = "unsupported_document_type"
	CodeCrawlURLRefused         = "crawl_url_refused"
	CodeCrawlInProgress         = "crawl_in_progress"
	CodeCrawlPageNotReplaceable = "crawl_page_not_replaceable"
	// issue 17: the vault, tools and MCP servers.
	CodeSecretNotFound       = "vault_secret_not_found"
	CodeSecretNameTaken      = "vault_secret_name_taken"
	CodeSecretInUse          = "vault_secret_in_use"
	CodeToolNotFound         = "tool_not_found"
	CodeToolNameTaken        = "tool_name_taken"
	CodeInvalidToolSchema    = "invalid_tool_parameters"
	CodeToolURLNotAllowed    = "tool_url_not_allowed"
	CodeMCPServerNotFound    = "mcp_server_not_found"
	CodeMCPServerNameTaken   = "mcp_server_name_taken"
	CodeUnknownToolReference = "unknown_tool_reference"
	// issue 18: evaluations.
	CodeEvaluationNotFound    = "evaluation_not_found"
	CodeEvaluationRunNotFound = "evaluation_run_not_found"
	CodeEvaluationRunActive   = "evaluation_run_in_progress"
	CodeEvaluationChannel     = "evaluation_channel_mismatch"
	CodeUnknownMockTool       = "unknown_mock_tool"
	CodeEvaluationEmpty       = "evaluation_without_turns"

	// issue 19: the messaging-app channel (WhatsApp).
	CodeWhatsAppUnavailable      = "whatsapp_unavailable"
	CodeWhatsAppSenderNotFound   = "whatsapp_sender_not_found"
	CodeWhatsAppSenderTaken      = "whatsapp_sender_taken"
	CodeWhatsAppNotConnected     = "whatsapp_not_connected"
	CodeWhatsAppNoAgent          = "whatsapp_no_agent"
	CodeWhatsAppTemplateNotFound = "whatsapp_template_not_found"
	CodeWhatsAppWindowClosed     = "whatsapp_window_closed"
	CodeWhatsAppUpstream         = "whatsapp_upstream_error"
	CodeNotWhatsApp              = "not_a_whatsapp_conversation"
)

var Codes = map[string]Code{
	CodeMissingKey:            {401, "No Authorization header: send Authorization: Bearer <key>."},
	CodeMalformedKey:          {401, "The Authorization header is not Bearer followed by a key of the form sk_live_… or sk_test_…."},
	CodeUnknownKey:            {401, "No such key."},
	CodeRevokedKey:            {401, "The key was revoked."},
	CodeExpiredKey:            {401, "The key has expired."},
	CodeLiveBrowser:           {403, "A live key was sent by a web page of another origin (the request carries a foreign Origin header, as browsers send on cross-origin requests). Call with live keys from servers only; pages may use test keys."},
	CodeMissingPermission:     {403, "The key lacks the permission the operation needs; detail and the permission member name it."},
	CodeLiveKeyRequired:       {403, "The operation needs a live key; a test key may not use it."},
	CodeOrganizationFrozen:    {403, "The organization is frozen: it can read but change nothing."},
	CodeProjectFrozen:         {409, "The project is frozen: its objects cannot be changed."},
	CodeRouteNotFound:         {404, "No operation at this path."},
	CodeMethodNotAllowed:      {405, "The path exists but not with this method; the Allow header lists the methods."},
	CodeAgentNotFound:         {404, "This key reaches no such agent (it does not exist, was deleted, or is in a project the key does not reach)."},
	CodeProjectNotFound:       {404, "This key reaches no such project."},
	CodeVersionNotFound:       {404, "The agent has no such published version."},
	CodePhoneNumberNotFound:   {404, "This key reaches no such phone number."},
	CodeAgentNameTaken:        {409, "Another agent of the project has this name (names are compared ignoring case)."},
	CodeIdempotencyMissing:    {400, "The operation requires an Idempotency-Key header."},
	CodeIdempotencyTooLong:    {400, "The Idempotency-Key is longer than 120 characters."},
	CodeIdempotencyInvalid:    {400, "The Idempotency-Key is empty or holds characters other than printable ASCII."},
	CodeIdempotencyReused:     {422, "The Idempotency-Key was already used for a different request to this operation in the last 24 hours."},
	CodeIdempotencyInUse:      {409, "A request with this Idempotency-Key is still being processed; retry after it finishes (Retry-After)."},
	CodeHeadersTooLarge:       {431, "The request headers are larger than the service reads (64 KiB)."},
	CodeBodyTooLarge:          {413, "The request body is larger than the operation accepts."},
	CodeUnsupportedMediaType:  {415, "The body is not sent as Content-Type: application/json (UTF-8)."},
	CodeMalformedJSON:         {422, "The body is not well-formed JSON, is not UTF-8, or names a member twice; errors[] names the place, and detail the line and column."},
	CodeValidationFailed:      {422, "The body does not fit the operation's schema; errors[] names each place."},
	CodeInvalidDefinition:     {422, "The agent definition cannot be read or holds something an agent may not hold; errors[] names each place."},
	CodeKindMismatch:          {422, "The definition's kind differs from the agent's own."},
	CodeDirectionMismatch:     {422, "The definition's direction differs from the agent's own."},
	CodeInvalidParameter:      {422, "A query parameter does not fit; errors[] names it."},
	CodeUnknownParameter:      {422, "The operation takes no such query parameter; errors[] names it."},
	CodeInvalidCursor:         {422, "The cursor is not one this list gave out."},
	CodeCursorMismatch:        {422, "The cursor was given out for other filters: send it with the filters of the page it came from."},
	CodeAgentOtherProject:     {422, "The agent is in another project than the phone number."},
	CodeRateLimited:           {429, "Too many requests for this key or its organization; Retry-After says when to retry."},
	CodeServiceUnavailable:    {503, "A service the request needs (the store or the bus) cannot be reached; retry shortly."},
	CodeInternal:              {500, "A fault on the service's side; quote request_id to support."},
	CodeUnexpectedBodyContent: {422, "The operation takes no body members."},

	CodeConversationNotFound:   {404, "This key reaches no such conversation (it does not exist, is of the other key mode, is in a project the key does not reach, or was deleted)."},
	CodeScheduledCallNotFound:  {404, "This key reaches no such scheduled call."},
	CodeCommandNotFound:        {404, "The conversation has no such command."},
	CodeRecordingNotFound:      {404, "The conversation has no recording (a chat, a test call, a call that was never answered, or one still being written)."},
	CodeAgentNotPublished:      {409, "The agent is not published: only a published agent takes part in conversations."},
	CodeAgentNotOutbound:       {409, "The agent answers conversations rather than placing calls."},
	CodeAgentNotInbound:        {409, "The agent places calls rather than answering them."},
	CodeChannelDisabled:        {409, "The agent does not take this channel (chat, browser voice) in its definition's channels."},
	CodeNoNumberToCallFrom:     {409, "The agent has no phone number to call from."},
	CodeDoNotCall:              {409, "The number to call is on the organization's do-not-call list."},
	CodeCreditExhausted:        {402, "The organization's credit is used up; add credit to place calls and start chats."},
	CodeOutsideCallWindow:      {422, "The call is outside its call_window; detail and opens_at say when the window opens."},
	CodeTooManyCalls:           {429, "The organization has as many calls going as it may; retry when one has ended (Retry-After)."},
	CodeDailyLimit:             {429, "The organization has placed as many browser calls today (UTC) as it may."},
	CodePhoneUnavailable:       {501, "This deployment places no phone calls: no node runs the media role, or no SIP trunk is configured."},
	CodeVoiceUnavailable:       {501, "This deployment runs no voice: no node runs the media role with browser calls."},
	CodeUpstreamUnreachable:    {502, "The call could not be placed: the media node or the SIP trunk could not be reached; retry shortly."},
	CodeProviderUnavailable:    {502, "The agent's language or speech provider is not configured or could not be reached; retry shortly."},
	CodeConversationEnded:      {409, "The conversation has ended."},
	CodeConversationNotLive:    {409, "The conversation is not live: the call is not answered yet, or no node runs it any more."},
	CodeCallInProgress:         {409, "The call is still in progress; end it first."},
	CodeAgentBusy:              {409, "The agent is still answering the last message; send the next one when the answer has come."},
	CodeChatLengthReached:      {409, "The chat has reached its length (the most messages a chat takes)."},
	CodeNotAChat:               {409, "The conversation is not a chat."},
	CodeNoLiveTranscript:       {409, "A chat or messaging-app conversation has no live transcript; read its transcript."},
	CodeTransferNotAllowed:     {422, "The transfer destination is a loopback, private, link-local or otherwise non-public address that neither the node (PARLEY_TRANSFER_ALLOW) nor the call's trunk allows, or a host name that does not resolve."},
	CodeNotTransferable:        {409, "The conversation cannot be transferred (a chat has nobody to hand over)."},
	CodeNoAudio:                {409, "The conversation has no audio to listen to (a chat, or a test call run in text)."},
	CodeScheduledNotCancelable: {409, "The scheduled call is already being dialled, placed, failed or cancelled."},
	CodeRangeNotSatisfiable:    {416, "The Range header asks for bytes the recording does not have; Content-Range names its size."},
	CodeUnsupportedImage:       {415, "The attachment is not a PNG, JPEG, WebP or GIF picture (the type is read from the content)."},

	// issue 15: contacts, the do-not-call list and campaigns.
	CodeContactNotFound:     {404, "This key reaches no such contact."},
	CodeContactExists:       {409, "The project has a contact with this number or external_id already."},
	CodeDoNotCallNotFound:   {404, "The number is not on the organization's do-not-call list (or the key does not reach every project, as the list needs)."},
	CodeCampaignNotFound:    {404, "This key reaches no such campaign."},
	CodeCampaignState:       {409, "The campaign is not in a status this operation applies to (a cancelled or completed campaign never starts again); detail names its status."},
	CodeUnreadableImport:    {422, "The import is not CSV or JSON lines text (a binary file, or not UTF-8)."},
	CodeAllProjectsRequired: {403, "The operation reads the whole organization (the audit log): it needs a key that reaches every project."},

	CodeUnknownEventType:        {422, "An event type is not one of the catalogue (the document's webhooks section lists them); errors[] names each."},
	CodeReceiverNotFound:        {404, "This key reaches no such webhook receiver (receivers made with a test key are seen by test keys only)."},
	CodeDeliveryNotFound:        {404, "The receiver has no such delivery (kept 30 days)."},
	CodeInvalidWebhookURL:       {422, "The receiver's url is not a public https address: another scheme, a host that does not resolve, or one that resolves to a loopback, private, link-local, CGNAT, multicast or unspecified address."},
	CodeReceiverLimit:           {422, "The project has 10 webhook receivers, the most it may have; delete one first."},
	CodeReceiverAgent:           {422, "An agent of agent_ids is not an agent of the receiver's project; errors[] names each."},
	CodeConversationNotEnded:    {409, "The conversation has not ended yet; it is analyzed once it has."},
	CodeKnowledgeBaseNotFound:   {404, "This key reaches no such knowledge base."},
	CodeKnowledgeDocNotFound:    {404, "The knowledge base has no such document."},
	CodeKnowledgeCrawlNotFound:  {404, "The knowledge base has no such crawl."},
	CodeKnowledgeBaseNameTaken:  {409, "Another knowledge base of the project has this name (names are compared ignoring case)."},
	CodeKnowledgeBaseInUse:      {409, "Agents name the knowledge base in their definitions; detail and the agents member name them. Remove it from their references first."},
	CodeUnsupportedDocumentType: {415, "The document is not a type Parley reads: PDF, HTML, Markdown, plain text, CSV or DOCX (the type is read from the content and the name)."},
	CodeCrawlURLRefused:         {422, "The crawl's address is not a public http(s) address that resolves (private, loopback and link-local addresses are refused)."},
	CodeCrawlInProgress:         {409, "The crawl is already queued or running; its next run starts when this one is over."},
	CodeCrawlPageNotReplaceable: {409, "The document is a page of a crawl: it changes when the crawl refreshes, not by upload."},
	// issue 17: the vault, tools and MCP servers.
	CodeSecretNotFound:       {404, "This key reaches no such vault secret (in the project)."},
	CodeSecretNameTaken:      {409, "Another vault secret of the project has this name (names are compared ignoring case)."},
	CodeSecretInUse:          {409, "The vault secret is used by tools, MCP servers or senders; detail and used_by name them."},
	CodeToolNotFound:         {404, "This key reaches no such tool."},
	CodeToolNameTaken:        {409, "Another tool of the project has this name (names are compared ignoring case)."},
	CodeInvalidToolSchema:    {422, "The tool's parameters are not a valid JSON Schema of an object; errors[] points at the place."},
	CodeToolURLNotAllowed:    {422, "The URL is not allowed: it is not http(s), its host is a template, it does not resolve, or it resolves to a private, loopback or otherwise non-public address."},
	CodeMCPServerNotFound:    {404, "This key reaches no such MCP server."},
	CodeMCPServerNameTaken:   {409, "Another MCP server of the project has this name (names are compared ignoring case)."},
	CodeUnknownToolReference: {422, "The definition's references.tools names something that is neither a tool, an MCP server nor an allowed MCP tool of the agent's project; errors[] points at it."},
	// issue 18: evaluations.
	CodeEvaluationNotFound:    {404, "This key reaches no such saved conversation of the agent."},
	CodeEvaluationRunNotFound: {404, "This key reaches no such evaluation run."},
	CodeEvaluationRunActive:   {409, "Saved conversations are already being rehearsed in this organization; wait for that run to finish."},
	CodeEvaluationChannel:     {422, "The conversation was a chat (or a messaging app): it cannot be saved for a voice run."},
	CodeUnknownMockTool:       {422, "A mock names a tool the agent's definition does not give its conversations; errors[] points at it."},
	CodeEvaluationEmpty:       {422, "A saved conversation needs a conversation_id or at least one user turn."},

	// issue 19: the messaging-app channel (WhatsApp).
	CodeWhatsAppUnavailable:      {501, "This deployment does not run the messaging-app channel (no conversation runtime, or no vault to hold its credentials)."},
	CodeWhatsAppSenderNotFound:   {404, "This key reaches no such messaging-app number."},
	CodeWhatsAppSenderTaken:      {409, "This phone-number id is connected already (by this or another organization)."},
	CodeWhatsAppNotConnected:     {409, "The connection has no business account id or access token: set them on the sender first."},
	CodeWhatsAppNoAgent:          {409, "No agent answers this messaging-app number: assign one first."},
	CodeWhatsAppTemplateNotFound: {422, "The template is not among the approved templates of the number's business account (in that language), or its parameters do not fit."},
	CodeWhatsAppWindowClosed:     {409, "The 24-hour window is closed: the user last wrote more than 24 hours ago, or never; start again with an approved template. closed_at says when it closed (null when it never opened)."},
	CodeWhatsAppUpstream:         {502, "Meta's Graph API refused or could not be reached; detail carries its error; retry shortly."},
	CodeNotWhatsApp:              {409, "The conversation is not a messaging-app conversation."},
}

// E returns the error for code, with its catalogued status; detail may be a format.
func E(code, detail string, args ...any) *Error {
	c, ok := Codes[code]
	if !ok {
		panic("fault: uncatalogued error code " + code) // caught by TestErrorCatalog
	}
	if len(args) > 0 {
		detail = fmt.Sprintf(detail, args...)
	}
	return New(c.Status, code, detail)
}

// Invalid is the 422 of code naming each place that does not fit; its detail repeats the
// first three details.
func Invalid(code string, fes []FieldError) *Error {
	details := make([]string, 0, 3)
	for i, f := range fes {
		if i < 3 {
			details = append(details, f.Detail)
		}
	}
	detail := strings.Join(details, " ")
	if len(fes) > 3 {
		detail += fmt.Sprintf(" (%d more in errors)", len(fes)-3)
	}
	return &Error{Status: 422, Code: code, Detail: detail, Errors: fes}
}

// Sorted lists the catalogued codes by status, then code.
func Sorted() []string {
	out := make([]string, 0, len(Codes))
	for c := range Codes {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := Codes[out[i]], Codes[out[j]]
		if a.Status != b.Status {
			return a.Status < b.Status
		}
		return out[i] < out[j]
	})
	return out
}
