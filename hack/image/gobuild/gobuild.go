// Package gobuild compiles trainstep's commands the way its image ships
// them: static linux binaries (no cgo, so they run FROM scratch) with
// trimmed paths and without symbol table or DWARF. hack/image puts them into
// the image; the benchmarks measure the same binary.
//
// The build is reproducible: the same sources and Go toolchain give the
// same bytes on any machine and in any checkout. No VCS state is stamped
// (-buildvcs=false: a commit or an uncommitted file elsewhere in the tree
// would change the binary), no path of the build machine (-trimpath), and the
// caller's GOFLAGS, GOEXPERIMENT and GOAMD64 level, which would change the
// code, are replaced by fixed values.
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

// BuildEnv is the environment a build adds to the caller's: later entries
// win, so these replace whatever the caller set.
func BuildEnv(arch string) []string {
	return []string{"CGO_ENABLED=0", "GOOS=linux", "GOARCH=" + arch, "GOFLAGS=", "GOEXPERIMENT=", "GOAMD64=v1"}
}

// Build compiles pkg of the module at moduleRoot for linux/arch into output,
// with LDFlags(version). $GO, when set, names the go command.
func Build(ctx context.Context, moduleRoot, arch, pkg, output, version string) error {
	goCmd := os.Getenv("GO")
	if goCmd == "" {
		goCmd = "go"
	}
	cmd := exec.CommandContext(ctx, goCmd, "build", "-trimpath", "-buildvcs=false", "-ldflags="+LDFlags(version), "-o", output, pkg)
	cmd.Dir = moduleRoot
	cmd.Env = append(os.Environ(), BuildEnv(arch)...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building %s: %w\n%s", pkg, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}
