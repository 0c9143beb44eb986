package config

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"strings"
	"testing"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestDefaults(t *testing.T) {
	c, rest, err := Parse("parley serve", ScopeServe, nil, env(nil), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTPAddr != ":8080" || c.DataDir != "./data" || c.SIPAddr != ":5060" || c.RTPPorts != (PortRange{10000, 20000}) {
		t.Fatalf("defaults: %+v", c)
	}
	if !c.Roles.Has(RoleAPI) || !c.Roles.Has(RoleMedia) || !c.Roles.Has(RoleWorker) || c.Roles.String() != "api,media,worker" {
		t.Fatalf("roles: %v", c.Roles)
	}
	if c.BaseURL != "http://localhost:8080" || !c.UsesSQLite() || len(rest) != 0 {
		t.Fatalf("base url %q sqlite %v rest %v", c.BaseURL, c.UsesSQLite(), rest)
	}
}

func TestFlagBeatsEnvBeatsDefault(t *testing.T) {
	e := env(map[string]string{"PARLEY_HTTP_ADDR": ":9000", "PARLEY_ROLES": "api", "PARLEY_DATABASE_URL": "postgres://u@h/db"})
	c, _, err := Parse("parley serve", ScopeServe, []string{"--http-addr", "127.0.0.1:9100"}, e, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTPAddr != "127.0.0.1:9100" {
		t.Errorf("flag should win: %q", c.HTTPAddr)
	}
	if c.Roles.String() != "api" || c.UsesSQLite() {
		t.Errorf("env not applied: roles %v db %q", c.Roles, c.DatabaseURL)
	}
}

func TestBadSettingNamesItself(t *testing.T) {
	cases := []struct {
		env  map[string]string
		args []string
		want string
	}{
		{map[string]string{"PARLEY_RTP_PORTS": "abc"}, nil, "PARLEY_RTP_PORTS"},
		{nil, []string{"--rtp-ports", "20000-10000"}, "--rtp-ports"},
		{map[string]string{"PARLEY_ROLES": "api,cook"}, nil, "PARLEY_ROLES"},
		{map[string]string{"PARLEY_DATABASE_URL": "mysql://x"}, nil, "PARLEY_DATABASE_URL"},
		{map[string]string{"PARLEY_REDIS_URL": "http://x"}, nil, "PARLEY_REDIS_URL"},
		{map[string]string{"PARLEY_PUBLIC_IP": "not-an-ip"}, nil, "PARLEY_PUBLIC_IP"},
		{map[string]string{"PARLEY_MASTER_KEY": "short"}, nil, "PARLEY_MASTER_KEY"},
		{map[string]string{"PARLEY_LOG_LEVEL": "loud"}, nil, "PARLEY_LOG_LEVEL"},
		{map[string]string{"PARLEY_HTTP_ADDR": "8080"}, nil, "PARLEY_HTTP_ADDR"},
		{map[string]string{"PARLEY_WEBRTC_UDP_PORT": "70000"}, nil, "PARLEY_WEBRTC_UDP_PORT"},
		{map[string]string{"PARLEY_BASE_URL": "ftp://x"}, nil, "PARLEY_BASE_URL"},
		{map[string]string{"PARLEY_SIP_TLS_CERT": "/c.pem"}, nil, "PARLEY_SIP_TLS"},
		{map[string]string{"PARLEY_OPUS_COMPLEXITY": "11"}, nil, "PARLEY_OPUS_COMPLEXITY"},
		{nil, []string{"--opus-complexity", "0"}, "--opus-complexity"},
		{map[string]string{"PARLEY_GC_PERCENT": "0"}, nil, "PARLEY_GC_PERCENT"},
		{map[string]string{"PARLEY_OUTBOUND_CA_FILE": "/nonexistent/ca.pem"}, nil, "PARLEY_OUTBOUND_CA_FILE"},
		{map[string]string{"PARLEY_OUTBOUND_ALLOW_PRIVATE": "maybe"}, nil, "PARLEY_OUTBOUND_ALLOW_PRIVATE"},
		{map[string]string{"PARLEY_SIP_TLS_CLIENT_AUTH": "optional"}, nil, "PARLEY_SIP_TLS_CLIENT_AUTH"}, // issue 21
	}
	for _, tc := range cases {
		_, _, err := Parse("parley serve", ScopeServe, tc.args, env(tc.env), nil, nil)
		if err == nil {
			t.Errorf("%v %v: no error", tc.env, tc.args)
			continue
		}
		var ce *Error
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v %v: error %q should be one line naming %s", tc.env, tc.args, err, tc.want)
		}
	}
}

func TestHelpListsEverySettingWithDefault(t *testing.T) {
	var buf bytes.Buffer
	_, _, err := Parse("parley serve", ScopeServe, []string{"--help"}, env(nil), &buf, nil)
	if !errors.Is(err, ErrHelp) {
		t.Fatalf("err = %v", err)
	}
	for _, s := range settings() {
		if !strings.Contains(buf.String(), "--"+s.flag) || !strings.Contains(buf.String(), s.env) {
			t.Errorf("help lacks %s / %s", s.flag, s.env)
		}
	}
	if !strings.Contains(buf.String(), "default 10000-20000") {
		t.Errorf("help lacks defaults:\n%s", buf.String())
	}
}

func TestStoreScopeOmitsServeSettings(t *testing.T) {
	_, _, err := Parse("parley migrate", ScopeStore, []string{"--http-addr", ":1"}, env(nil), nil, nil)
	if err == nil {
		t.Fatal("migrate should not take --http-addr")
	}
	c, _, err := Parse("parley migrate", ScopeStore, []string{"--data-dir", "/tmp/x"}, env(nil), nil, nil)
	if err != nil || c.DataDir != "/tmp/x" {
		t.Fatalf("%v %+v", err, c)
	}
}

func TestReferenceTable(t *testing.T) {
	ref := Reference()
	if !strings.Contains(ref, "`PARLEY_WEBRTC_UDP_PORT`") || strings.Count(ref, "\n") != len(settings())+2 {
		t.Fatalf("reference table:\n%s", ref)
	}
}

func TestInterleavedPositionals(t *testing.T) {
	var asJSON bool
	extra := func(fs *flag.FlagSet) { fs.BoolVar(&asJSON, "json", false, "") }
	_, rest, err := Parse("parley admin orgs freeze", ScopeStore, []string{"abc", "--json", "--data-dir", "/x", "def"}, env(nil), nil, extra)
	if err != nil || !asJSON || len(rest) != 2 || rest[0] != "abc" || rest[1] != "def" {
		t.Fatalf("rest=%v json=%v err=%v", rest, asJSON, err)
	}
}

func TestBoolSettingAsBareFlag(t *testing.T) {
	c, _, err := Parse("parley serve", ScopeServe, []string{"--pprof"}, env(nil), nil, nil)
	if err != nil || !c.Pprof {
		t.Fatalf("--pprof: %v %v", err, c)
	}
	c, _, err = Parse("parley serve", ScopeServe, nil, env(map[string]string{"PARLEY_PPROF": "true"}), nil, nil)
	if err != nil || !c.Pprof {
		t.Fatalf("PARLEY_PPROF: %v", err)
	}
}

func TestBaseURLFollowsTheListener(t *testing.T) {
	for addr, want := range map[string]string{
		":8080":          "http://localhost:8080",
		"0.0.0.0:8080":   "http://localhost:8080",
		"127.0.0.1:9090": "http://127.0.0.1:9090",
		"[::1]:7000":     "http://[::1]:7000",
		"[::]:7000":      "http://localhost:7000",
	} {
		c, _, err := Parse("test", ScopeServe, []string{"--http-addr", addr}, env(nil), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.BaseURL != want {
			t.Errorf("--http-addr %s: base URL %q, want %q", addr, c.BaseURL, want)
		}
	}
}

// TestTransferAllow: PARLEY_TRANSFER_ALLOW takes CIDRs and bare addresses; junk names itself.
func TestTransferAllow(t *testing.T) {
	c, _, err := Parse("parley serve", ScopeServe, nil, env(map[string]string{"PARLEY_TRANSFER_ALLOW": "10.0.0.0/8, 192.168.1.7,fd00::/8"}), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(c.TransferAllow); got != "[10.0.0.0/8 192.168.1.7/32 fd00::/8]" {
		t.Errorf("TransferAllow %s", got)
	}
	if _, _, err := Parse("parley serve", ScopeServe, []string{"--transfer-allow", "lan"}, env(nil), nil, nil); err == nil || !strings.Contains(err.Error(), "transfer-allow") {
		t.Errorf("a bad allow-list: %v", err)
	}
}

// TestMediaBindIP: issue 22 item 10: the media sockets bind PARLEY_MEDIA_ADDR, else the SIP
// listener's host when it names one, else every interface.
func TestMediaBindIP(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--sip-addr", "127.0.0.1:5060"}, "127.0.0.1"},
		{[]string{"--sip-addr", ":5060"}, "invalid IP"},
		{[]string{"--sip-addr", "0.0.0.0:5060"}, "invalid IP"},
		{[]string{"--sip-addr", "127.0.0.1:5060", "--media-addr", "10.0.0.5"}, "10.0.0.5"},
	} {
		cfg, _, err := Parse("parley serve", ScopeServe, c.args, env(nil), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.MediaBindIP().String(); got != c.want {
			t.Errorf("%v: media binds %s, want %s", c.args, got, c.want)
		}
	}
}
