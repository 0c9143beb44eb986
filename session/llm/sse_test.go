package llm

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

type sseWant struct{ typ, data string }

// chunkReader returns its input in reads of the given sizes (cycled), to split lines and CRLF
// pairs across reads the way TCP segments do.
type chunkReader struct {
	b     []byte
	sizes []int
	i     int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := r.sizes[r.i%len(r.sizes)]
	r.i++
	n = max(1, min(n, len(p), len(r.b)))
	copy(p, r.b[:n])
	r.b = r.b[n:]
	return n, nil
}

func readAllSSE(t testing.TB, r io.Reader, bufSize int) ([]sseWant, error) {
	s := &sseReader{buf: make([]byte, bufSize)}
	s.reset(r)
	var out []sseWant
	for {
		ev, err := s.next()
		if err != nil {
			if err == io.EOF {
				return out, nil
			}
			return out, err
		}
		out = append(out, sseWant{string(ev.Type), string(ev.Data)})
	}
}

func TestSSEReader(t *testing.T) {
	long := strings.Repeat("x", 10000)
	cases := []struct {
		name string
		in   string
		want []sseWant
	}{
		{"lf", "data: a\n\ndata: b\n\n", []sseWant{{"", "a"}, {"", "b"}}},
		{"crlf", "data: a\r\n\r\ndata: b\r\n\r\n", []sseWant{{"", "a"}, {"", "b"}}},
		{"cr only", "data: a\r\rdata: b\r\r", []sseWant{{"", "a"}, {"", "b"}}},
		{"mixed endings", "data: a\r\n\rdata: b\n\r\n", []sseWant{{"", "a"}, {"", "b"}}},
		{"comments", ": keep-alive\ndata: a\n: more\n\n:\n\n", []sseWant{{"", "a"}}},
		{"multi data lines", "data: {\"a\":\ndata: 1}\n\n", []sseWant{{"", "{\"a\":\n1}"}}},
		{"event type", "event: ping\ndata: {}\n\ndata: x\n\n", []sseWant{{"ping", "{}"}, {"", "x"}}},
		{"type reset without data", "event: lost\n\ndata: x\n\n", []sseWant{{"", "x"}}},
		{"no space after colon", "data:a\n\n", []sseWant{{"", "a"}}},
		{"only one space removed", "data:  a\n\n", []sseWant{{"", " a"}}},
		{"field without colon", "data\n\n", []sseWant{{"", ""}}},
		{"empty data lines", "data\ndata\n\n", []sseWant{{"", "\n"}}},
		{"id retry unknown ignored", "id: 7\nretry: 10\nfoo: bar\ndata: a\n\n", []sseWant{{"", "a"}}},
		{"no data no event", "event: x\nid: 1\n\n", nil},
		{"bom", "\xEF\xBB\xBFdata: a\n\n", []sseWant{{"", "a"}}},
		{"bom only once", "\xEF\xBB\xBFdata: a\n\n\xEF\xBB\xBFdata: b\n\n", []sseWant{{"", "a"}}},
		{"incomplete event dropped", "data: a\n\ndata: b\n", []sseWant{{"", "a"}}},
		{"unterminated line dropped", "data: a\n\ndata: b", []sseWant{{"", "a"}}},
		{"colon in value", "data: a: b\n\n", []sseWant{{"", "a: b"}}},
		{"long line grows buffer", "data: " + long + "\n\n", []sseWant{{"", long}}},
		{"done marker", "data: [DONE]\n\n", []sseWant{{"", "[DONE]"}}},
	}
	for _, c := range cases {
		for _, sizes := range [][]int{{1 << 20}, {1}, {2}, {3, 1, 7}, {5}} {
			got, err := readAllSSE(t, &chunkReader{b: []byte(c.in), sizes: sizes}, 64)
			if err != nil {
				t.Fatalf("%s %v: %v", c.name, sizes, err)
			}
			if !equalEvents(got, c.want) {
				t.Fatalf("%s (reads of %v):\n got %q\nwant %q", c.name, sizes, got, c.want)
			}
		}
	}
}

