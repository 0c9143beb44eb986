package control

import (
	"context"
	"io"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/parley-voice/parley/control/secrets"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/sip/siptest"
)

// TestNodeRegistersTrunks (issue 21): a media node registers a trunk that carries a
// registration to Kamailio, records the state in the store (what `parley admin trunks list`
// shows) and in its metrics, and un-registers when it stops.
func TestNodeRegistersTrunks(t *testing.T) {
	k := siptest.NewKamailio(t)
	ctx := context.Background()
	n, err := NewNode(ctx, testConfig(t), quietLog(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	key, _, err := secrets.LoadKey("", n.cfg.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	box, _ := secrets.NewBox(key)
	tr, err := n.Store.CreateTrunk(ctx, box, store.NewTrunk{Name: "pbx", URI: k.URI(), Username: "parley", Password: siptest.KamailioPassword,
		TrunkRegistration: store.TrunkRegistration{Registrar: k.URI(), AOR: "sip:+14155550100@parley.test", Expires: 60}})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	runErr := make(chan error, 1)
	go func() { runErr <- n.Run(rctx) }()
	state := func() string {
		sts, err := n.Store.ListRegistrationStates(ctx)
		if err != nil || len(sts) != 1 || sts[0].TrunkID != tr.ID {
			return ""
		}
		return sts[0].State
	}
	deadline := time.Now().Add(15 * time.Second)
	for state() != store.RegRegistered {
		if time.Now().After(deadline) {
			t.Fatalf("not registered: %q\n%s", state(), k.Output())
		}
		time.Sleep(50 * time.Millisecond)
	}
	var m dto.Metric
	if err := n.media.reg.state.WithLabelValues("pbx", "registered").Write(&m); err != nil || m.GetGauge().GetValue() != 1 {
		t.Errorf("metric parley_sip_registration_state{state=registered} = %v (%v)", m.GetGauge().GetValue(), err)
	}
	cancel()
	if err := <-runErr; err != nil {
		t.Fatalf("Run: %v", err)
	}
	sts, err := n.Store.ListRegistrationStates(ctx)
	if err == nil && len(sts) == 1 && sts[0].State != store.RegUnregistered {
		t.Errorf("after shutdown: %q", sts[0].State)
	}
}
