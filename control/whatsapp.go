package control

// issue 19: the messaging-app channel's composition: Meta's Graph API (configurable base URL,
// or the fakes) and the job queue's waker. Its secrets come from the vault (the API builds
// that adapter from the node's master key).

import (
	"github.com/parley-voice/parley/control/api"
	wagraph "github.com/parley-voice/parley/control/channels/whatsapp"
	"github.com/parley-voice/parley/control/jobs"
)

// whatsappAPI gives the API the channel's Graph client and job waker.
func (n *Node) whatsappAPI(a *api.API) {
	base := n.cfg.WhatsAppBaseURL
	if base == "" {
		base = n.cfg.FakesURL // the keyless demo: `parley fakes` serves the Graph API too
	}
	a.WhatsAppGraph = wagraph.New(wagraph.Options{BaseURL: base, Log: n.log})
	a.JobWaker = jobs.NewQueue(n.Store, n.Bus, n.log)
}
