package build

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"e1kbox/firmware/instance"
)

func (b *builder) goList(args ...string) (string, error) {
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = b.srcDir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go list: %s", strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

type buildGroup struct {
	dir              string
	env, flags, tags []string
	pkgs             []string
}

// goBuild compiles every package for linux/amd64 without cgo, one `go
// build` per build directory and distinct set of per-package build
// settings, and then the generated init.
func (b *builder) goBuild() error {
	groups := map[string]*buildGroup{}
	var order []string
	for _, pkg := range b.cfg.AllPackages() {
		pc := b.cfg.PackageConfig[pkg]
		dir := b.srcDir
		if b.buildDirs != nil {
			if d := b.buildDirs(pkg); d != "" {
				dir = d
			}
		}
		key := dir + "\x01" + strings.Join(pc.GoBuildEnvironment, "\x00") + "\x01" + strings.Join(pc.GoBuildFlags, "\x00") + "\x01" + strings.Join(pc.GoBuildTags, "\x00")
		g, ok := groups[key]
		if !ok {
			g = &buildGroup{dir: dir, env: pc.GoBuildEnvironment, flags: pc.GoBuildFlags, tags: pc.GoBuildTags}
			groups[key] = g
			order = append(order, key)
		}
		g.pkgs = append(g.pkgs, pkg)
	}
	for _, key := range order {
		if err := b.buildGroup(groups[key]); err != nil {
			return err
		}
	}
	return b.buildInit(b.programPaths())
}

// programPaths lists the supervised programs' paths in the image, sorted.
func (b *builder) programPaths() []string {
	var paths []string
	for _, p := range b.cfg.AllPackages() {
		dir := "/user/"
		if b.cfg.IsGokrazyPkg(p) {
			dir = "/gokrazy/"
		}
		paths = append(paths, dir+b.cfg.Basename(p))
	}
	sort.Strings(paths)
	return paths
}

func (b *builder) buildGroup(g *buildGroup) error {
	outDir, err := os.MkdirTemp(b.opts.OutDir, "gobuild-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(outDir)
	abs, err := filepath.Abs(outDir)
	if err != nil {
		return err
	}
	if err := b.goBuildTo(g.dir, g.env, g.flags, g.tags, abs+"/", g.pkgs...); err != nil {
		return err
	}
	for _, p := range g.pkgs {
		// go build -o dir/ names each binary after the last element of the
		// import path (without a /vN suffix).
		name := goBinaryName(p)
		dst := filepath.Join(b.binDir, b.cfg.Basename(p))
		if err := os.Rename(filepath.Join(outDir, name), dst); err != nil {
			return fmt.Errorf("package %s did not produce a program (is it package main?): %w", p, err)
		}
	}
	return nil
}

// goBuildTo runs go build in dir as gok does (tags gokrazy, netgo,
// osusergo; no -ldflags: programs learn their build from gokrazy), with
// -trimpath so that builds do not depend on where the sources are.
func (b *builder) goBuildTo(dir string, env, flags, tags []string, out string, pkgs ...string) error {
	tags = append([]string{"gokrazy", "netgo", "osusergo"}, tags...)
	args := []string{"build", "-trimpath", "-o", out, "-tags", strings.Join(tags, ",")}
	args = append(args, flags...)
	args = append(args, pkgs...)
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=amd64", "CGO_ENABLED=0")
	for _, e := range b.cfg.Environment {
		if !strings.HasPrefix(e, "GOOS=") && !strings.HasPrefix(e, "GOARCH=") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		var failed []string
		for _, line := range strings.Split(stderr.String(), "\n") {
			if p, ok := strings.CutPrefix(line, "# "); ok {
				failed = append(failed, p)
			}
		}
		if len(failed) == 0 {
			failed = pkgs
		}
		return fmt.Errorf("package %s does not build:\n%s", strings.Join(failed, ", "), strings.TrimSpace(stderr.String()))
	}
	return nil
}

func goBinaryName(pkg string) string {
	return (&instance.Config{}).Basename(pkg)
}
