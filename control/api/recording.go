package api

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/parley-voice/parley/control/app/conversations"
	"github.com/parley-voice/parley/control/fault"
)

// serveRecording writes rec as the answer, the whole file or the one range the Range header
// asks for (206 with Content-Range; 416 when the range is outside the file).
func serveRecording(w http.ResponseWriter, r *http.Request, rec conversations.Recording) error {
	size := rec.Size
	first, last, partial, err := parseRange(r.Header.Get("Range"), size)
	if err != nil {
		e := fault.E(fault.CodeRangeNotSatisfiable, "The recording has %d bytes; the Range %q asks for others.", size, r.Header.Get("Range"))
		w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", size))
		return e
	}
	h := w.Header()
	h.Set("Content-Type", rec.ContentType)
	h.Set("Accept-Ranges", "bytes")
	h.Set("Content-Length", strconv.FormatInt(last-first+1, 10))
	h.Set("Content-Disposition", fmt.Sprintf(`inline; filename="%s"`, rec.Name))
	status := http.StatusOK
	if partial {
		h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", first, last, size))
		status = http.StatusPartialContent
	}
	if _, err := rec.File.Seek(first, io.SeekStart); err != nil {
		return err
	}
	w.WriteHeader(status)
	if r.Method == http.MethodHead {
		return nil
	}
	_, _ = io.CopyN(w, rec.File, last-first+1)
	return nil
}

// parseRange reads a single-range Range header (RFC 9110 §14.1.2): "bytes=a-b", "bytes=a-" or
// "bytes=-n". No header, or a form this server does not serve (several ranges, another unit),
// answers the whole file. A range outside the file is an error (416).
func parseRange(h string, size int64) (first, last int64, partial bool, err error) {
	whole := func() (int64, int64, bool, error) { return 0, size - 1, false, nil }
	spec, ok := strings.CutPrefix(strings.TrimSpace(h), "bytes=")
	if h == "" || !ok || strings.Contains(spec, ",") {
		return whole()
	}
	a, b, ok := strings.Cut(strings.TrimSpace(spec), "-")
	if !ok {
		return whole()
	}
	switch {
	case a == "" && b == "":
		return whole()
	case a == "":
		n, perr := strconv.ParseInt(b, 10, 64)
		if perr != nil || n < 0 {
			return whole()
		}
		if n == 0 || size == 0 {
			return 0, 0, false, errors.New("empty suffix range")
		}
		return max(size-n, 0), size - 1, true, nil
	}
	first, perr := strconv.ParseInt(a, 10, 64)
	if perr != nil || first < 0 {
		return whole()
	}
	last = size - 1
	if b != "" {
		l, perr := strconv.ParseInt(b, 10, 64)
		if perr != nil || l < first {
			return whole()
		}
		last = min(l, size-1)
	}
	if first >= size {
		return 0, 0, false, errors.New("range starts past the end")
	}
	return first, last, true, nil
}
