package stt

import "sync"

// offsetMap translates a position on one provider connection's audio timeline (samples sent on
// that connection) to the engine's timeline (samples given to Write). The two differ after a
// reconnect (the new connection starts at zero) and whenever queued frames were dropped. The
// sender records a point at each discontinuity; the reader maps result timestamps through it.
//
// It keeps at most a fixed number of points (older ones are forgotten; results that old are
// mapped through the oldest kept point), so it never grows.
type offsetMap struct {
	mu  sync.Mutex
	pts []mapPoint
}

type mapPoint struct{ conn, engine int64 }

const offsetMapPoints = 32

func newOffsetMap() *offsetMap { return &offsetMap{pts: make([]mapPoint, 0, offsetMapPoints)} }

// reset forgets every point (a new connection starts).
func (m *offsetMap) reset() {
	m.mu.Lock()
	m.pts = m.pts[:0]
	m.mu.Unlock()
}

// add records that connection sample conn is engine sample engine.
func (m *offsetMap) add(conn, engine int64) {
	m.mu.Lock()
	if n := len(m.pts); n > 0 && m.pts[n-1].conn == conn {
		m.pts[n-1].engine = engine
		m.mu.Unlock()
		return
	}
	if len(m.pts) == cap(m.pts) {
		copy(m.pts, m.pts[1:])
		m.pts = m.pts[:len(m.pts)-1]
	}
	m.pts = append(m.pts, mapPoint{conn, engine})
	m.mu.Unlock()
}

// engineAt maps a connection sample position to the engine timeline.
func (m *offsetMap) engineAt(conn int64) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.pts) == 0 {
		return conn
	}
	p := m.pts[0]
	for _, q := range m.pts[1:] {
		if q.conn > conn {
			break
		}
		p = q
	}
	return p.engine + (conn - p.conn)
}
