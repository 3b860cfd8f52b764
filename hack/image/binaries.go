package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// modulePath is the product's module; the build runs from its root.
const modulePath = "github.com/trainstep/trainstep"

// builtBinaries are the paths of the compiled commands.
type builtBinaries struct {
	trainstep, demoTrainer string
}

// buildBinaries compiles trainstep and the demo trainer as static linux
// binaries (no cgo, so they run FROM scratch) into dir.
func buildBinaries(ctx context.Context, opts Options, dir string) (builtBinaries, error) {
	out := builtBinaries{
		trainstep:   filepath.Join(dir, "trainstep"),
		demoTrainer: filepath.Join(dir, "demo-trainer"),
	}
	ldflags := "-s -w"
	if opts.Version != "" {
		ldflags += " -X main.version=" + opts.Version
	}
	builds := []struct{ pkg, output, ldflags string }{
		{"./cmd/trainstep", out.trainstep, ldflags},
		{"./cmd/demo-trainer", out.demoTrainer, "-s -w"},
	}
	for _, b := range builds {
		if err := goBuild(ctx, opts.ModuleRoot, opts.Arch, b.pkg, b.output, b.ldflags); err != nil {
			return builtBinaries{}, err
		}
	}
	return out, nil
}

func goBuild(ctx context.Context, moduleRoot, arch, pkg, output, ldflags string) error {
	goCmd := os.Getenv("GO")
	if goCmd == "" {
		goCmd = "go"
	}
	cmd := exec.CommandContext(ctx, goCmd, "build", "-trimpath", "-ldflags="+ldflags, "-o", output, pkg)
	cmd.Dir = moduleRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building %s: %w\n%s", pkg, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// moduleRoot finds the trainstep module's directory from the working
// directory up.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding the module root: %w", err)
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(data), "module "+modulePath+"\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("finding the module root: no go.mod of " + modulePath + " above the working directory")
		}
		dir = parent
	}
}
