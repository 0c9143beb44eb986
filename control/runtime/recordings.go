package runtime

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/parley-voice/parley/control/store"
)

// wavHeader is the size of the canonical header media.Recorder writes: the RIFF size at
// offset 4, the data size at 40, the block align at 32.
const wavHeader = 44

// recoverRecording handles the recording a node that died (kill -9) left of a conversation it
// ran: the WAV's header sizes are fixed from the file's length (the recorder patches them only
// at checkpoints), and its path is returned so that the conversation is ended naming it, in the
// same transaction (a reader never sees the call ended without its recording); it can then be
// fetched and is deleted with the conversation. A file that cannot be repaired is removed:
// caller audio is never left unreachable on disk. It returns "" when there is no file or the
// recording is already named.
func (rt *Runtime) recoverRecording(c store.Conversation) (string, error) {
	if rt.o.DataDir == "" || c.Recording != "" {
		return "", nil
	}
	rel := filepath.ToSlash(filepath.Join("recordings", string(c.ID)+".wav"))
	abs := filepath.Join(rt.o.DataDir, filepath.FromSlash(rel))
	if _, err := os.Stat(abs); errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err := repairWAV(abs); err != nil {
		rt.log.Warn("recording: a partial recording cannot be repaired; removing it", "conversation", c.ID, "err", err)
		return "", os.Remove(abs)
	}
	rt.log.Info("recording: a partial recording was repaired and attached", "conversation", c.ID)
	return rel, nil
}

// repairWAV sets the RIFF and data sizes of a canonical PCM WAV file from its length, dropping
// a trailing partial sample frame.
func repairWAV(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	var h [wavHeader]byte
	if _, err := io.ReadFull(f, h[:]); err != nil {
		return fmt.Errorf("header: %w", err)
	}
	if string(h[0:4]) != "RIFF" || string(h[8:16]) != "WAVEfmt " || string(h[36:40]) != "data" {
		return errors.New("not a canonical WAV file")
	}
	st, err := f.Stat()
	if err != nil {
		return err
	}
	align := int64(binary.LittleEndian.Uint16(h[32:]))
	if align <= 0 {
		return errors.New("block align 0")
	}
	data := (st.Size() - wavHeader) / align * align
	if data > 0xffffffff-36 {
		data = (0xffffffff - 36) / align * align
	}
	if err := f.Truncate(wavHeader + data); err != nil {
		return err
	}
	binary.LittleEndian.PutUint32(h[4:], uint32(36+data))
	binary.LittleEndian.PutUint32(h[40:], uint32(data))
	if _, err := f.WriteAt(h[:], 0); err != nil {
		return err
	}
	return f.Sync()
}

// RemoveOrphanRecordings removes the recordings of conversations that do not exist (a row
// deleted while its call's recorder was still writing, or never stored). It returns how many
// it removed.
func (rt *Runtime) RemoveOrphanRecordings(ctx context.Context) (int, error) {
	if rt.o.DataDir == "" {
		return 0, nil
	}
	dir := filepath.Join(rt.o.DataDir, "recordings")
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".wav")
		if !ok || e.IsDir() {
			continue
		}
		_, err := rt.store.GetConversation(ctx, store.ConversationID(id))
		if !errors.Is(err, store.ErrNotFound) {
			continue // it exists (or the store cannot say): leave the file
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err == nil {
			n++
		}
	}
	return n, nil
}
