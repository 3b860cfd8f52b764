// Package gobuild compiles trainstep's commands the way its image ships
// them: static linux binaries (no cgo, so they run FROM scratch) with
// trimmed paths and without symbol table or DWARF. hack/image puts them into
// the image; the benchmarks measure the same binary.
package gobuild

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// The commands the image ships, relative to the module root.
const (
	TrainstepPackage   = "./cmd/trainstep"
	DemoTrainerPackage = "./cmd/demo-trainer"
)

// LDFlags strip the binary and, when version is not empty, stamp it into
// trainstep's main.version.
func LDFlags(version string) string {
	flags := "-s -w"
	if version != "" {
		flags += " -X main.version=" + version
	}
	return flags
}

// Build compiles pkg of the module at moduleRoot for linux/arch into output,
// with LDFlags(version). $GO, when set, names the go command.
func Build(ctx context.Context, moduleRoot, arch, pkg, output, version string) error {
	goCmd := os.Getenv("GO")
	if goCmd == "" {
		goCmd = "go"
	}
	cmd := exec.CommandContext(ctx, goCmd, "build", "-trimpath", "-ldflags="+LDFlags(version), "-o", output, pkg)
	cmd.Dir = moduleRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building %s: %w\n%s", pkg, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}
