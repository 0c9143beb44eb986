package stt

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// wsEcho is a gorilla server that reads every message the client sends and hands it over.
func wsEcho(t testing.TB) (*websocket.Conn, <-chan [2][]byte) {
	t.Helper()
	got := make(chan [2][]byte, 16)
	done := make(chan struct{})
	up := websocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(done)
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		for {
			mt, data, err := c.ReadMessage()
			if err != nil {
				close(got)
				return
			}
			got <- [2][]byte{{byte(mt)}, data}
		}
	}))
	var d websocket.Dialer
	c, _, err := d.DialContext(context.Background(), "ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		<-done
		srv.Close()
	})
	return c, got
}

// TestWSFrameReadByGorilla: messages framed by wsFrame, of every header size, read back intact
// through a standard server (gorilla's Upgrader checks the mask bit and unmasks, RFC 6455 §5.3).
func TestWSFrameReadByGorilla(t *testing.T) {
	c, got := wsEcho(t)
	f := newWSFrame(64)
	for _, n := range []int{0, 1, 7, 8, 125, 126, 127, 3200, 65535, 65536, 70001} {
		for _, op := range []byte{wsOpBinary, wsOpText} {
			want := make([]byte, n)
			for i := range want {
				want[i] = 'a' + byte(i*7%26)
			}
			f.buf = append(f.buf[:wsMaxHeader], want...)
			if err := f.writeTo(c.NetConn(), op, time.Now().Add(5*time.Second)); err != nil {
				t.Fatal(err)
			}
			select {
			case m := <-got:
				if int(m[0][0]) != int(op) || !bytes.Equal(m[1], want) {
					t.Fatalf("%d bytes, opcode %d: server read opcode %d, %d bytes (equal %v)", n, op, m[0][0], len(m[1]), bytes.Equal(m[1], want))
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("%d bytes: nothing read", n)
			}
		}
	}
	// Gorilla's own writes (a close frame here) still work on the same connection.
	if err := c.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "")); err != nil {
		t.Fatal(err)
	}
}

// TestMaskBytes checks the word-at-a-time masking against the byte-wise definition (§5.3:
// octet i is XORed with octet i mod 4 of the key) at every length and offset of the tail.
func TestMaskBytes(t *testing.T) {
	const key = 0xA1B2C3D4
	k := [4]byte{0xD4, 0xC3, 0xB2, 0xA1} // the key's octets as they go on the wire
	for n := 0; n < 40; n++ {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(i * 31)
		}
		maskBytes(p, key)
		for i := range p {
			if want := byte(i*31) ^ k[i%4]; p[i] != want {
				t.Fatalf("len %d: byte %d = %#x, want %#x", n, i, p[i], want)
			}
		}
	}
	var hdr [wsMaxHeader]byte
	f := wsFrame{buf: append(hdr[:], 1, 2, 3)}
	b := f.frame(wsOpBinary, key)
	if !bytes.Equal(b[2:6], k[:]) {
		t.Errorf("mask key on the wire % x, want % x", b[2:6], k)
	}
}

// TestWSFrameWriteAllocs: sending a 100 ms message on a live loopback connection allocates
// nothing. The server reads raw bytes (rawSink), so that its own allocations are not counted.
func TestWSFrameWriteAllocs(t *testing.T) {
	u, _ := rawSink(t)
	var d websocket.Dialer
	c, _, err := d.DialContext(context.Background(), "ws"+strings.TrimPrefix(u, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	f := newWSFrame(3200)
	payload := make([]byte, 3200)
	deadline := time.Now().Add(time.Minute)
	if n := testing.AllocsPerRun(200, func() {
		f.buf = append(f.buf[:wsMaxHeader], payload...)
		if err := f.writeTo(c.NetConn(), wsOpBinary, deadline); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("%v allocs per message", n)
	}
}
