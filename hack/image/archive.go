package main

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// Annotations on the index entry that name the image: containerd's (full
// reference, read by `ctr images import`) and the OCI one (the tag).
const (
	annotationContainerdName = "io.containerd.image.name"
	annotationOCIRefName     = "org.opencontainers.image.ref.name"
)

// dockerManifestEntry is one image of Docker's manifest.json, the file
// `docker load` reads; its paths point into the OCI layout's blobs.
type dockerManifestEntry struct {
	Config   string
	RepoTags []string
	Layers   []string
}

// writeArchive writes img as an OCI image layout in layoutDir, then tars
// that layout plus a Docker manifest.json into output.
func writeArchive(img v1.Image, tag, output, layoutDir string) error {
	ref, err := name.NewTag(tag)
	if err != nil {
		return fmt.Errorf("parsing the tag: %w", err)
	}
	path, err := layout.Write(layoutDir, empty.Index)
	if err != nil {
		return err
	}
	err = path.AppendImage(img, layout.WithAnnotations(map[string]string{
		annotationContainerdName: containerdName(ref),
		annotationOCIRefName:     ref.TagStr(),
	}))
	if err != nil {
		return err
	}
	manifest, err := dockerManifest(img, ref)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(output), 0o755); err != nil {
		return err
	}
	return tarDirectory(layoutDir, output, map[string][]byte{"manifest.json": manifest})
}

// containerdName is the reference containerd records for the image: the
// kubelet asks for Docker Hub images as docker.io/<repository>:<tag>
// (docker.io/library/ for official ones), while go-containerregistry names
// that registry index.docker.io, under which a pod would never find it.
func containerdName(ref name.Tag) string {
	if ref.RegistryStr() == name.DefaultRegistry {
		return "docker.io/" + ref.RepositoryStr() + ":" + ref.TagStr()
	}
	return ref.Name()
}

func dockerManifest(img v1.Image, ref name.Tag) ([]byte, error) {
	blob := func(h v1.Hash) string { return "blobs/" + h.Algorithm + "/" + h.Hex }
	cfg, err := img.ConfigName()
	if err != nil {
		return nil, err
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	entry := dockerManifestEntry{Config: blob(cfg), RepoTags: []string{ref.String()}}
	for _, l := range layers {
		digest, err := l.Digest()
		if err != nil {
			return nil, err
		}
		entry.Layers = append(entry.Layers, blob(digest))
	}
	return json.Marshal([]dockerManifestEntry{entry})
}

// tarDirectory writes every file under dir, sorted by path, plus extra
// files at the top, into the tar file output.
func tarDirectory(dir, output string, extra map[string][]byte) (err error) {
	var paths []string
	walkErr := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		paths = append(paths, filepath.ToSlash(rel))
		return err
	})
	if walkErr != nil {
		return walkErr
	}
	sort.Strings(paths)

	out, err := os.Create(output)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	}()
	tw := tar.NewWriter(out)
	for _, p := range paths {
		if err := addFile(tw, p, filepath.Join(dir, filepath.FromSlash(p))); err != nil {
			return err
		}
	}
	names := make([]string, 0, len(extra))
	for n := range extra {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		hdr := &tar.Header{Name: n, Mode: 0o644, Size: int64(len(extra[n])), ModTime: epoch, Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(extra[n]); err != nil {
			return err
		}
	}
	return tw.Close()
}

func addFile(tw *tar.Writer, name, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	hdr := &tar.Header{Name: name, Mode: 0o644, Size: info.Size(), ModTime: epoch, Typeflag: tar.TypeReg}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err = io.Copy(tw, f)
	return err
}
