// Command firmware builds, flashes, boots and updates e1kbox images.
package main

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"e1kbox/firmware/build"
	"e1kbox/firmware/flash"
	"e1kbox/firmware/gaf"
	"e1kbox/firmware/ota"
	"e1kbox/firmware/vm"
)

const usage = `usage: go run ./firmware <command> [flags]

commands:
  build            build the disk image and update pieces from config.json
  flash DEVICE     write the image to a block device (needs --yes)
  update           update a running box over the air (health-gated test boot)
  keygen           make an ed25519 key pair for signed updates
  vm               boot the built image in QEMU with three e1000e NICs

Run "go run ./firmware <command> -h" for a command's flags.
`

func main() {
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})))
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "firmware:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return errors.New("no command given")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch args[0] {
	case "build":
		return cmdBuild(args[1:])
	case "flash":
		return cmdFlash(args[1:])
	case "update":
		return cmdUpdate(ctx, args[1:])
	case "vm":
		return cmdVM(ctx, args[1:])
	case "keygen":
		return cmdKeygen(args[1:])
	case "-h", "--help", "help":
		fmt.Fprint(os.Stdout, usage)
		return nil
	}
	fmt.Fprint(os.Stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}

func cmdBuild(args []string) error {
	fs := flag.NewFlagSet("build", flag.ExitOnError)
	config := fs.String("config", "config.json", "gokrazy instance config: a config.json, or a gok instance directory (as `gok -i NAME` uses: ~/gokrazy/NAME)")
	inst := fs.String("i", "", "gok instance name: the same as -config ~/gokrazy/NAME")
	out := fs.String("out", "build", "output directory")
	src := fs.String("src", "", "Go module to build the packages in (default: the config's directory)")
	size := fs.Int64("size", 2<<30, "disk image size in bytes")
	noImage := fs.Bool("no-image", false, "only build the update pieces (boot.img, root.img, mbr.img, e1kbox.gaf)")
	sign := fs.String("sign", "", "ed25519 key file to sign the .gaf with (see `firmware keygen`)")
	fs.Parse(args)
	cfg := *config
	if *inst != "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return err
		}
		cfg = filepath.Join(home, "gokrazy", *inst)
	}
	m, err := build.Run(build.Options{
		ConfigPath: cfg, SourceDir: *src, OutDir: *out, DiskBytes: *size,
		NoDiskImage: *noImage, SignKey: *sign,
	})
	if err != nil {
		return err
	}
	fmt.Printf("build %s ready in %s: image %s, update %s (boot %s, root %s, mbr %s)\n", m.BuildTimestamp, m.Steps["total"], m.Image, m.GAF, m.Boot, m.Root, m.MBR)
	if m.Signature != "" {
		fmt.Printf("signed: %s\n", m.Signature)
	}
	return nil
}

func cmdFlash(args []string) error {
	fs := flag.NewFlagSet("flash", flag.ExitOnError)
	out := fs.String("out", "build", "build directory (from firmware build)")
	yes := fs.Bool("yes", false, "really overwrite DEVICE")
	fs.Parse(args)
	if fs.NArg() != 1 {
		return errors.New("usage: firmware flash [--yes] DEVICE")
	}
	m, err := readManifest(*out)
	if err != nil {
		return err
	}
	return flash.Flash(fs.Arg(0), m, *yes)
}

func cmdUpdate(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("update", flag.ExitOnError)
	out := fs.String("out", "build", "build directory (from firmware build)")
	host := fs.String("host", "", "box address host[:port] of the gokrazy UI (default: Hostname from the build, port 80)")
	dash := fs.String("dashboard", "", "box address host:port of the dashboard (default: the --host host, the built dashboard port)")
	bootTimeout := fs.Duration("boot-timeout", 5*time.Minute, "how long the box may stay silent in the test boot before the update gives up on it")
	gokPath := fs.Bool("gok-path", false, "update as gok does (/update/root, /update/boot, /update/mbr, /update/switch): the boot partition is overwritten in place, the box's guard is the only health gate")
	health := fs.Duration("health-timeout", 2*time.Minute, "with -gok-path: how long to wait for the appliance on the new build")
	kexec := fs.Bool("kexec", true, "with -gok-path: reboot with kexec (fast); -kexec=false reboots through the firmware")
	fs.Parse(args)
	m, err := readManifest(*out)
	if err != nil {
		return err
	}
	h := *host
	if h == "" {
		h = m.Hostname
	}
	if !strings.Contains(h, ":") {
		h += ":" + m.HTTPPort
	}
	d := *dash
	if d == "" {
		d = strings.Split(h, ":")[0] + ":" + m.DashboardPort
	}
	opts := ota.Options{
		BaseURL:      (&url.URL{Scheme: "http", User: url.UserPassword("gokrazy", m.Password), Host: h, Path: "/"}).String(),
		DashboardURL: "http://" + d + "/",
		GAF:          m.GAF, Signature: m.Signature, Boot: m.Boot, Root: m.Root, MBR: m.MBR, BuildTimestamp: m.BuildTimestamp,
		BootTimeout: *bootTimeout, HealthTimeout: *health, NoKexec: !*kexec,
	}
	update := ota.Update
	if *gokPath {
		update = ota.GokPath
	}
	rep, err := update(ctx, opts)
	fmt.Print(rep)
	return err
}

