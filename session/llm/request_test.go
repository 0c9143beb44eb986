package llm

import (
	"testing"
)

func TestImageSources(t *testing.T) {
	cases := []struct {
		im             Image
		url, mt, data  string
		remote, hasErr bool
	}{
		{im: Image{MIME: "image/png", Data: []byte("PNG")}, url: "data:image/png;base64,UE5H", mt: "image/png", data: "UE5H"},
		{im: Image{URL: "data:image/jpeg;base64,AAAA"}, url: "data:image/jpeg;base64,AAAA", mt: "image/jpeg", data: "AAAA"},
		{im: Image{URL: "data:image/jpeg;charset=x;base64,AAAA"}, url: "data:image/jpeg;charset=x;base64,AAAA", mt: "image/jpeg", data: "AAAA"},
		{im: Image{URL: "data:;base64,AAAA", MIME: "image/gif"}, url: "data:;base64,AAAA", mt: "image/gif", data: "AAAA"},
		{im: Image{URL: "https://x/y.png"}, url: "https://x/y.png", remote: true},
	}
	for _, c := range cases {
		u, err := c.im.dataURL()
		if err != nil || u != c.url {
			t.Fatalf("%+v: dataURL %q %v", c.im, u, err)
		}
		mt, data, ok, err := c.im.base64Source()
		if err != nil || ok == c.remote || mt != c.mt || data != c.data {
			t.Fatalf("%+v: base64Source %q %q %v %v", c.im, mt, data, ok, err)
		}
	}
	for _, bad := range []Image{{}, {Data: []byte{1}}, {URL: "data:image/png,abc"}, {URL: "data:;base64,AAAA"}} {
		if _, _, _, err := bad.base64Source(); err == nil {
			t.Fatalf("%+v: no error", bad)
		}
	}
}

func TestEventKindString(t *testing.T) {
	for k, want := range map[EventKind]string{TextDelta: "TextDelta", ToolCallEvent: "ToolCall", Done: "Done", 0: "EventKind(0)"} {
		if k.String() != want {
			t.Fatal(k.String())
		}
	}
}
