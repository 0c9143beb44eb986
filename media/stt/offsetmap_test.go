package stt

import "testing"

func TestOffsetMap(t *testing.T) {
	m := newOffsetMap()
	if got := m.engineAt(100); got != 100 {
		t.Errorf("empty map: %d", got)
	}
	m.add(0, 1000)
	m.add(500, 2000) // 500 engine samples were dropped... and then some
	tests := []struct{ conn, want int64 }{{0, 1000}, {499, 1499}, {500, 2000}, {700, 2200}}
	for _, tt := range tests {
		if got := m.engineAt(tt.conn); got != tt.want {
			t.Errorf("engineAt(%d) = %d, want %d", tt.conn, got, tt.want)
		}
	}
	for i := range 100 { // bounded: old points are forgotten
		m.add(int64(1000+i), int64(5000+i*2))
	}
	if len(m.pts) != offsetMapPoints {
		t.Errorf("map grew to %d points", len(m.pts))
	}
	m.reset()
	if got := m.engineAt(5); got != 5 {
		t.Errorf("after reset: %d", got)
	}
}
