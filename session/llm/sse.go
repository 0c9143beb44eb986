package llm

import (
	"bytes"
	"errors"
	"io"
)

// errSSETooLarge is returned when one line or one event's data exceeds the reader's limit.
var errSSETooLarge = errors.New("llm: server-sent event exceeds the size limit")

// defaultSSEMax bounds a single line and a single event's data. Tool-call arguments and long
// deltas fit easily; a hostile or broken server cannot make the reader grow without bound.
const defaultSSEMax = 8 << 20

// sseEvent is one dispatched server-sent event. Its slices stay valid until the next call to
// sseReader.next.
type sseEvent struct {
	Type []byte // the "event" field; empty means the default type "message"
	Data []byte // the "data" fields joined with LF
}

// sseReader parses a text/event-stream as the WHATWG HTML Standard §9.2.6 ("Interpreting an event
// stream") says: lines end in CRLF, LF or CR; a leading U+FEFF is skipped; lines starting with ':'
// are comments; "field: value" loses one space after the colon; "data" lines are joined with LF;
// an empty line dispatches the event, unless no data field was seen; an event cut off by the end of
// the stream is discarded. The "id" and "retry" fields are ignored (this client never reconnects).
//
// It owns its buffer so that it can hand over an event the moment its blank line arrives (never
// waiting for more bytes, even after a lone CR) and so that it allocates nothing in steady state.
type sseReader struct {
	r          io.Reader
	buf        []byte
	start, end int // unconsumed bytes are buf[start:end]
	scan       int // buf[start:scan] is known to hold no line end
	skipLF     bool
	bomDone    bool
	err        error // read error, surfaced once buffered lines are used up
	max        int

	data       []byte
	etype      []byte
	hasData    bool
	dispatched bool
	zeroReads  int
}

func newSSEReader(r io.Reader) *sseReader {
	s := &sseReader{}
	s.reset(r)
	return s
}

// reset makes s read a new stream, keeping its buffers.
func (s *sseReader) reset(r io.Reader) {
	if s.buf == nil {
		s.buf = make([]byte, 4096)
	}
	*s = sseReader{r: r, buf: s.buf, data: s.data[:0], etype: s.etype[:0], max: defaultSSEMax}
}

// next returns the next event. At the end of the stream it returns the reader's error (io.EOF for
// a clean end); a partial event is discarded.
func (s *sseReader) next() (sseEvent, error) {
	if s.dispatched {
		s.dispatched = false
		s.data = s.data[:0]
		s.etype = s.etype[:0]
	}
	for {
		line, err := s.readLine()
		if err != nil {
			return sseEvent{}, err
		}
		if len(line) == 0 {
			if !s.hasData {
				s.etype = s.etype[:0]
				continue
			}
			s.hasData = false
			s.dispatched = true
			return sseEvent{Type: s.etype, Data: s.data}, nil
		}
		if err := s.field(line); err != nil {
			return sseEvent{}, err
		}
	}
}

// field processes one non-empty line.
func (s *sseReader) field(line []byte) error {
	if line[0] == ':' {
		return nil // comment, often a keep-alive
	}
	name, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(name) {
	case "data":
		if len(s.data)+len(value)+1 > s.max {
			return errSSETooLarge
		}
		if s.hasData {
			s.data = append(s.data, '\n')
		}
		s.data = append(s.data, value...)
		s.hasData = true
	case "event":
		s.etype = append(s.etype[:0], value...)
	}
	return nil
}

// readLine returns the next line without its terminator. The slice is valid until the next call.
func (s *sseReader) readLine() ([]byte, error) {
	for {
		if s.skipLF && s.start < s.end {
			s.skipLF = false
			if s.buf[s.start] == '\n' {
				s.start++
				if s.scan < s.start {
					s.scan = s.start
				}
			}
		}
		if s.start < s.end && !s.skipLF {
			if i := lineEnd(s.buf[s.scan:s.end]); i >= 0 {
				pos := s.scan + i
				line := s.buf[s.start:pos]
				next := pos + 1
				if s.buf[pos] == '\r' {
					if next < s.end {
						if s.buf[next] == '\n' {
							next++
						}
					} else {
						s.skipLF = true // the LF of a CRLF may still be on its way
					}
				}
				s.start, s.scan = next, next
				if !s.bomDone {
					s.bomDone = true
					line = bytes.TrimPrefix(line, bom)
				}
				return line, nil
			}
			s.scan = s.end
		}
		if s.err != nil {
			return nil, s.err
		}
		if err := s.fill(); err != nil {
			return nil, err
		}
	}
}

var bom = []byte{0xEF, 0xBB, 0xBF}

// fill reads more bytes, compacting or growing the buffer first.
func (s *sseReader) fill() error {
	if s.start > 0 {
		n := copy(s.buf, s.buf[s.start:s.end])
		s.scan -= s.start
		s.end = n
		s.start = 0
	}
	if s.end == len(s.buf) {
		if len(s.buf) >= s.max {
			return errSSETooLarge
		}
		nb := make([]byte, min(2*len(s.buf), s.max))
		copy(nb, s.buf[:s.end])
		s.buf = nb
	}
	n, err := s.r.Read(s.buf[s.end:])
	s.end += n
	if err != nil {
		s.err = err
		return nil // let buffered lines be used first
	}
	if n == 0 {
		s.zeroReads++
		if s.zeroReads > 100 {
			s.err = io.ErrNoProgress
		}
		return nil
	}
	s.zeroReads = 0
	return nil
}

// lineEnd returns the index of the first CR or LF in b, or -1.
func lineEnd(b []byte) int {
	lf := bytes.IndexByte(b, '\n')
	limit := b
	if lf >= 0 {
		limit = b[:lf]
	}
	if cr := bytes.IndexByte(limit, '\r'); cr >= 0 {
		return cr
	}
	return lf
}
