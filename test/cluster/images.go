package cluster

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
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
// in the `docker save` format that `ctr images import` reads, tagged ref. Its PATH is /.
func writeImageArchive(archive, ref string, entrypoint []string, files []imageFile) error {
	return writeImageArchiveWithPath(archive, ref, entrypoint, "/", files)
}

// writeImageArchiveWithPath is writeImageArchive with the image's PATH.
func writeImageArchiveWithPath(archive, ref string, entrypoint []string, path string, files []imageFile) error {
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
	// Uncompressed: gzip took most of the build of a host-files image of hundreds of MiB
	// (the torch image's), and each node's containerd only decompressed it again.
	layer := static.NewLayer(layerTar.Bytes(), types.DockerUncompressedLayer)
	img, err := mutate.ConfigFile(empty.Image, &v1.ConfigFile{
		Architecture: runtime.GOARCH,
		OS:           "linux",
		Config:       v1.Config{Entrypoint: entrypoint, Env: []string{"PATH=" + path}},
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
// writes) into every real node's containerd, where pods find it by the name recorded in the
// archive; give them imagePullPolicy: Never or IfNotPresent, since nothing is pulled.
func (c *Cluster) ImportImage(ctx context.Context, archive string) error {
	if len(c.nodes) == 0 {
		return fmt.Errorf("importing image %s: the cluster has no real node (Options.RealNode)", archive)
	}
	return c.importIntoNodes(ctx, archive)
}

// importIntoNodes imports one archive into every real node's containerd, side by side.
func (c *Cluster) importIntoNodes(ctx context.Context, archive string) error {
	errs := make([]error, len(c.nodes))
	var wg sync.WaitGroup
	for i, n := range c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := n.importImage(ctx, archive); err != nil {
				errs[i] = fmt.Errorf("%s: %w", n.Name, err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// ImportGoImage builds the Go main package pkg (a path relative to trainstep's module root,
// like "./test/cluster/cmd/podcheck") as a static linux binary, puts it at /<base name of
// pkg> in a FROM-scratch image named ref, whose entrypoint it is, and imports that into
// every real node's containerd.
func (c *Cluster) ImportGoImage(ctx context.Context, ref, pkg string) error {
	if len(c.nodes) == 0 {
		return fmt.Errorf("importing image %s: the cluster has no real node (Options.RealNode)", ref)
	}
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp(c.nodes[0].Dir, "image-")
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
	return c.importIntoNodes(ctx, archive)
}

// HostImagePath is the PATH of the images ImportHostFilesImage builds.
const HostImagePath = "/usr/local/bin:/usr/bin:/bin"

// ImportHostFilesImage builds a FROM-scratch image named ref from copies of this machine's
// files (WriteHostFilesImage) and imports it into every real node's containerd. It is how a
// test runs a program of this machine (an interpreter and the libraries it loads) in a pod,
// since the real node pulls nothing.
func (c *Cluster) ImportHostFilesImage(ctx context.Context, ref string, files map[string]string) error {
	if len(c.nodes) == 0 {
		return fmt.Errorf("importing image %s: the cluster has no real node (Options.RealNode)", ref)
	}
	// An archive of its own: tests running in parallel build theirs at once.
	f, err := os.CreateTemp(c.nodes[0].Dir, "host-files-image-*.tar")
	if err != nil {
		return fmt.Errorf("creating an archive for image %s: %w", ref, err)
	}
	archive := f.Name()
	f.Close()
	defer os.Remove(archive)
	if err := WriteHostFilesImage(archive, ref, files); err != nil {
		return err
	}
	return c.importIntoNodes(ctx, archive)
}

// WriteHostFilesImage writes to archive, for ImportImage, a FROM-scratch image named ref of
// copies of this machine's files: files maps a path in the image to a file or directory here
// (a directory is copied whole; a symbolic link inside it to a file becomes a copy of that
// file, one to a directory an empty directory, a dangling one is left out). The image has no
// entrypoint and PATH HostImagePath. It needs no cluster, so a test can build it while its
// cluster starts.
func WriteHostFilesImage(archive, ref string, files map[string]string) error {
	var entries []imageFile
	dirs := map[string]bool{}
	addParents := func(p string) {
		for d := filepath.Dir(p); d != "/" && !dirs[d]; d = filepath.Dir(d) {
			dirs[d] = true
			entries = append(entries, imageFile{path: d + "/", mode: 0o755, dir: true})
		}
	}
	for _, imagePath := range slices.Sorted(maps.Keys(files)) {
		hostPath := files[imagePath]
		err := filepath.WalkDir(hostPath, func(p string, _ fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			target := filepath.Join(imagePath, strings.TrimPrefix(p, hostPath))
			info, err := os.Stat(p)
			if errors.Is(err, fs.ErrNotExist) {
				return nil // a dangling link
			}
			if err != nil {
				return err
			}
			addParents(target)
			if info.IsDir() {
				if !dirs[target] {
					dirs[target] = true
					entries = append(entries, imageFile{path: target + "/", mode: 0o755, dir: true})
				}
				return nil
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			entries = append(entries, imageFile{path: target, mode: int64(info.Mode().Perm()), data: data})
			return nil
		})
		if err != nil {
			return fmt.Errorf("copying %s into image %s: %w", hostPath, ref, err)
		}
	}
	entries = append(entries, imageFile{path: "/tmp/", mode: 0o1777, dir: true})
	return writeImageArchiveWithPath(archive, ref, nil, HostImagePath, entries)
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
