package api

import (
	"net/http"

	"github.com/parley-voice/parley/control/fault"
)

// webhookOperations are the operations of events, webhook receivers and post-call analysis
// (issue 14).
func webhookOperations() []*operation {
	receiverCodes := []string{fault.CodeReceiverNotFound}
	return []*operation{
		typed(operation{
			ID: "analyzeConversation", Method: http.MethodPost, Path: "/conversations/{conversation_id}/analysis", Tag: "Conversations",
			Summary: "Run the post-call analysis of a conversation again",
			Description: "Queued: the answer is 202 with the conversation as it is; read it again until analyzed_at changes. The agent's LLM fills its analysis_schema from the transcript (a tool call; an answer that does not fit the schema is asked for once more), and collected against collected_schema the same way; " +
				"the result is stored on the conversation as analysis and collected, and conversation.analyzed is sent (form.abandoned too when a form-filling conversation left a required field unfilled). " +
				"The LLM's tokens are charged to the credit (llm_tokens). 409 conversation_not_ended while the conversation is in progress. No body.",
			Permission: "conversations:read", Changes: true,
			Codes:  []string{fault.CodeConversationNotFound, fault.CodeConversationNotEnded, fault.CodeProjectFrozen},
			Status: http.StatusAccepted,
		}, (*API).analyzeConversation),
		typed(operation{
			ID: "listEvents", Method: http.MethodGet, Path: "/events", Tag: "Events",
			Summary: "List events, newest first",
			Description: "Everything that happened in the projects the key reaches (a test key: test events only), kept 30 days. Filters: type (repeatable), conversation_id, created_after, created_before. " +
				"Each event's data is the object it is about; the document's webhooks section gives the body of each type.",
			Permission: "events:read",
			Codes:      []string{fault.CodeUnknownEventType},
			Status:     http.StatusOK,
		}, (*API).listEvents),
		typed(operation{
			ID: "listWebhookReceivers", Method: http.MethodGet, Path: "/webhooks", Tag: "Webhooks",
			Summary:    "List webhook receivers, oldest first",
			Permission: "webhooks:read",
			Codes:      []string{fault.CodeProjectNotFound},
			Status:     http.StatusOK,
		}, (*API).listWebhookReceivers),
		typed(operation{
			ID: "createWebhookReceiver", Method: http.MethodPost, Path: "/webhooks", Tag: "Webhooks",
			Summary: "Create a webhook receiver",
			Description: "In a project of the key; live for a live key, test for a test key (which hears test events only). The url must be a public https address: it is resolved when saved, and every address must be public (422 invalid_webhook_url); each delivery checks the address it dials again. " +
				"At most 10 receivers per project (422 webhook_receiver_limit_reached). The signing secret is in this answer only.",
			Permission: "webhooks:write", Changes: true, Idempotency: idemOptional,
			Codes:  []string{fault.CodeProjectNotFound, fault.CodeProjectFrozen, fault.CodeInvalidWebhookURL, fault.CodeUnknownEventType, fault.CodeReceiverAgent, fault.CodeReceiverLimit},
			Status: http.StatusCreated,
		}, (*API).createWebhookReceiver),
		typed(operation{
			ID: "getWebhookReceiver", Method: http.MethodGet, Path: "/webhooks/{receiver_id}", Tag: "Webhooks",
			Summary:    "Get a webhook receiver (never its secret)",
			Permission: "webhooks:read",
			Codes:      receiverCodes,
			Status:     http.StatusOK,
		}, (*API).getWebhookReceiver),
		typed(operation{
			ID: "updateWebhookReceiver", Method: http.MethodPatch, Path: "/webhooks/{receiver_id}", Tag: "Webhooks",
			Summary:     "Change a webhook receiver, or enable it again after a 410",
			Description: "Members left out stay as they are; events null goes back to the default set. enabled true enables a receiver that answered 410 Gone.",
			Permission:  "webhooks:write", Changes: true,
			Codes:  []string{fault.CodeReceiverNotFound, fault.CodeProjectFrozen, fault.CodeInvalidWebhookURL, fault.CodeUnknownEventType, fault.CodeReceiverAgent},
			Status: http.StatusOK,
		}, (*API).updateWebhookReceiver),
		typed(operation{
			ID: "deleteWebhookReceiver", Method: http.MethodDelete, Path: "/webhooks/{receiver_id}", Tag: "Webhooks",
			Summary:    "Delete a webhook receiver with its delivery history",
			Permission: "webhooks:write", Changes: true,
			Codes:  []string{fault.CodeReceiverNotFound, fault.CodeProjectFrozen},
			Status: http.StatusOK,
		}, (*API).deleteWebhookReceiver),
		typed(operation{
			ID: "listWebhookDeliveries", Method: http.MethodGet, Path: "/webhooks/{receiver_id}/deliveries", Tag: "Webhooks",
			Summary:     "List what was sent to a receiver in the last 30 days, newest first",
			Description: "Each delivery carries its attempts: when, the status code, how long it took, the first 2 KB of the answer and the error. Filter: status.",
			Permission:  "webhooks:read",
			Codes:       receiverCodes,
			Status:      http.StatusOK,
		}, (*API).listWebhookDeliveries),
		typed(operation{
			ID: "resendWebhookDelivery", Method: http.MethodPost, Path: "/webhooks/{receiver_id}/deliveries/{delivery_id}/resend", Tag: "Webhooks",
			Summary:     "Send a delivery again, with the same webhook-id",
			Description: "Queued (202): one new attempt, signed with a new webhook-timestamp; the delivery is pending until it is made. A delivery of another receiver is 404 webhook_delivery_not_found. No body.",
			Permission:  "webhooks:write", Changes: true,
			Codes:  []string{fault.CodeReceiverNotFound, fault.CodeDeliveryNotFound},
			Status: http.StatusAccepted,
		}, (*API).resendWebhookDelivery),
		typed(operation{
			ID: "rotateWebhookSecret", Method: http.MethodPost, Path: "/webhooks/{receiver_id}/rotate-secret", Tag: "Webhooks",
			Summary:     "Give a receiver a new signing secret",
			Description: "The answer carries the new secret (shown this once). For 24 hours both secrets sign: each delivery's webhook-signature holds two v1 entries separated by a space, so a receiver that knows either verifies. No body.",
			Permission:  "webhooks:write", Changes: true,
			Codes:  []string{fault.CodeReceiverNotFound, fault.CodeProjectFrozen},
			Status: http.StatusOK,
		}, (*API).rotateWebhookSecret),
		typed(operation{
			ID: "testWebhookReceiver", Method: http.MethodPost, Path: "/webhooks/{receiver_id}/test", Tag: "Webhooks",
			Summary:     "Send a webhook.test event to a receiver",
			Description: "Queued (202): the answer is the pending delivery; list the receiver's deliveries to see how it went. Sent even to a receiver disabled by a 410. No body.",
			Permission:  "webhooks:write", Changes: true,
			Codes:  receiverCodes,
			Status: http.StatusAccepted,
		}, (*API).testWebhookReceiver),
	}
}
