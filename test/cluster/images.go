package cluster

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// PauseImage is the real node's sandbox image: bin/cluster/pause (make cluster-bin-node) in
// a FROM-scratch image, imported under this name at start so that nothing is pulled.
const PauseImage = "docker.io/local/pause:trainstep"

// imageFile is one regular file of an image built here.
type imageFile struct {
	path string // absolute path in the image
	mode int64
	data []byte
	dir  bool // a directory (no data)
}

// writeImageArchive writes a FROM-scratch linux image of files, with entrypoint, to archive
// in the `docker save` format that `ctr images import` reads, tagged ref.
func writeImageArchive(archive, ref string, entrypoint []string, files []imageFile) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("parsing image reference %q: %w", ref, err)
	}
	var layerTar bytes.Buffer
	tw := tar.NewWriter(&layerTar)
	for _, f := range files {
		hdr := &tar.Header{Name: strings.TrimPrefix(f.path, "/"), Mode: f.mode, Size: int64(len(f.data)), Typeflag: tar.TypeReg}
		if f.dir {
			hdr.Typeflag, hdr.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("writing image layer: %w", err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return fmt.Errorf("writing image layer: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("writing image layer: %w", err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar.Bytes())), nil
	})
	if err != nil {
		return fmt.Errorf("building image layer: %w", err)
	}
	img, err := mutate.ConfigFile(empty.Image, &v1.ConfigFile{
		Architecture: runtime.GOARCH,
		OS:           "linux",
		Config:       v1.Config{Entrypoint: entrypoint, Env: []string{"PATH=/"}},
	})
	if err != nil {
		return fmt.Errorf("building image config: %w", err)
	}
	if img, err = mutate.AppendLayers(img, layer); err != nil {
		return fmt.Errorf("building image: %w", err)
	}
	if err := tarball.WriteToFile(archive, tag, img); err != nil {
		return fmt.Errorf("writing image archive %s: %w", archive, err)
	}
	return nil
}

// ImportImage imports an image archive (`docker save` or OCI layout, as `make image`
// writes) into the real node's containerd, where pods find it by the name recorded in the
// archive; give them imagePullPolicy: Never or IfNotPresent, since nothing is pulled.
func (c *Cluster) ImportImage(ctx context.Context, archive string) error {
	if c.node == nil {
		return fmt.Errorf("importing image %s: the cluster has no real node (Options.RealNode)", archive)
	}
	return c.node.importImage(ctx, archive)
}

// ImportGoImage builds the Go main package pkg (a path relative to trainstep's module root,
// like "./test/cluster/cmd/podcheck") as a static linux binary, puts it at /<base name of
// pkg> in a FROM-scratch image named ref, whose entrypoint it is, and imports that into the
// real node's containerd.
func (c *Cluster) ImportGoImage(ctx context.Context, ref, pkg string) error {
	if c.node == nil {
		return fmt.Errorf("importing image %s: the cluster has no real node (Options.RealNode)", ref)
	}
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp(c.node.Dir, "image-")
	if err != nil {
		return fmt.Errorf("creating a directory for image %s: %w", ref, err)
	}
	defer os.RemoveAll(dir)
	binary := filepath.Join(dir, filepath.Base(pkg))
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", binary, pkg)
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("building %s for image %s: %w: %s", pkg, ref, err, out)
	}
	data, err := os.ReadFile(binary)
	if err != nil {
		return fmt.Errorf("reading %s: %w", binary, err)
	}
	archive := filepath.Join(dir, "image.tar")
	entry := "/" + filepath.Base(pkg)
	if err := writeImageArchive(archive, ref, []string{entry}, []imageFile{{path: entry, mode: 0o755, data: data}}); err != nil {
		return err
	}
	return c.node.importImage(ctx, archive)
}

// moduleRoot is the directory of trainstep's go.mod, found by walking up from the working
// directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding trainstep's module root: %w", err)
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(data), "module github.com/trainstep/trainstep\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("finding trainstep's module root: no go.mod of github.com/trainstep/trainstep above the working directory")
		}
		dir = parent
	}
}
