package dashboard

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"time"

	"e1kbox/webui"
)

// Serve serves the dashboard on ln until ctx ends, and then says on the
// channel why it ended; without a password it serves only the
// unauthenticated /healthz and /version, so that the box still answers
// the update health gate.
func Serve(ctx context.Context, log *slog.Logger, ln net.Listener, opts webui.Options) <-chan error {
	errc := make(chan error, 1)
	web, err := webui.New(opts)
	if err != nil {
		log.Error("dashboard disabled", "err", err)
		srv := &http.Server{Handler: webui.PublicHandler(opts.Health), ReadHeaderTimeout: 10 * time.Second}
		go func() { errc <- srv.Serve(ln) }()
		go func() { <-ctx.Done(); srv.Close() }()
	} else {
		go func() { errc <- web.Serve(ctx, ln) }()
	}
	return errc
}
