package session

import (
	"sync"
	"time"
)

// Role says who a transcript line is from.
type Role string

// Transcript roles.
const (
	RoleUser   Role = "user"
	RoleAgent  Role = "agent"
	RoleTool   Role = "tool"
	RoleNote   Role = "note"
	RoleSystem Role = "system"
)

// Line is one transcript line. Seq increases strictly within a conversation. Interim caller text
// is never a line; only finals are.
type Line struct {
	Seq         int64          `json:"seq"`
	Role        Role           `json:"role"`
	Text        string         `json:"text"`
	Start       time.Time      `json:"start"`
	End         time.Time      `json:"end"`
	Interrupted bool           `json:"interrupted,omitempty"`
	Meta        map[string]any `json:"meta,omitempty"`
}

// Transcript is the ordered list of a conversation's lines.
type Transcript struct {
	mu    sync.Mutex
	seq   int64
	lines []Line
}

// Append stamps l with the next seq and stores it; it returns the stored line.
func (t *Transcript) Append(l Line) Line {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.seq++
	l.Seq = t.seq
	t.lines = append(t.lines, l)
	return l
}

// resume makes the next line's seq follow last (a conversation continued from its state).
func (t *Transcript) resume(last int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if last > t.seq {
		t.seq = last
	}
}

// last returns the seq of the last line.
func (t *Transcript) last() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.seq
}

// Lines returns a copy of the lines.
func (t *Transcript) Lines() []Line {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Line(nil), t.lines...)
}

// After returns the lines with seq greater than after.
func (t *Transcript) After(after int64) []Line {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []Line
	for _, l := range t.lines {
		if l.Seq > after {
			out = append(out, l)
		}
	}
	return out
}
