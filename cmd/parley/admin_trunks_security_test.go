package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/store"
)

// TestAdminTrunksEncrypted: `trunks add` with SRTP and TLS material (issue 21): the settings
// show in add and list, the client key never does, and SRTP required over UDP is refused.
func TestAdminTrunksEncrypted(t *testing.T) {
	dataDir := t.TempDir()
	env := []string{"PARLEY_DATA_DIR=" + dataDir, "PARLEY_DATABASE_URL=", "PARLEY_REDIS_URL=", "PARLEY_MASTER_KEY="}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "parley"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, _ := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	kder, _ := x509.MarshalECPrivateKey(key)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	os.WriteFile(keyFile, keyPEM, 0o600)
	out, errOut, code := runCLI(t, env, "admin", "trunks", "add", "--name", "enc", "--uri", "sip:pbx.example:5061",
		"--transport", "tls", "--srtp", "required", "--tls-ca", certFile, "--tls-client-cert", certFile, "--tls-client-key", keyFile, "--json")
	if code != 0 {
		t.Fatalf("add: %d %s", code, errOut)
	}
	var tr map[string]any
	if err := json.Unmarshal([]byte(out), &tr); err != nil {
		t.Fatal(err)
	}
	if tr["srtp"] != "required" || tr["tls_ca_set"] != true || tr["tls_client_cert_set"] != true {
		t.Fatalf("add printed %s", out)
	}
	b64 := strings.Split(string(keyPEM), "\n")[1]
	if strings.Contains(out, b64) {
		t.Fatal("the client key was printed")
	}
	out, _, code = runCLI(t, env, "admin", "trunks", "list")
	if code != 0 || !strings.Contains(out, "required") || strings.Contains(out, b64) {
		t.Fatalf("list: %s", out)
	}
	if _, errOut, code := runCLI(t, env, "admin", "trunks", "add", "--name", "clear", "--uri", "sip:x", "--srtp", "required"); code != 2 || !strings.Contains(errOut, "clear") {
		t.Fatalf("SRTP required over udp: %d %s", code, errOut)
	}
	if _, _, code := runCLI(t, env, "admin", "trunks", "add", "--name", "clear", "--uri", "sip:x", "--srtp", "required", "--srtp-over-clear"); code != 0 {
		t.Fatal("SRTP over clear signalling, allowed explicitly")
	}

	// A registering trunk: its settings, then the state a node recorded, in list.
	out, errOut, code = runCLI(t, env, "admin", "trunks", "add", "--name", "pbx", "--uri", "sip:pbx.example", "--username", "1001",
		"--password", "pw", "--register", "sip:pbx.example", "--register-aor", "sip:1001@pbx.example", "--register-expires", "120", "--json")
	if code != 0 || !strings.Contains(out, `"aor": "sip:1001@pbx.example"`) {
		t.Fatalf("add registering trunk: %d %s %s", code, out, errOut)
	}
	if out, _, _ := runCLI(t, env, "admin", "trunks", "list"); !strings.Contains(out, "pending") {
		t.Fatalf("list before any node: %s", out)
	}
	st, err := store.Open(t.Context(), store.Options{DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	pbx, err := st.FindTrunkByName(t.Context(), "pbx")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SetRegistrationState(t.Context(), store.RegistrationState{TrunkID: pbx.ID, NodeID: "node-a", State: store.RegRegistered, Registrar: "sip:pbx.example"}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if out, _, _ := runCLI(t, env, "admin", "trunks", "list"); !strings.Contains(out, "registered@node-a") {
		t.Fatalf("list: %s", out)
	}
	if _, errOut, code := runCLI(t, env, "admin", "trunks", "add", "--name", "bad", "--uri", "sip:x", "--register", "sip:x"); code != 2 || !strings.Contains(errOut, "AOR") {
		t.Fatalf("registration without AOR: %d %s", code, errOut)
	}
}