func equalEvents(a, b []sseWant) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestSSEReaderTooLarge(t *testing.T) {
	s := &sseReader{buf: make([]byte, 16)}
	s.reset(strings.NewReader("data: " + strings.Repeat("x", 100) + "\n\n"))
	s.max = 64
	if _, err := s.next(); !errors.Is(err, errSSETooLarge) {
		t.Fatalf("err = %v, want errSSETooLarge", err)
	}
	// Many data lines, each short, adding up to more than the limit.
	s.reset(strings.NewReader(strings.Repeat("data: xxxxxxxxxx\n", 20) + "\n"))
	s.max = 64
	if _, err := s.next(); !errors.Is(err, errSSETooLarge) {
		t.Fatalf("err = %v, want errSSETooLarge", err)
	}
}

// TestSSEReaderDoesNotWait checks that an event is handed over as soon as its blank line has
// arrived, including after a lone CR, while the connection stays open.
func TestSSEReaderDoesNotWait(t *testing.T) {
	for _, in := range []string{"data: a\n\n", "data: a\r\n\r\n", "data: a\r\r"} {
		pr, pw := io.Pipe()
		writeDone := make(chan struct{})
		go func() {
			defer close(writeDone)
			_, _ = pw.Write([]byte(in))
		}()
		got := make(chan string, 1)
		go func() {
			s := newSSEReader(pr)
			ev, err := s.next()
			if err != nil {
				got <- "error: " + err.Error()
				return
			}
			got <- string(ev.Data)
		}()
		select {
		case d := <-got:
			if d != "a" {
				t.Fatalf("%q: got %q", in, d)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%q: the event was held back waiting for more bytes", in)
		}
		<-writeDone
		_ = pw.Close()
	}
}

// refSSE is a straightforward reading of the WHATWG algorithm over a complete input, used to
// check the incremental reader.
func refSSE(in []byte) []sseWant {
	in = bytes.TrimPrefix(in, bom)
	var out []sseWant
	var data, typ []byte
	has := false
	for len(in) > 0 {
		i := bytes.IndexAny(in, "\r\n")
		if i < 0 {
			break // unterminated last line: discarded with its event
		}
		line := in[:i]
		if in[i] == '\r' && i+1 < len(in) && in[i+1] == '\n' {
			in = in[i+2:]
		} else {
			in = in[i+1:]
		}
		if len(line) == 0 {
			if has {
				out = append(out, sseWant{string(typ), string(data)})
			}
			data, typ, has = nil, nil, false
			continue
		}
		if line[0] == ':' {
			continue
		}
		name, value, found := bytes.Cut(line, []byte(":"))
		if found && len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
		switch string(name) {
		case "data":
			if has {
				data = append(data, '\n')
			}
			data = append(data, value...)
			has = true
		case "event":
			typ = append([]byte(nil), value...)
		}
	}
	return out
}

func FuzzSSEReader(f *testing.F) {
	f.Add([]byte("data: a\n\n"), uint8(1))
	f.Add([]byte("event: x\r\ndata: {\"a\":1}\r\n\r\n: c\r\rdata\r\n\n"), uint8(3))
	f.Add([]byte("\xEF\xBB\xBFdata:b\r\r\ndata: c\n\n"), uint8(2))
	f.Add([]byte("data: [DONE]\n\ndata: x"), uint8(7))
	f.Fuzz(func(t *testing.T, in []byte, chunk uint8) {
		want := refSSE(in)
		sizes := []int{int(chunk%13) + 1, int(chunk/13%5) + 1}
		got, err := readAllSSE(t, &chunkReader{b: append([]byte(nil), in...), sizes: sizes}, 8)
		if err != nil {
			if errors.Is(err, errSSETooLarge) {
				return
			}
			t.Fatalf("unexpected error %v", err)
		}
		if !equalEvents(got, want) {
			t.Fatalf("input %q (reads %v):\n got %q\nwant %q", in, sizes, got, want)
		}
	})
}

// loopReader serves the same bytes forever without allocating.
type loopReader struct {
	b   []byte
	off int
}

func (r *loopReader) Read(p []byte) (int, error) {
	n := copy(p, r.b[r.off:])
	r.off = (r.off + n) % len(r.b)
	return n, nil
}

// BenchmarkSSEParse measures the SSE layer alone: one op is one event of a typical OpenAI text
// chunk, read through 4 KiB reads.
func BenchmarkSSEParse(b *testing.B) {
	ev := `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" hello"},"finish_reason":null}]}` + "\n\n"
	r := &loopReader{b: []byte(strings.Repeat(ev, 64))}
	s := newSSEReader(r)
	b.SetBytes(int64(len(ev)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := s.next(); err != nil {
			b.Fatal(err)
		}
	}
}
