package main

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// buildArchive runs what `make image` runs, into a temporary file.
func buildArchive(t *testing.T) (string, Options, v1.Hash) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds two binaries for linux; skipped with -short")
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	opts := defaultOptions()
	opts.ModuleRoot, opts.Output = root, filepath.Join(t.TempDir(), "trainstep-image.tar")
	digest, err := Build(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return opts.Output, opts, digest
}

func TestArchiveHoldsARunnableImage(t *testing.T) {
	archive, opts, digest := buildArchive(t)
	tag, err := name.NewTag(opts.Tag)
	if err != nil {
		t.Fatal(err)
	}
	// What `docker load` reads: manifest.json.
	docker, err := tarball.ImageFromPath(archive, &tag)
	if err != nil {
		t.Fatalf("reading the archive as a docker archive: %v", err)
	}
	// What `skopeo copy oci-archive:`, `ctr images import` read: the OCI layout.
	oci := ociImage(t, archive)
	// The digest Build reports, to pin a template's image by, is the manifest's.
	if got, err := oci.Digest(); err != nil || got != digest {
		t.Errorf("the OCI manifest's digest is %s (%v), Build reported %s", got, err, digest)
	}
	// Both name the same configuration and layers (the manifest docker
	// builds from manifest.json differs from the OCI one by its media types).
	dockerConfig, _ := docker.ConfigName()
	ociConfig, _ := oci.ConfigName()
	if dockerConfig != ociConfig {
		t.Errorf("manifest.json names configuration %s, index.json %s", dockerConfig, ociConfig)
	}
	if d, o := diffIDs(t, docker), diffIDs(t, oci); !cmp.Equal(d, o) || len(o) != 1 {
		t.Errorf("layers: manifest.json %v, index.json %v, want the same single layer", d, o)
	}

	cfg, err := oci.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"/trainstep"}, cfg.Config.Entrypoint); diff != "" {
		t.Errorf("entrypoint (-want +got):\n%s", diff)
	}
	if cfg.Config.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532 (non-root)", cfg.Config.User)
	}
	if cfg.OS != "linux" || cfg.Architecture != opts.Arch {
		t.Errorf("platform %s/%s, want linux/%s", cfg.OS, cfg.Architecture, opts.Arch)
	}

	files := imageFiles(t, oci)
	for _, path := range []string{"trainstep", onPath(t, cfg, files, "demo-trainer")} {
		checkStaticLinuxBinary(t, path, files[path])
	}
	if ca, _ := os.ReadFile(opts.CACertificates); len(ca) == 0 || !bytes.Equal(files[strings.TrimPrefix(caBundlePath, "/")].data, ca) {
		t.Errorf("%s is not the build machine's CA bundle", caBundlePath)
	}
	if !strings.Contains(string(files["etc/passwd"].data), ":65532:65532:") {
		t.Errorf("/etc/passwd has no user 65532:\n%s", files["etc/passwd"].data)
	}
	if tmp, ok := files["tmp/"]; !ok || tmp.mode&0o1777 != 0o1777 {
		t.Errorf("/tmp missing or not world-writable with the sticky bit (%o)", tmp.mode)
	}
	runFromImage(t, files["trainstep"].data, []string{"version"}, "trainstep ")
	runFromImage(t, files[onPath(t, cfg, files, "demo-trainer")].data, []string{"-help"}, "-step-delay")
}

func TestArchiveIsReproducible(t *testing.T) {
	first, _, _ := buildArchive(t)
	second, _, _ := buildArchive(t)
	a, _ := os.ReadFile(first)
	b, _ := os.ReadFile(second)
	if !bytes.Equal(a, b) {
		t.Errorf("two builds of the same sources differ (%d and %d bytes)", len(a), len(b))
	}
}

func diffIDs(t *testing.T, img v1.Image) []string {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, l := range layers {
		id, err := l.DiffID()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id.String())
	}
	return ids
}

