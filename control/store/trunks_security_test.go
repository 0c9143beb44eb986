package store_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/store"
)

// TestTrunkSecurity runs the trunks' SRTP and TLS settings against both engines (issue 21).
func TestTrunkSecurity(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		testTrunkSecurity(t, openSQLite(t))
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		testTrunkSecurity(t, postgresOpener(t)(t))
	})
}

func selfSigned(t *testing.T) (certPEM, keyPEM string) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "pbx"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}))
}

func testTrunkSecurity(t *testing.T, s *store.Store) {
	ctx := t.Context()
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	box := testBox(t)
	cert, key := selfSigned(t)
	tr, err := s.CreateTrunk(ctx, box, store.NewTrunk{Name: "secure", URI: "sips:pbx.example.com", Transport: "tls",
		NewTrunkSecurity: store.NewTrunkSecurity{SRTP: "Required", TLSCA: cert, TLSClientCert: cert, TLSClientKey: key}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.GetTrunk(ctx, tr.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.SRTP != "required" || got.TLSCA != cert || got.TLSClientCert != cert || !got.HasClientCert() || got.SRTPOverClear {
		t.Fatalf("trunk %+v", got.TrunkSecurity)
	}
	if strings.Contains(got.TLSClientKeySealed, "PRIVATE KEY") {
		t.Fatal("the client key is stored in clear")
	}
	if k, err := got.TLSClientKey(box); err != nil || k != key {
		t.Fatalf("client key does not open: %v", err)
	}
	// A plain trunk defaults to disabled and has no client key.
	plain, err := s.CreateTrunk(ctx, nil, store.NewTrunk{Name: "plain", URI: "sip:10.0.0.5"})
	if err != nil {
		t.Fatal(err)
	}
	if plain.SRTP != "disabled" || plain.HasClientCert() {
		t.Fatalf("plain %+v", plain.TrunkSecurity)
	}
	over, err := s.CreateTrunk(ctx, nil, store.NewTrunk{Name: "over", URI: "sip:10.0.0.6",
		NewTrunkSecurity: store.NewTrunkSecurity{SRTP: "required", SRTPOverClear: true}})
	if err != nil || !over.SRTPOverClear {
		t.Fatalf("srtp over clear: %v", err)
	}
	for name, bad := range map[string]store.NewTrunk{
		"unknown mode":      {Name: "b1", URI: "sip:x", NewTrunkSecurity: store.NewTrunkSecurity{SRTP: "maybe"}},
		"required over udp": {Name: "b2", URI: "sip:x", NewTrunkSecurity: store.NewTrunkSecurity{SRTP: "required"}},
		"CA not PEM":        {Name: "b3", URI: "sip:x", Transport: "tls", NewTrunkSecurity: store.NewTrunkSecurity{TLSCA: "junk"}},
		"cert without key":  {Name: "b4", URI: "sip:x", Transport: "tls", NewTrunkSecurity: store.NewTrunkSecurity{TLSClientCert: cert}},
		"mismatched key":    {Name: "b5", URI: "sip:x", Transport: "tls", NewTrunkSecurity: store.NewTrunkSecurity{TLSClientCert: cert, TLSClientKey: func() string { _, k := selfSigned(t); return k }()}},
	} {
		_, err := s.CreateTrunk(ctx, box, bad)
		if !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
		if err != nil && strings.Contains(err.Error(), "PRIVATE KEY") {
			t.Errorf("%s: the error quotes the key", name)
		}
	}
	testTrunkRegistration(t, s)
	if _, err := s.CreateTrunk(ctx, nil, store.NewTrunk{Name: "nobox", URI: "sip:x", Transport: "tls",
		NewTrunkSecurity: store.NewTrunkSecurity{TLSClientCert: cert, TLSClientKey: key}}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("client key without a master key: %v", err)
	}
}

func testTrunkRegistration(t *testing.T, s *store.Store) {
	ctx := t.Context()
	reg := store.TrunkRegistration{Registrar: "sip:pbx.example.com", Backup: "sip:pbx2.example.com:5080", AOR: "sip:1001@pbx.example.com", Expires: 120}
	tr, err := s.CreateTrunk(ctx, nil, store.NewTrunk{Name: "reg", URI: "sip:pbx.example.com", TrunkRegistration: reg})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.GetTrunk(ctx, tr.ID)
	if err != nil || got.TrunkRegistration != reg {
		t.Fatalf("registration %+v %v", got.TrunkRegistration, err)
	}
	for name, bad := range map[string]store.TrunkRegistration{
		"no AOR":           {Registrar: "sip:x"},
		"AOR without user": {Registrar: "sip:x", AOR: "sip:x"},
		"not a URI":        {Registrar: "http://x", AOR: "sip:a@x"},
		"expiry":           {Registrar: "sip:x", AOR: "sip:a@x", Expires: 90000},
		"no registrar":     {AOR: "sip:a@x"},
	} {
		if _, err := s.CreateTrunk(ctx, nil, store.NewTrunk{Name: "r-" + strings.ReplaceAll(name, " ", "-"), URI: "sip:x", TrunkRegistration: bad}); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
	exp := time.Now().Add(time.Minute).UTC().Truncate(time.Second)
	for _, st := range []store.RegistrationState{
		{TrunkID: tr.ID, NodeID: "n1", State: store.RegFailed, Registrar: reg.Registrar, Error: "no answer"},
		{TrunkID: tr.ID, NodeID: "n1", State: store.RegRegistered, Registrar: reg.Backup, ExpiresAt: &exp},
		{TrunkID: tr.ID, NodeID: "n2", State: store.RegRegistering, Registrar: reg.Registrar},
	} {
		if err := s.SetRegistrationState(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SetRegistrationState(ctx, store.RegistrationState{TrunkID: tr.ID, NodeID: "n1", State: "bogus"}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("bad state: %v", err)
	}
	sts, err := s.ListRegistrationStates(ctx)
	if err != nil || len(sts) != 2 {
		t.Fatalf("states %+v %v", sts, err)
	}
	if sts[0].NodeID != "n1" || sts[0].State != store.RegRegistered || sts[0].Registrar != reg.Backup || sts[0].Error != "" ||
		sts[0].ExpiresAt == nil || !sts[0].ExpiresAt.Equal(exp) {
		t.Fatalf("n1 %+v", sts[0])
	}
	// A change is an event to each project with numbers on the trunk; the same state again is
	// none.
	org, err := s.CreateOrg(ctx, "reg-org")
	if err != nil {
		t.Fatal(err)
	}
	proj, err := s.CreateProject(ctx, org.ID, "p")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreatePhoneNumber(ctx, store.NewPhoneNumber{OrgID: org.ID, ProjectID: proj.ID, Number: "+14155550177", Trunk: "reg"}); err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, false} {
		changed, err := s.RecordRegistrationState(ctx, tr, store.RegistrationState{NodeID: "n3", State: store.RegFailed, Registrar: reg.Registrar, Error: "403 Forbidden"})
		if err != nil || changed != want {
			t.Fatalf("record %d: changed %v err %v", i, changed, err)
		}
	}
	evs, err := s.ListEvents(ctx, org.ID, store.ModeLive, "", 10)
	if err != nil || len(evs) != 1 || evs[0].Type != "trunk.registration" || evs[0].ProjectID != proj.ID {
		t.Fatalf("events %+v %v", evs, err)
	}
	var data map[string]any
	if err := json.Unmarshal(evs[0].Data, &data); err != nil || data["state"] != "failed" || data["node"] != "n3" || data["trunk"] != "reg" {
		t.Fatalf("event data %s", evs[0].Data)
	}
	// Removing the trunk removes its states.
	if err := s.DeleteTrunk(ctx, tr.ID); err != nil {
		t.Fatal(err)
	}
	if sts, _ := s.ListRegistrationStates(ctx); len(sts) != 0 {
		t.Fatalf("states left %+v", sts)
	}
}
