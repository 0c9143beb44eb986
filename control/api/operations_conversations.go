package api

import (
	"net/http"

	"github.com/parley-voice/parley/control/app/chats"
	"github.com/parley-voice/parley/control/app/conversations"
	"github.com/parley-voice/parley/control/fault"
)

// Tag descriptions of the document: what a conversation is and how it moves.
const (
	callsTagDoc = "Phone calls placed now (POST /v1/calls) or later (POST /v1/scheduled-calls), and browser voice calls (POST /v1/web-calls). " +
		"A call made with a test key rings nobody: it runs against a simulated callee (the engine with the fake providers, in text, with no audio) and goes through the real statuses, transcript, steering and events. " +
		"A scheduled call is scheduled, then dialing once a worker takes it, then placed (conversation_id names its conversation) or failed (failure_code and failure_reason say why, with the code a call placed now would get); a waiting call can be cancelled. " +
		"The request is checked when sent and again when it is dialled (do-not-call list, published agent, credit, frozen project)."
	chatsTagDoc = "Text chats started through the API. One message at a time: while the agent answers, another message gets 409 agent_busy. " +
		"A reply can stream as server-sent events (stream: true, or Accept: text/event-stream): events delta {text}, then done (the ChatTurn) or error {code, detail}; each delta is flushed as the model writes it. " +
		"Pictures are uploaded first (POST /v1/attachments) and sent by id."
	conversationsTagDoc = "Every conversation, by voice or text. Statuses move forward only: pending (created; a call not ringing yet) → ringing (a phone call ringing; browser calls and chats skip it) → in_progress (answered; a chat is in progress from its start) → ended. " +
		"A call can also go from pending or ringing straight to ended (not answered). An ended conversation carries end_reason, an open set: completed, caller_hung_up, agent_ended, no_answer, busy, invalid_number, voicemail, transferred, media_timeout, network_lost, provider_error, failed, silence_timeout, max_duration, ended_by_api, credit_exhausted (the organization's credit could no longer cover the call), shutdown (the node stopped and its drain deadline passed), callee_hung_up (the called party hung up an outbound call). " +
		"A key sees the conversations of its own mode (live or test) in the projects it reaches. " +
		"Live steering (notes, say, transfer, end) answers 202 with a command that GET …/commands/{command_id} follows to done or failed; commands travel over the bus to the node that runs the call."
)

