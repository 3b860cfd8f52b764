package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/trainstep/trainstep/hack/image/gobuild"
)

// modulePath is the product's module; the build runs from its root.
const modulePath = "github.com/trainstep/trainstep"

// builtBinaries are the paths of the compiled commands.
type builtBinaries struct {
	trainstep, demoTrainer string
}

// buildBinaries compiles trainstep (with the version stamped) and the demo
// trainer into dir, as gobuild builds them.
func buildBinaries(ctx context.Context, opts Options, dir string) (builtBinaries, error) {
	out := builtBinaries{
		trainstep:   filepath.Join(dir, "trainstep"),
		demoTrainer: filepath.Join(dir, "demo-trainer"),
	}
	builds := []struct{ pkg, output, version string }{
		{gobuild.TrainstepPackage, out.trainstep, opts.Version},
		{gobuild.DemoTrainerPackage, out.demoTrainer, ""},
	}
	for _, b := range builds {
		if err := gobuild.Build(ctx, opts.ModuleRoot, opts.Arch, b.pkg, b.output, b.version); err != nil {
			return builtBinaries{}, err
		}
	}
	return out, nil
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
