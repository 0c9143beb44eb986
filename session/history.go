package session

import (
	"strings"

	"github.com/parley-voice/parley/session/llm"
)

// The transcript lines and the LLM history as the conversation records them.

// histEntry is one LLM message with the response generation that produced it.
type histEntry struct {
	msg llm.Message
	gen int
}

func (c *Conversation) addLine(l Line) Line {
	c.mu.Lock()
	if c.chatTurn != nil && (l.Role == RoleUser || l.Role == RoleTool) {
		*c.chatTurn = append(*c.chatTurn, l)
		c.mu.Unlock()
		return l
	}
	c.mu.Unlock()
	l = c.transcript.Append(l)
	if c.sink != nil {
		c.sink.LineAdded(l)
	}
	return l
}

// historyLen is the number of messages in the LLM history.
func (c *Conversation) historyLen() int {
	c.histMu.Lock()
	defer c.histMu.Unlock()
	return len(c.history)
}

// truncateHistory drops the messages after the first n (a chat message that was not answered).
func (c *Conversation) truncateHistory(n int) {
	c.histMu.Lock()
	defer c.histMu.Unlock()
	if n < len(c.history) {
		c.history = c.history[:n]
	}
}

func (c *Conversation) appendHistory(m llm.Message, gen int) {
	c.histMu.Lock()
	c.history = append(c.history, histEntry{msg: m, gen: gen})
	c.histMu.Unlock()
}

// fixHistory makes the assistant message of a response hold what the caller actually heard.
func (c *Conversation) fixHistory(gen int, played string, interrupted bool) {
	c.histMu.Lock()
	defer c.histMu.Unlock()
	for i := len(c.history) - 1; i >= 0; i-- {
		h := &c.history[i]
		if h.gen == gen && h.msg.Role == llm.RoleAssistant && len(h.msg.ToolCalls) == 0 {
			if interrupted {
				if strings.TrimSpace(played) == "" {
					h.msg.Content = "[interrupted by the caller before saying anything]"
				} else {
					h.msg.Content = played + " [interrupted by the caller]"
				}
			}
			return
		}
	}
	if interrupted && strings.TrimSpace(played) != "" {
		c.history = append(c.history, histEntry{msg: llm.Message{Role: llm.RoleAssistant, Content: played + " [interrupted by the caller]"}, gen: gen})
	}
}
