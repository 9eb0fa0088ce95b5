// Command guard runs at every boot of an e1kbox (a supervised gokrazy package) and keeps a build only once the appliance is healthy on it.
//
// It confirms the test boot of an update the box installed (and makes it
// the build the firmware boots), reverts one that is not healthy in time,
// records updates that never came up, and gives builds another client
// installed (gok's /update/switch) the same health gate. See
// e1kbox/firmware/boxupdate.
package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"e1kbox/firmware/boxupdate"
)

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(log); err != nil {
		log.Error("guard", "err", err)
		os.Exit(1)
	}
}

func run(log *slog.Logger) error {
	health := flag.String("health", "http://127.0.0.1:8080/healthz", "the appliance's health endpoint")
	timeout := flag.Duration("timeout", 120*time.Second, "how long a new build has to become healthy")
	state := flag.String("state", "/perm/e1kbox/update", "update records")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	cmdline, err := os.ReadFile("/proc/cmdline")
	if err != nil {
		return err
	}
	dev, err := boxupdate.FindDevices()
	if err != nil {
		return err
	}
	gk := boxupdate.Gokrazy{}
	var cur boxupdate.Build // gokrazy's build, asked once
	g := &boxupdate.Guard{
		Devices: dev, State: boxupdate.State{Dir: *state}, Cmdline: string(cmdline), Log: log,
		Current: func(ctx context.Context) (b boxupdate.Build, err error) {
			b, err = gk.Status(ctx)
			cur = b
			return b, err
		},
		Healthy:       func(ctx context.Context) error { return boxupdate.ApplianceHealthy(ctx, *health, cur) },
		Reboot:        gk.Reboot,
		HealthTimeout: *timeout,
	}
	err = g.Run(ctx)
	switch {
	case errors.Is(err, boxupdate.ErrReverted):
		log.Warn("guard: rebooting into the previous build", "err", err)
		<-ctx.Done() // gokrazy stops us for the reboot
		return nil
	case err != nil && !g.State.IsWritable():
		log.Error("guard: not checking builds", "err", err)
		os.Exit(125) // nothing to retry: gokrazy stops supervising
	}
	return err
}
