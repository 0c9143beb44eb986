package control

// issue 21: a media node registers the trunks that carry a registration, records each
// binding's state in the store (`parley admin trunks list` shows it) with a trunk.registration
// event to the projects that have numbers on the trunk, counts it in metrics and logs each
// change. Each node keeps its own binding, with a +sip.instance derived from its
// node id (stable across restarts): see sip/register.go for why.

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/sip"
)

// regMetrics are the registration collectors: labels trunk (operator-configured, few) and a
// fixed state set.
type regMetrics struct {
	state   *prometheus.GaugeVec   // trunk, state: 1 for the current state
	changes *prometheus.CounterVec // state
}

func newRegMetrics(reg *prometheus.Registry) *regMetrics {
	m := &regMetrics{
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "parley_sip_registration_state", Help: "1 for the current state of this node's registration of each trunk.",
		}, []string{"trunk", "state"}),
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_sip_registration_changes_total", Help: "Registration state changes on this node, by new state.",
		}, []string{"state"}),
	}
	if reg != nil {
		reg.MustRegister(m.state, m.changes)
	}
	return m
}

// instanceID is the node's +sip.instance: a name-based UUID of its node id.
func instanceID(nodeID string) string {
	return uuid.NewSHA1(uuid.NameSpaceURL, []byte("parley-node:"+nodeID)).String()
}

// onRegistration records a registration state change.
func (n *Node) onRegistration(st sip.RegistrationStatus) {
	m := n.media
	if m == nil {
		return
	}
	if m.reg != nil {
		for _, s := range []sip.RegState{sip.RegRegistering, sip.RegRegistered, sip.RegFailed, sip.RegUnregistered} {
			v := 0.0
			if s == st.State {
				v = 1
			}
			m.reg.state.WithLabelValues(st.Trunk, string(s)).Set(v)
		}
		m.reg.changes.WithLabelValues(string(st.State)).Inc()
	}
	t, err := m.trunks.Lookup(st.Trunk)
	if err != nil || t.ID == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rs := store.RegistrationState{TrunkID: store.TrunkID(t.ID), NodeID: n.cfg.NodeID, State: string(st.State),
		Registrar: st.Registrar, Error: st.Error}
	if st.State == sip.RegRegistered && !st.Expires.IsZero() {
		exp := st.Expires
		rs.ExpiresAt = &exp
	}
	tr, err := n.Store.GetTrunk(ctx, store.TrunkID(t.ID))
	if err != nil {
		return
	}
	if _, err := n.Store.RecordRegistrationState(ctx, tr, rs); err != nil {
		n.log.Warn("sip: registration state not recorded", "trunk", st.Trunk, "err", err)
	}
}

// registrationRefresh is how often a node looks for trunks whose registration changed.
const registrationRefresh = 30 * time.Second

// keepRegistrations registers the trunks that carry a registration until ctx ends, following
// the store's changes (a trunk added, removed or changed).
func (m *mediaServices) keepRegistrations(ctx context.Context) {
	active := map[string]string{} // trunk name → its registration settings
	t := time.NewTicker(registrationRefresh)
	defer t.Stop()
	for {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		trunks, err := m.trunks.load(lctx)
		cancel()
		if err == nil {
			seen := map[string]bool{}
			for _, tr := range trunks {
				if tr.Registration == nil {
					continue
				}
				seen[tr.Name] = true
				key := fmt.Sprintf("%+v|%s|%s", *tr.Registration, tr.Username, tr.Password)
				if active[tr.Name] == key {
					continue
				}
				if err := m.sip.Register(tr); err == nil {
					active[tr.Name] = key
				}
			}
			for name := range active {
				if !seen[name] {
					m.sip.Unregister(name)
					delete(active, name)
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// toSIPRegistration is the trunk's registration, nil when it does not register.
func toSIPRegistration(t store.Trunk) *sip.Registration {
	r := t.TrunkRegistration
	if r.Registrar == "" {
		return nil
	}
	return &sip.Registration{Registrar: r.Registrar, Backup: r.Backup, AOR: r.AOR, Proxy: r.Proxy,
		Expires: time.Duration(r.Expires) * time.Second}
}
