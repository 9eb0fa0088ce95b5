package dashboard

import (
	"context"
	"crypto/ed25519"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"time"

	"e1kbox/appliance/config"
	"e1kbox/appliance/system"
	"e1kbox/firmware/boxupdate"
	"e1kbox/firmware/gaf"
	"e1kbox/webui"
)

// updater adapts boxupdate's engine to the dashboard's Updater: uploads
// from the System page and from `firmware update` land here.
type updater struct{ e *boxupdate.Engine }

// NewUpdater returns the dashboard's updater, or nil off gokrazy (no boot
// disk to update).
func NewUpdater(log *slog.Logger, stateDir string, store *config.Store, id system.Identity) webui.Updater {
	if !system.UnderGokrazy() {
		return nil
	}
	dev, err := boxupdate.FindDevices()
	if err != nil {
		log.Warn("firmware updates from the dashboard are off", "err", err)
		return nil
	}
	return &updater{&boxupdate.Engine{
		Devices: dev, State: boxupdate.State{Dir: filepath.Join(stateDir, "update")}, Log: log,
		PublicKey: func() ed25519.PublicKey {
			c, _ := store.Current()
			if c == nil {
				return nil
			}
			return c.Dashboard.UpdatePublicKey()
		},
		Current: func() boxupdate.Build { return boxupdate.Build{Timestamp: id.Build, SBOMHash: id.SBOMHash} },
		// The guard in the new build enforces the deadline; this is what it reads.
		HealthTimeout: 120 * time.Second,
	}}
}

type refused struct{ err error }

func (r refused) Error() string { return r.err.Error() }
func (r refused) Unwrap() error { return r.err }
func (r refused) HTTPStatus() int {
	switch {
	case errors.Is(r.err, gaf.ErrUnsigned), errors.Is(r.err, gaf.ErrBadSignature):
		return http.StatusForbidden
	case errors.Is(r.err, boxupdate.ErrBusy):
		return http.StatusConflict
	}
	return http.StatusBadRequest
}

func (u *updater) Apply(ctx context.Context, body io.Reader, sig []byte) (any, error) {
	client := "dashboard"
	rec, err := u.e.Apply(ctx, client, body, sig)
	var r *boxupdate.Refused
	if errors.As(err, &r) {
		return nil, refused{r.Err}
	}
	if err != nil {
		return nil, err
	}
	return rec, nil
}

func (u *updater) Status() any { return u.e.Status() }
