package api

import (
	"net/http"

	"github.com/parley-voice/parley/control/fault"
)

// billingOperations are the operations of credit and the audit log.
func billingOperations() []*operation {
	return []*operation{
		typed(operation{
			ID: "getCreditBalance", Method: http.MethodGet, Path: "/billing/balance", Tag: "Billing",
			Summary: "The organization's credit: on the account, still spendable, spent this month",
			Description: "Credit is the organization's: every key with billing:read reads it, whatever its project reach or mode (test conversations cost nothing). " +
				"available is balance less reserved, what calls in progress hold (each holds what its next five minutes may cost, renewed as it goes on); " +
				"at zero or below, operations that spend answer 402 credit_exhausted, and a call whose hold runs out and cannot be renewed ends with end_reason credit_exhausted. " +
				"month_spent sums the charges since month_start, the first instant of the calendar month in the organization's timezone. " +
				"Amounts are exact decimal strings of US dollars with six places, each with its integer of micro-dollars (*_micros); currency is USD.",
			Permission: "billing:read",
			Status:     http.StatusOK,
		}, (*API).getCreditBalance),
		typed(operation{
			ID: "listCreditTransactions", Method: http.MethodGet, Path: "/billing/transactions", Tag: "Billing",
			Summary: "The ledger of credit: every top-up and every charge, newest first",
			Description: "A voice call's charge is recorded when it ends, one transaction per part (call_minutes, stt_seconds, llm_tokens, tts_characters), each naming the conversation; a chat's is one chat_turns transaction. " +
				"Filters: kind (repeatable), created_after, created_before. Amounts as in getCreditBalance.",
			Permission: "billing:read",
			Status:     http.StatusOK,
		}, (*API).listCreditTransactions),
		typed(operation{
			ID: "listAuditEvents", Method: http.MethodGet, Path: "/audit-events", Tag: "Audit",
			Summary: "The audit log: what people, keys and Parley changed in the organization, oldest first",
			Description: "Needs audit:read and a key that reaches every project (403 all_projects_key_required otherwise). A test key reads no audit events: its list is empty (the specification says a test key reads none, not that it is refused). " +
				"Events of the last minute wait for the next page, and every page, the last too, carries next_cursor: keep it and ask again later for what was done since. " +
				"Each event names its actor, action, object, request id and the changed fields, never a secret's value. Events are kept 365 days.",
			Permission: "audit:read",
			Codes:      []string{fault.CodeAllProjectsRequired},
			Status:     http.StatusOK,
		}, (*API).listAuditEvents),
	}
}
