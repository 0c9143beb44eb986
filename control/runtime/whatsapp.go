package runtime

// issue 19: the messaging-app channel. Its conversations are durable chats (StartText and
// SendMetered in chat.go); a voice note is transcribed with the agent's configured
// speech-to-text.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/media"
	"github.com/parley-voice/parley/media/stt"
)

// voiceNoteRate is the rate a voice note is decoded at for speech-to-text.
const voiceNoteRate = 16000

// ErrVoiceNote says a voice note could not be read (not Ogg/Opus, or damaged).
var ErrVoiceNote = errors.New("runtime: the voice note cannot be read")

// TranscribeVoiceNote turns a voice note (an Ogg/Opus file) of conversation id into text with
// the speech-to-text its agent is configured with (the test providers for a test-mode
// conversation), and returns the seconds of audio it holds (to meter with SendMetered). The
// audio is streamed to the recognizer at four times real time, as voiced speech followed by
// half a second of silence, and the final results are joined.
func (rt *Runtime) TranscribeVoiceNote(ctx context.Context, id store.ConversationID, ogg []byte) (string, float64, error) {
	pcm, err := media.DecodeOggOpus(ogg, voiceNoteRate)
	if err != nil {
		return "", 0, fmt.Errorf("%w: %v", ErrVoiceNote, err)
	}
	c, err := rt.store.GetConversation(ctx, id)
	if err != nil {
		return "", 0, err
	}
	ag, err := rt.store.SystemAgents().GetIncludingDeleted(ctx, c.AgentID)
	if err != nil {
		return "", 0, fmt.Errorf("runtime: the conversation's agent: %w", err)
	}
	def, err := LoadDefinition(ctx, rt.store.Queries, ag, c.AgentVersion)
	if err != nil {
		return "", 0, err
	}
	provs := rt.o.Providers
	if c.Mode == store.ModeTest {
		provs = rt.o.TestProviders
	}
	if provs == nil {
		return "", 0, fmt.Errorf("%w: no providers for %s conversations on this node", ErrProvider, c.Mode)
	}
	rec, err := provs.STT(provider(def.Agent.STT.Provider, rt.o.DefaultSTT))
	if err != nil {
		return "", 0, fmt.Errorf("%w: %v", ErrProvider, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	st, err := rec.Open(ctx, stt.StreamOptions{Language: c.Language, SampleRate: voiceNoteRate, Endpointing: 300 * time.Millisecond})
	if err != nil {
		return "", 0, fmt.Errorf("%w: %v", ErrProvider, err)
	}
	var parts []string
	done := make(chan error, 1)
	go func() {
		var failure error
		for ev := range st.Events() {
			switch ev.Kind {
			case stt.Final:
				if t := strings.TrimSpace(ev.Text); t != "" {
					parts = append(parts, t)
				}
			case stt.Error:
				failure = ev.Err
			}
		}
		done <- failure
	}()
	const frame = voiceNoteRate / 50
	silence := make([]int16, frame)
	tick := time.NewTicker(5 * time.Millisecond) // four times real time: within the stream's queue
	defer tick.Stop()
	write := func(f []int16, voiced bool) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		return st.Write(f, voiced)
	}
	for off := 0; off < len(pcm) && err == nil; off += frame {
		f := pcm[off:min(off+frame, len(pcm))]
		if len(f) < frame {
			f = append(append([]int16(nil), f...), silence[len(f):]...)
		}
		err = write(f, true)
	}
	for i := 0; i < 25 && err == nil; i++ {
		err = write(silence, false)
	}
	cerr := st.Close()
	failure := <-done
	switch {
	case err != nil:
		return "", 0, fmt.Errorf("%w: %v", ErrProvider, err)
	case len(parts) == 0 && (failure != nil || cerr != nil):
		return "", 0, fmt.Errorf("%w: %v", ErrProvider, errors.Join(failure, cerr))
	}
	return strings.Join(parts, " "), float64(len(pcm)) / voiceNoteRate, nil
}