func cmdKeygen(args []string) error {
	fs := flag.NewFlagSet("keygen", flag.ExitOnError)
	out := fs.String("out", "e1kbox-update.key", "signing key file to write (KEY.pub gets the public key)")
	fs.Parse(args)
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		return err
	}
	if err := os.WriteFile(*out, []byte(gaf.EncodeSeed(priv)+"\n"), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(*out+".pub", []byte(gaf.EncodePublicKey(pub)+"\n"), 0o644); err != nil {
		return err
	}
	fmt.Printf("signing key: %s (keep it secret)\npublic key:  %s\nput it in the box's runtime config: \"dashboard\": {\"updateKey\": %q}\nsign builds:  go run ./firmware build -sign %s\n", *out, *out+".pub", gaf.EncodePublicKey(pub), *out)
	return nil
}

func cmdVM(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("vm", flag.ExitOnError)
	out := fs.String("out", "build", "build directory (from firmware build)")
	config := fs.String("config", "config.json", "the instance config the build was made from (its factory config says which data port is WAN and LAN)")
	taps := fs.String("taps", "e1k-tap1,e1k-tap2", "host tap devices for eth1,eth2 (created if missing; needs root); empty for none")
	opts := vm.Flags(fs)
	fs.Parse(args)
	m, err := readManifest(*out)
	if err != nil {
		return err
	}
	if m.Image == "" {
		return errors.New("the build has no disk image (built with --no-image)")
	}
	if *taps != "" {
		names := strings.Split(*taps, ",")
		if len(names) != 2 {
			return errors.New("--taps wants two names, for eth1 and eth2")
		}
		if os.Geteuid() != 0 {
			slog.Warn("not root: eth1/eth2 get no tap devices (no data-port traffic); run as root for taps")
		} else {
			for i, n := range names {
				if err := ensureTap(n); err != nil {
					return err
				}
				opts.DataTaps[i] = n
			}
		}
	}
	factory, err := vm.ReadFactory(*config)
	if err != nil {
		slog.Warn("the data ports' roles are unknown", "err", err)
	} else if factory.Hostname != m.Hostname {
		slog.Warn("the build is not from this config: rebuild with `make run CONFIG=...` (or firmware build -config)", "config", *config, "config_hostname", factory.Hostname, "build_hostname", m.Hostname)
	}
	opts.Image, opts.Console = m.Image, os.Stdout
	v, err := vm.Start(ctx, *opts)
	if err != nil {
		return err
	}
	threads := "one TCG thread"
	if !opts.OneTCGThread {
		threads = "a TCG thread per vCPU"
	}
	fmt.Fprintf(os.Stderr, `
%s is booting in QEMU (%s; about 20-40 s). Serial console below; Ctrl-C stops the VM.
  dashboard:  http://%s/            (user gokrazy, password %s)
  gokrazy UI: http://gokrazy:%s@%s/
  data ports: %s
  update:     go run ./firmware build -config %s && go run ./firmware update --host %s --dashboard %s

`, m.Hostname, threads, v.DashboardAddr(), m.Password, m.Password, v.HTTPAddr(), dataPorts(opts.DataTaps, factory), *config, v.HTTPAddr(), v.DashboardAddr())
	select {
	case <-v.Done():
		return v.Err()
	case <-ctx.Done():
		v.Kill()
		return nil
	}
}

// dataPorts says which host tap is which of the box's data ports, and
// what the factory config makes of each.
func dataPorts(taps [2]string, f *vm.Factory) string {
	var lines []string
	for i, tap := range taps {
		iface := vm.DataInterface(i)
		s := iface + " = " + orNone(tap)
		if f != nil {
			s += ": " + f.Describe(iface)
		}
		lines = append(lines, s)
	}
	return strings.Join(lines, "\n              ")
}

func orNone(s string) string {
	if s == "" {
		return "(no tap)"
	}
	return "tap " + s
}

func ensureTap(name string) error {
	if _, err := os.Stat(filepath.Join("/sys/class/net", name)); err == nil {
		return nil
	}
	if out, err := exec.Command("ip", "tuntap", "add", "dev", name, "mode", "tap").CombinedOutput(); err != nil {
		return fmt.Errorf("creating tap %s: %v: %s", name, err, out)
	}
	if out, err := exec.Command("ip", "link", "set", name, "up").CombinedOutput(); err != nil {
		return fmt.Errorf("bringing up tap %s: %v: %s", name, err, out)
	}
	return nil
}

func readManifest(dir string) (*build.Manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return nil, fmt.Errorf("no build in %s (run `go run ./firmware build` first): %w", dir, err)
	}
	var m build.Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("reading %s/manifest.json: %w", dir, err)
	}
	return &m, nil
}
