package campaigns

import "github.com/parley-voice/parley/control/app/events"

// CampaignEventData is the data of the campaign events (campaignEvent writes it as an object
// with these members; the optional ones appear on the events that say so).
type CampaignEventData struct {
	CampaignID string          `json:"campaign_id" jsonschema:"format=uuid"`
	Name       string          `json:"name"`
	Status     string          `json:"status" doc:"The campaign's status after the event."`
	StartAt    *string         `json:"start_at,omitempty" doc:"campaign.started of a scheduled campaign: when it was due." jsonschema:"format=date-time"`
	Contacts   *CampaignCounts `json:"contacts,omitempty" doc:"campaign.completed: how many contacts ended in each state."`
	Reason     string          `json:"reason,omitempty" doc:"campaign.paused by the circuit breaker: why, for a person."`
	Code       string          `json:"code,omitempty" doc:"campaign.paused by the circuit breaker: the cause shared by the failing attempts."`
	By         string          `json:"by,omitempty" doc:"campaign.paused: circuit_breaker when the campaign paused itself." jsonschema:"enum=circuit_breaker"`
}

// ContactFinishedData is the data of campaign.contact_finished.
type ContactFinishedData struct {
	CampaignEventData
	CampaignContactID string  `json:"campaign_contact_id" jsonschema:"format=uuid"`
	ContactID         *string `json:"contact_id" doc:"The contact it was made from; null for a contact given inline." jsonschema:"format=uuid,nullable"`
	ToNumber          string  `json:"to_number"`
	Outcome           string  `json:"outcome" doc:"The contact's final state: completed, no_answer, busy, voicemail, failed, skipped_dnc or cancelled."`
	Detail            string  `json:"detail,omitempty"`
	Attempts          int     `json:"attempts"`
	ConversationID    *string `json:"conversation_id,omitempty" doc:"The last attempt's conversation, when one was placed." jsonschema:"format=uuid"`
}

// The campaign events (issue 15), registered in the event catalogue (issue 14) so that
// receivers can subscribe to them and the OpenAPI document's webhooks section shows them.
func init() {
	events.Register("campaign.started", "A campaign started dialling (at once, at its start_at, or by /start).", CampaignEventData{})
	events.Register("campaign.paused", "A campaign was paused: by /pause, or by itself when most recent attempts failed for one cause (by: circuit_breaker, with reason and code).", CampaignEventData{})
	events.Register("campaign.resumed", "A paused campaign was resumed.", CampaignEventData{})
	events.Register("campaign.completed", "Every contact of a campaign reached a final state.", CampaignEventData{})
	events.Register("campaign.cancelled", "A campaign was cancelled: nothing new is dialled; calls in progress carry on.", CampaignEventData{})
	events.Register("campaign.contact_finished", "A campaign contact reached its final state (outcome), after its last attempt.", ContactFinishedData{})
}