// ociImage extracts the archive and opens it as an OCI image layout.
func ociImage(t *testing.T, archive string) v1.Image {
	t.Helper()
	dir := t.TempDir()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, filepath.FromSlash(hdr.Name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	index, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatalf("reading the OCI layout: %v", err)
	}
	manifest, err := index.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(manifest.Manifests) != 1 {
		t.Fatalf("index.json lists %d images, want 1", len(manifest.Manifests))
	}
	img, err := index.Image(manifest.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

type imageFile struct {
	mode int64
	data []byte
}

// imageFiles is the image's flattened file system, by path without the
// leading "/" (directories end in "/").
func imageFiles(t *testing.T, img v1.Image) map[string]imageFile {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	files := map[string]imageFile{}
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(hdr.Name, "/")
		if hdr.Typeflag == tar.TypeDir && !strings.HasSuffix(name, "/") {
			name += "/"
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[name] = imageFile{mode: hdr.Mode, data: data}
	}
}

// onPath finds a command the way a container runtime does: in the
// directories of the image's PATH. It returns the file's path in files.
func onPath(t *testing.T, cfg *v1.ConfigFile, files map[string]imageFile, command string) string {
	t.Helper()
	for _, env := range cfg.Config.Env {
		if path, ok := strings.CutPrefix(env, "PATH="); ok {
			for _, dir := range strings.Split(path, ":") {
				p := strings.TrimPrefix(filepath.Join(dir, command), "/")
				if f, ok := files[p]; ok && f.mode&0o111 != 0 {
					return p
				}
			}
			t.Fatalf("%s is not in any directory of PATH=%s", command, path)
		}
	}
	t.Fatal("the image sets no PATH")
	return ""
}

// checkStaticLinuxBinary: an executable ELF for linux/amd64 without a
// dynamic loader, so it runs in an image without libc.
func checkStaticLinuxBinary(t *testing.T, path string, f imageFile) {
	t.Helper()
	if f.mode&0o111 == 0 {
		t.Errorf("/%s is not executable (mode %o)", path, f.mode)
	}
	bin, err := elf.NewFile(bytes.NewReader(f.data))
	if err != nil {
		t.Errorf("/%s is not an ELF binary: %v", path, err)
		return
	}
	if bin.Machine != elf.EM_X86_64 {
		t.Errorf("/%s is for %s, want x86-64", path, bin.Machine)
	}
	for _, p := range bin.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("/%s is dynamically linked; it cannot run FROM scratch", path)
		}
	}
}

// runFromImage runs a binary taken out of the image, when this machine can,
// and checks its output names the program.
func runFromImage(t *testing.T, binary []byte, args []string, want string) {
	t.Helper()
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		return
	}
	path := filepath.Join(t.TempDir(), "bin")
	if err := os.WriteFile(path, binary, 0o755); err != nil {
		t.Fatal(err)
	}
	out, _ := exec.Command(path, args...).CombinedOutput()
	if !strings.Contains(string(out), want) {
		t.Errorf("%s %s printed %q, want it to contain %q", filepath.Base(path), strings.Join(args, " "), out, want)
	}
}

// `make image` stamps VERSION into trainstep and the image's labels, so
// `trainstep version` in the image says which build it is.
func TestMakeImageStampsTheVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the image; skipped with -short")
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(t.TempDir(), "bin", "trainstep-image.tar")
	make := exec.Command("make", "image", "BIN="+filepath.Dir(archive), "VERSION=v9.8.7-test", "IMAGE=registry.example.com/trainstep:v9.8.7-test")
	make.Dir = root
	if out, err := make.CombinedOutput(); err != nil {
		t.Fatalf("make image: %v\n%s", err, out)
	}
	oci := ociImage(t, archive)
	cfg, err := oci.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Config.Labels["org.opencontainers.image.version"]; got != "v9.8.7-test" {
		t.Errorf("label org.opencontainers.image.version = %q, want v9.8.7-test", got)
	}
	tag, err := name.NewTag("registry.example.com/trainstep:v9.8.7-test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tarball.ImageFromPath(archive, &tag); err != nil {
		t.Errorf("the archive is not tagged with IMAGE: %v", err)
	}
	runFromImage(t, imageFiles(t, oci)["trainstep"].data, []string{"version"}, "trainstep v9.8.7-test (")
}
