package webui

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"
)

// Updater installs firmware updates on the box: POST /api/system/update
// takes a gokrazy archive (.gaf) as the request body, with its detached
// signature (the .gaf.sig file's text) in the X-E1kbox-Signature header;
// GET /api/system/update is its state.
type Updater interface {
	// Apply takes the archive and returns once the box is about to
	// test-boot the new build (a JSON-encodable record). An error with an
	// HTTPStatus method is a refusal with that status; nothing was
	// written then.
	Apply(ctx context.Context, body io.Reader, signature []byte) (any, error)
	// Status is the JSON-encodable state: the phase of a running update,
	// the bytes received, the last update's outcome and timings.
	Status() any
}

// SignatureHeader carries an update's detached signature.
const SignatureHeader = "X-E1kbox-Signature"

// DefaultMaxUpdate bounds an uploaded update (boot and root partitions).
const DefaultMaxUpdate = 700 << 20

func (s *Server) handleUpdateStatus(w http.ResponseWriter, r *http.Request) {
	if s.opts.Updater == nil {
		notAvailable(w, "firmware update")
		return
	}
	writeJSON(w, http.StatusOK, s.opts.Updater.Status())
}

func (s *Server) handleUpdate(w http.ResponseWriter, r *http.Request) {
	if s.opts.Updater == nil {
		notAvailable(w, "firmware update")
		return
	}
	// The body is large: no request deadline while it arrives.
	http.NewResponseController(w).SetReadDeadline(time.Time{})
	body := http.MaxBytesReader(w, r.Body, s.opts.MaxUpdate)
	rec, err := s.opts.Updater.Apply(r.Context(), body, []byte(r.Header.Get(SignatureHeader)))
	if err != nil {
		var hs interface{ HTTPStatus() int }
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			writeError(w, http.StatusRequestEntityTooLarge, "update refused: larger than the box takes")
		case errors.As(err, &hs):
			writeError(w, hs.HTTPStatus(), "update refused: "+err.Error())
		default:
			writeError(w, http.StatusInternalServerError, "update failed: "+err.Error())
		}
		return
	}
	s.log.Info("dashboard: firmware update installed; the box test-boots it", "remote", r.RemoteAddr)
	writeJSON(w, http.StatusAccepted, rec)
}
