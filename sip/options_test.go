package sip

import (
	"errors"
	"testing"
	"time"

	"github.com/parley-voice/parley/codec"
	"github.com/parley-voice/parley/media"
)

func TestOptionsDefaults(t *testing.T) {
	o, err := Options{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if o.Addr != ":5060" || o.MediaTimeout != DefaultMediaTimeout || o.SessionExpires != DefaultSessionExpires ||
		o.MinSE != DefaultMinSE || len(o.Codecs) != 4 || o.RTPPorts != media.DefaultPortRange || o.UserAgent != "Parley" {
		t.Errorf("defaults %+v", o)
	}
	for _, bad := range []Options{
		{RTPPorts: media.PortRange{Min: 10, Max: 5}},
		{SessionExpires: time.Minute, MinSE: 2 * time.Minute},
		{TLSCertFile: "cert.pem"},
		{Codecs: []codec.Info{{Name: "GSM", ClockRate: 8000}}},
	} {
		if _, err := bad.withDefaults(); !errors.Is(err, ErrBadOptions) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}

func TestCodecsByName(t *testing.T) {
	got, err := CodecsByName([]string{"opus", " g722", "PCMU", "telephone-event", ""})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].Name != "opus" || got[1].Name != "G722" || got[2].Name != "PCMU" {
		t.Errorf("%+v", got)
	}
	if _, err := CodecsByName([]string{"GSM"}); err == nil {
		t.Error("unknown codec accepted")
	}
}
