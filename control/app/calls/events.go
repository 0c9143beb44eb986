package calls

import "github.com/parley-voice/parley/control/app/events"

// The events of scheduled calls (issue 14), registered in the event catalogue from here.
const (
	EventScheduledPlaced = "scheduled_call.placed"
	EventScheduledFailed = "scheduled_call.failed"
)

func init() {
	events.Register(EventScheduledPlaced, "A scheduled call was placed: conversation_id names its conversation, which sends the usual conversation events.", ScheduledCall{})
	events.Register(EventScheduledFailed, "A scheduled call could not be placed: failure_code and failure_reason say why.", ScheduledCall{})
}
