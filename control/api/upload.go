package api

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/parley-voice/parley/control/app"
	"github.com/parley-voice/parley/control/app/chats"
	"github.com/parley-voice/parley/control/fault"
	"github.com/parley-voice/parley/control/jsoncheck"
)

// MaxUploadBytes is the largest request body an upload takes (the node's body limit must
// allow it).
const MaxUploadBytes = chats.MaxAttachment + 64<<10

// readUpload reads the one part named file of a multipart/form-data upload.
func readUpload(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	tooLarge := fault.E(fault.CodeBodyTooLarge, "An attachment is at most %d bytes.", chats.MaxAttachment)
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" {
		return nil, fault.E(fault.CodeUnsupportedMediaType, "Upload the picture as multipart/form-data with a part named file (got %q).", r.Header.Get("Content-Type"))
	}
	if r.ContentLength > MaxUploadBytes {
		return nil, tooLarge
	}
	r.Body = http.MaxBytesReader(w, r.Body, MaxUploadBytes)
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, fault.E(fault.CodeUnsupportedMediaType, "The body is not multipart/form-data: %v.", err)
	}
	var data []byte
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLarge
		}
		if err != nil {
			return nil, app.Invalid(jsoncheck.Problem{Pointer: "", Code: "malformed", Detail: "The multipart body cannot be read: " + err.Error()})
		}
		if part.FormName() != "file" {
			part.Close()
			return nil, app.Invalid(jsoncheck.Problem{Pointer: "/" + jsoncheck.EscapePointer(part.FormName()), Code: jsoncheck.CodeUnknownField,
				Detail: fmt.Sprintf("Unknown part %q: the upload takes one part, file.", part.FormName())})
		}
		if data != nil {
			return nil, app.Invalid(jsoncheck.Problem{Pointer: "/file", Code: "not_unique", Detail: "Send one file per upload."})
		}
		data, err = io.ReadAll(io.LimitReader(part, chats.MaxAttachment+1))
		if errors.As(err, &mbe) || len(data) > chats.MaxAttachment {
			return nil, tooLarge
		}
		if err != nil {
			return nil, app.Invalid(jsoncheck.Problem{Pointer: "/file", Code: "malformed", Detail: "The file cannot be read: " + err.Error()})
		}
		if data == nil {
			data = []byte{}
		}
	}
	if len(data) == 0 {
		return nil, app.Invalid(jsoncheck.Problem{Pointer: "/file", Code: jsoncheck.CodeRequired, Detail: "The upload needs a non-empty part named file."})
	}
	return data, nil
}
