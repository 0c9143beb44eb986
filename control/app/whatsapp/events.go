package whatsapp

import "github.com/parley-voice/parley/control/app/events"

// MessageFailedData is the data of whatsapp.message.failed.
type MessageFailedData struct {
	ConversationID string `json:"conversation_id" jsonschema:"format=uuid"`
	MessageID      string `json:"message_id" doc:"Parley's id of the message." jsonschema:"format=uuid"`
	WAMID          string `json:"wamid" doc:"Meta's id of the message."`
	ErrorCode      *int   `json:"error_code" doc:"Meta's error code (for example 131047: the 24-hour window had closed); null when Meta gave none." jsonschema:"nullable"`
	ErrorTitle     string `json:"error_title" doc:"Meta's title of the error."`
	Channel        string `json:"channel" jsonschema:"enum=whatsapp"`
}

// The messaging-app channel's event (issue 19), registered in the event catalogue (issue 14).
func init() {
	events.Register("whatsapp.message.failed", "A message Parley sent on WhatsApp was reported failed by Meta (a status update), or could not be sent after its retries.", MessageFailedData{})
}