// conversationOperations are the operations of calls, chats and conversations.
func conversationOperations() []*operation {
	startCodes := []string{fault.CodeAgentNotFound, fault.CodeAgentNotPublished, fault.CodeChannelDisabled, fault.CodeProjectFrozen, fault.CodeCreditExhausted}
	steerCodes := []string{fault.CodeConversationNotFound, fault.CodeConversationEnded, fault.CodeConversationNotLive, fault.CodeProjectFrozen, fault.CodeUpstreamUnreachable}
	return []*operation{
		typed(operation{
			ID: "createCall", Method: http.MethodPost, Path: "/calls", Tag: "Calls",
			Summary: "Call a phone number with an outbound agent",
			Description: "Answers 201 with the conversation, pending until the phone is answered. The same request with the same Idempotency-Key returns the same conversation and dials once. " +
				"from_number or phone_number_id (never both) picks one of the agent's numbers; with neither, the agent's first. call_window refuses a call outside its hours with 422 outside_call_window, whose opens_at says when it opens. " +
				"501 when no node runs the media role with a SIP trunk; 502 when the media node or the trunk cannot be reached; 429 too_many_calls when the organization has as many calls going as it may.",
			Permission: "calls:write", Changes: true, Idempotency: idemRequired,
			Codes:    append(append([]string{}, startCodes...), fault.CodeAgentNotOutbound, fault.CodeNoNumberToCallFrom, fault.CodeDoNotCall, fault.CodeOutsideCallWindow, fault.CodeTooManyCalls, fault.CodePhoneUnavailable, fault.CodeUpstreamUnreachable),
			Status:   http.StatusCreated,
			Location: true, Locate: conversationPath,
		}, (*API).createCall),
		typed(operation{
			ID: "endConversation", Method: http.MethodPost, Path: "/conversations/{conversation_id}/end", Tag: "Conversations",
			Summary:     "End a live call or chat",
			Description: "A call still dialling is cancelled; a call in progress is hung up; a chat is closed. Answers 202 with the end command, done once the conversation has ended (reason ended_by_api).",
			Permission:  "calls:write", Changes: true,
			Codes:  steerCodes,
			Status: http.StatusAccepted,
		}, (*API).endConversation),
		typed(operation{
			ID: "listScheduledCalls", Method: http.MethodGet, Path: "/scheduled-calls", Tag: "Calls",
			Summary:    "List scheduled calls, newest first",
			Permission: "conversations:read",
			Status:     http.StatusOK,
		}, (*API).listScheduledCalls),
		typed(operation{
			ID: "createScheduledCall", Method: http.MethodPost, Path: "/scheduled-calls", Tag: "Calls",
			Summary: "Schedule a call",
			Description: "The body of POST /v1/calls plus dial_at, the earliest the call may be placed (now when omitted or past; at most 30 days ahead). With a call_window the call goes at the window's first opening at or after dial_at (due_at). " +
				"The request is checked now and again when a worker dials it.",
			Permission: "calls:write", Changes: true, Idempotency: idemRequired,
			Codes:    append(append([]string{}, startCodes...), fault.CodeAgentNotOutbound, fault.CodeNoNumberToCallFrom, fault.CodeDoNotCall, fault.CodePhoneUnavailable),
			Status:   http.StatusCreated,
			Location: true, Locate: scheduledCallPath,
		}, (*API).createScheduledCall),
		typed(operation{
			ID: "getScheduledCall", Method: http.MethodGet, Path: "/scheduled-calls/{scheduled_call_id}", Tag: "Calls",
			Summary:    "Get a scheduled call",
			Permission: "conversations:read",
			Codes:      []string{fault.CodeScheduledCallNotFound},
			Status:     http.StatusOK,
		}, (*API).getScheduledCall),
		typed(operation{
			ID: "cancelScheduledCall", Method: http.MethodDelete, Path: "/scheduled-calls/{scheduled_call_id}", Tag: "Calls",
			Summary:     "Cancel a scheduled call that is still waiting",
			Description: "409 scheduled_call_not_cancellable once a worker is dialling it, or it was placed, failed or cancelled.",
			Permission:  "calls:write", Changes: true,
			Codes:  []string{fault.CodeScheduledCallNotFound, fault.CodeScheduledNotCancelable, fault.CodeProjectFrozen},
			Status: http.StatusOK,
		}, (*API).cancelScheduledCall),
		typedRaw[uploadAttachmentIn, chats.Attachment](operation{
			ID: "uploadAttachment", Method: http.MethodPost, Path: "/attachments", Tag: "Chats",
			Summary: "Upload a picture to send in a chat message",
			Description: "multipart/form-data with one part named file: a PNG, JPEG, WebP or GIF picture (the type is read from the content) of at most 5 MB. " +
				"Send its id in attachment_ids; it then belongs to that conversation and is deleted with it. A picture no message used is removed after a day.",
			Permission: "attachments:write", Changes: true, Multipart: true, MaxBody: MaxUploadBytes,
			Codes:  []string{fault.CodeUnsupportedImage},
			Status: http.StatusCreated,
		}, (*API).uploadAttachment),
		typed(operation{
			ID: "createChat", Method: http.MethodPost, Path: "/chats", Tag: "Chats",
			Summary:     "Start a chat with an agent",
			Description: "The agent must be published and take the chat channel. Answers 201 with the conversation (in progress) and its transcript so far: the agent's first message, when it has one. A test key chats with the fake providers (the agent answers \"You said: …\").",
			Permission:  "chats:write", Changes: true, Idempotency: idemOptional,
			Codes:    append(append([]string{}, startCodes...), fault.CodeProviderUnavailable),
			Status:   http.StatusCreated,
			Location: true, Locate: conversationPath,
		}, (*API).createChat),
		typedRaw[sendMessageIn, chats.ChatTurn](operation{
			ID: "sendMessage", Method: http.MethodPost, Path: "/conversations/{conversation_id}/messages", Tag: "Chats",
			Summary:     "Send the next message of a chat and get the agent's reply",
			Description: "One message at a time. With an Idempotency-Key the same message again returns the reply it already got (as a stream of one done event when a stream is asked for).",
			Permission:  "chats:write", Changes: true, Idempotency: idemOptional,
			Stream: true, StreamDoc: "With stream: true or Accept: text/event-stream the answer is text/event-stream: event delta (data {\"text\": …}, a piece of the reply, flushed as the model writes it), then event done (data: the ChatTurn) or event error (data {\"code\", \"detail\"}).",
			Replay: replayMessage,
			Codes:  []string{fault.CodeConversationNotFound, fault.CodeCreditExhausted, fault.CodeConversationEnded, fault.CodeChatLengthReached, fault.CodeAgentBusy, fault.CodeNotAChat, fault.CodeProviderUnavailable},
			Status: http.StatusOK,
		}, (*API).sendMessage),
		typed(operation{
			ID: "createWebCall", Method: http.MethodPost, Path: "/web-calls", Tag: "Calls",
			Summary: "Start a browser voice call",
			Description: "Called from your server (a live key). The page joins with url and token; the token joins this one call and lasts 15 minutes. " +
				"The conversation is pending until the page joins, then in progress; it ends no_answer when nobody joins in time. A retry with the same Idempotency-Key returns the same call.",
			Permission: "calls:write", LiveOnly: true, Changes: true, Idempotency: idemOptional,
			Codes:  append(append([]string{}, startCodes...), fault.CodeTooManyCalls, fault.CodeDailyLimit, fault.CodeVoiceUnavailable, fault.CodeUpstreamUnreachable),
			Status: http.StatusCreated,
			Locate: conversationPath, // the answer carries Location, which the interface does not promise
		}, (*API).createWebCall),
		typed(operation{
			ID: "listConversations", Method: http.MethodGet, Path: "/conversations", Tag: "Conversations",
			Summary:    "List conversations, newest first",
			Permission: "conversations:read",
			List:       true,
			Codes:      []string{fault.CodeProjectNotFound},
			Status:     http.StatusOK,
		}, (*API).listConversations),
		typed(operation{
			ID: "listDeletedConversations", Method: http.MethodGet, Path: "/conversations/deleted", Tag: "Conversations",
			Summary:    "List deleted conversations, newest first",
			Permission: "conversations:read",
			List:       true,
			Codes:      []string{fault.CodeProjectNotFound},
			Status:     http.StatusOK,
		}, (*API).listDeletedConversations),
		typed(operation{
			ID: "getConversation", Method: http.MethodGet, Path: "/conversations/{conversation_id}", Tag: "Conversations",
			Summary:     "Get a conversation, with its transcript and cost when asked",
			Description: "include=transcript (needs transcripts:read as well) adds the transcript; include=cost (needs billing:read as well) adds the cost. The answer carries the status, end reason, timings, per-turn latency metrics, metadata, variables and agent_version.",
			Permission:  "conversations:read",
			Codes:       []string{fault.CodeConversationNotFound},
			Status:      http.StatusOK,
		}, (*API).getConversation),
		typed(operation{
			ID: "deleteConversation", Method: http.MethodDelete, Path: "/conversations/{conversation_id}", Tag: "Conversations",
			Summary: "Delete a conversation with its transcript, recording and pictures",
			Description: "Cannot be undone. A call still in progress is refused (409 call_in_progress); an open chat is charged for what it used, closed, then deleted (409 agent_busy while the agent answers a message). " +
				"The conversation is then listed under GET /v1/conversations/deleted and the event conversation.deleted is recorded.",
			Permission: "conversations:delete", Changes: true,
			Codes:  []string{fault.CodeConversationNotFound, fault.CodeCallInProgress, fault.CodeAgentBusy, fault.CodeProjectFrozen},
			Status: http.StatusOK,
		}, (*API).deleteConversation),
		typedRaw[conversationIn, conversations.Conversation](operation{
			ID: "getRecording", Method: http.MethodGet, Path: "/conversations/{conversation_id}/recording", Tag: "Conversations",
			Summary:     "Download the recording of a voice conversation",
			Description: "audio/wav, stereo: the caller on the left, the agent on the right. Takes a Range header (one range) and answers 206 with Content-Range. 404 recording_not_found for a chat, a test call, or a call not answered.",
			Permission:  "conversations:read",
			Binary:      "audio/wav",
			Codes:       []string{fault.CodeConversationNotFound, fault.CodeRecordingNotFound, fault.CodeRangeNotSatisfiable},
			Status:      http.StatusOK,
		}, (*API).getRecording),
		typed(operation{
			ID: "getTranscript", Method: http.MethodGet, Path: "/conversations/{conversation_id}/transcript", Tag: "Conversations",
			Summary:    "Get a conversation's transcript",
			Permission: "transcripts:read",
			Codes:      []string{fault.CodeConversationNotFound},
			Status:     http.StatusOK,
		}, (*API).getTranscript),
		typed(operation{
			ID: "getConversationCommand", Method: http.MethodGet, Path: "/conversations/{conversation_id}/commands/{command_id}", Tag: "Conversations",
			Summary:    "Follow a steering command to done or failed",
			Permission: "conversations:read",
			Codes:      []string{fault.CodeConversationNotFound, fault.CodeCommandNotFound},
			Status:     http.StatusOK,
		}, (*API).getConversationCommand),
		typedRaw[getLiveTranscriptIn, conversations.LiveTranscript](operation{
			ID: "getLiveTranscript", Method: http.MethodGet, Path: "/conversations/{conversation_id}/live", Tag: "Conversations",
			Summary: "Long-poll the live transcript of a call",
			Description: "Answers as soon as there is a line with seq greater than after (up to 100 lines), or after wait seconds with none. Send next_after back as after and ask again until ended is true. " +
				"No line is ever skipped or repeated, whichever node runs the call: lines are read from the store in seq order. after is 0 (the default, every line) to 9007199254740991; wait is 0 (answer at once, the default) to 30 seconds; " +
				"a value out of range gets 422 invalid_parameter. Lines are kept here for one day after the call ends; afterwards this answers no lines with ended true, and GET …/transcript has them all. A chat has no live transcript (409).",
			Permission: "transcripts:read",
			Codes:      []string{fault.CodeConversationNotFound, fault.CodeNoLiveTranscript},
			Status:     http.StatusOK,
		}, (*API).getLiveTranscript),
		typed(operation{
			ID: "addConversationNote", Method: http.MethodPost, Path: "/conversations/{conversation_id}/notes", Tag: "Conversations",
			Summary:     "Add a note to a live conversation",
			Description: "A note is a transcript line (role note). With visible_to_agent the agent reads it as guidance from a supervisor (the caller never hears it). Answers 202 with the command.",
			Permission:  "calls:write", Changes: true,
			Codes:  steerCodes,
			Status: http.StatusAccepted,
		}, (*API).addConversationNote),
		typed(operation{
			ID: "sayInConversation", Method: http.MethodPost, Path: "/conversations/{conversation_id}/say", Tag: "Conversations",
			Summary:     "Make the agent say a text in a live conversation",
			Description: "Spoken after what the agent is saying, or at once with interrupt. The command is done once the text has been said (failed, with the reason, if the caller interrupted it or the call ended). Answers 202 with the command.",
			Permission:  "calls:write", Changes: true,
			Codes:  append(append([]string{}, steerCodes...), fault.CodeWhatsAppWindowClosed), // issue 19: a messaging-app conversation's window
			Status: http.StatusAccepted,
		}, (*API).sayInConversation),
		typed(operation{
			ID: "transferConversation", Method: http.MethodPost, Path: "/conversations/{conversation_id}/transfer", Tag: "Conversations",
			Summary: "Transfer a live call to a number or SIP address",
			Description: "cold: a blind transfer (SIP REFER); warm: the agent briefs a human on a second leg with summary, then bridges the caller. The command is done when the transfer succeeded (the conversation then ends as transferred) or failed with the reason (the agent carries on). " +
				"A test call is transferred at once. A chat cannot be transferred (409 not_transferable). A SIP URI on a loopback, private or link-local address is refused (422 transfer_destination_not_allowed) unless the node's PARLEY_TRANSFER_ALLOW or the call's trunk (`parley admin trunks networks --transfer-allow`) allows its network. Answers 202 with the command.",
			Permission: "calls:write", Changes: true,
			Codes:  append(append([]string{}, steerCodes...), fault.CodeNotTransferable, fault.CodeTransferNotAllowed),
			Status: http.StatusAccepted,
		}, (*API).transferConversation),
		typed(operation{
			ID: "createTestInboundCall", Method: http.MethodPost, Path: "/test/inbound-calls", Tag: "Testing",
			Summary: "Simulate an inbound phone call to an inbound agent, with no carrier",
			Description: "Name the agent (agent_id) or the number called (to_number); lines are what the caller says, one per turn. The call runs end to end through the engine with the fake providers, in text: its statuses, transcript, steering and events are the real ones. " +
				"It is always a test-mode conversation (found with a test key), and costs nothing.",
			Permission: "calls:write", Changes: true,
			Codes:    []string{fault.CodeAgentNotFound, fault.CodePhoneNumberNotFound, fault.CodeAgentNotInbound, fault.CodeAgentNotPublished, fault.CodeChannelDisabled, fault.CodeProjectFrozen, fault.CodeTooManyCalls},
			Status:   http.StatusCreated,
			Location: true, Locate: conversationPath,
		}, (*API).createTestInboundCall),
		typed(operation{
			ID: "listenConversation", Method: http.MethodPost, Path: "/conversations/{conversation_id}/listen", Tag: "Conversations",
			Summary: "Listen to (or take over) a live voice call from a browser",
			Description: "An extension of Parley. mode listen hears both sides; takeover lets a person speak instead of the agent. Answers 201 with a url and a single-use token (15 minutes) for the page. " +
				"409 no_audio for a chat or a test call, conversation_not_live before the call is answered.",
			Permission: "calls:listen", Changes: true, Extension: true,

			Codes:  []string{fault.CodeConversationNotFound, fault.CodeConversationEnded, fault.CodeConversationNotLive, fault.CodeNoAudio, fault.CodeVoiceUnavailable, fault.CodeUpstreamUnreachable},
			Status: http.StatusCreated,
		}, (*API).listenConversation),
	}
}
