package session

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/parley-voice/parley/session/llm"
)

// CommandKind names a live steering command.
type CommandKind string

// Steering commands.
const (
	CommandSay      CommandKind = "say"
	CommandNote     CommandKind = "note"
	CommandTransfer CommandKind = "transfer"
	CommandEnd      CommandKind = "end"
)

// Command steers a live conversation from outside.
type Command struct {
	Kind CommandKind
	// Say: the text, and whether it interrupts what the agent is saying (otherwise it is
	// spoken after the current utterance).
	Text      string
	Interrupt bool
	// Note: whether the agent (the LLM) sees it.
	VisibleToAgent bool
	// Transfer: where and how.
	Transfer TransferRequest
}

// Command statuses.
const (
	CommandDone   = "done"
	CommandFailed = "failed"
)

// CommandResult is how a command ended.
type CommandResult struct {
	Status string
	Reason string
}

type pendingCommand struct {
	cmd  Command
	res  chan CommandResult
	once sync.Once
}

func (p *pendingCommand) reply(r CommandResult) {
	p.once.Do(func() { p.res <- r })
}

// Execute runs a steering command. The answer arrives on the returned channel once the command
// is done (a say is done when it has been spoken) or failed, with the reason.
func (c *Conversation) Execute(cmd Command) <-chan CommandResult {
	pc := &pendingCommand{cmd: cmd, res: make(chan CommandResult, 1)}
	if c.textMode.Load() {
		go c.executeText(pc)
		return pc.res
	}
	if !c.started.Load() {
		pc.reply(CommandResult{Status: CommandFailed, Reason: "the conversation has not started"})
		return pc.res
	}
	select {
	case c.cmdCh <- pc:
	case <-c.done:
		pc.reply(CommandResult{Status: CommandFailed, Reason: "the conversation ended"})
	}
	return pc.res
}

// onCommand runs a command in the loop.
func (c *Conversation) onCommand(pc *pendingCommand) {
	switch pc.cmd.Kind {
	case CommandSay:
		if c.held {
			pc.reply(CommandResult{Status: CommandFailed, Reason: "the call is on hold: nobody would hear it"})
			return
		}
		text := strings.TrimSpace(pc.cmd.Text)
		if text == "" {
			pc.reply(CommandResult{Status: CommandFailed, Reason: "nothing to say"})
			return
		}
		if pc.cmd.Interrupt {
			c.cancelResponse()
			c.stopSpeaking(true)
		}
		c.speakUtterance(text, uttSay, pc)
	case CommandNote:
		c.note(pc.cmd)
		pc.reply(CommandResult{Status: CommandDone})
	case CommandTransfer:
		c.transfer(pc)
	case CommandEnd:
		pc.reply(CommandResult{Status: CommandDone})
		c.finish(EndAPI, true)
	default:
		pc.reply(CommandResult{Status: CommandFailed, Reason: "unknown command " + string(pc.cmd.Kind)})
	}
}

func (c *Conversation) note(cmd Command) {
	now := c.now()
	c.addLine(Line{Role: RoleNote, Text: cmd.Text, Start: now, End: now, Meta: map[string]any{"visible_to_agent": cmd.VisibleToAgent}})
	if cmd.VisibleToAgent {
		c.appendHistory(llm.Message{Role: llm.RoleUser, Content: "[Note from a supervisor, not said by the caller: " + cmd.Text + "]"}, -1)
	}
}

// transfer asks the port to transfer the caller; the loop goes on meanwhile. On success the
// conversation ends as transferred; on failure the agent carries on and the command fails.
func (c *Conversation) transfer(pc *pendingCommand) {
	if c.port == nil {
		pc.reply(CommandResult{Status: CommandFailed, Reason: "this channel cannot transfer"})
		return
	}
	t := pc.cmd.Transfer
	if t.Mode == "" {
		t.Mode = TransferCold
	}
	if t.Timeout == 0 {
		t.Timeout = 30 * time.Second
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		ctx, cancel := context.WithTimeout(c.ctx, t.Timeout+5*time.Second)
		defer cancel()
		err := c.port.Transfer(ctx, t)
		if err != nil {
			pc.reply(CommandResult{Status: CommandFailed, Reason: err.Error()})
			now := c.now()
			c.addLine(Line{Role: RoleSystem, Text: "transfer to " + t.Destination + " failed: " + err.Error(), Start: now, End: now})
			return
		}
		pc.reply(CommandResult{Status: CommandDone})
		c.ChannelEnded(EndTransferred)
	}()
}

func (c *Conversation) drainCommands() {
	for {
		select {
		case pc := <-c.cmdCh:
			pc.reply(CommandResult{Status: CommandFailed, Reason: "the conversation ended"})
		default:
			return
		}
	}
}
