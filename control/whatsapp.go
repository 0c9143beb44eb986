package control

// issue 19: the messaging-app channel's composition: Meta's Graph API (configurable base URL,
// or the fakes), the vault that holds each number's access token and app secret, and the job
// queue's waker.

import (
	"github.com/parley-voice/parley/control/api"
	"github.com/parley-voice/parley/control/app/whatsapp"
	wagraph "github.com/parley-voice/parley/control/channels/whatsapp"
	"github.com/parley-voice/parley/control/jobs"
)

// whatsappSecrets resolves the vault secrets of the channel. It is nil until the vault (issue
// 17) is wired here: the channel then answers 501 whatsapp_unavailable.
var whatsappSecrets func(n *Node) whatsapp.Secrets

// whatsappAPI gives the API the channel's Graph client, secrets and job waker.
func (n *Node) whatsappAPI(a *api.API) {
	base := n.cfg.WhatsAppBaseURL
	if base == "" {
		base = n.cfg.FakesURL // the keyless demo: `parley fakes` serves the Graph API too
	}
	a.WhatsAppGraph = wagraph.New(wagraph.Options{BaseURL: base, Log: n.log})
	a.JobWaker = jobs.NewQueue(n.Store, n.Bus, n.log)
	if whatsappSecrets != nil {
		a.WhatsAppSecrets = whatsappSecrets(n)
	}
}
