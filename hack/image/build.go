package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's fixed layout and identity.
const (
	entrypointPath  = "/trainstep"
	binDir          = "/usr/local/bin"
	caBundlePath    = "/etc/ssl/certs/ca-certificates.crt"
	nonRootUID      = 65532
	nonRootUserName = "nonroot"
	imagePath       = binDir + ":/usr/bin:/bin"
)

// epoch is the timestamp of every file and of the image itself, so two
// builds of the same sources give the same archive.
var epoch = time.Unix(0, 0).UTC()

// Options say what to build and where to write it.
type Options struct {
	ModuleRoot     string // the trainstep module's directory
	Output         string // archive path
	Tag            string // image reference recorded in the archive
	Arch           string // GOARCH of the binaries and the image
	CACertificates string // CA bundle on the build machine
	// CACertificatesSHA256, when set, is the bundle's required sha256 (hex):
	// the release's digest holds only with the bundle it was built with.
	CACertificatesSHA256 string
	Version              string // -X main.version for trainstep; empty: from the build info
}

func defaultOptions() Options {
	return Options{
		Tag:            "ghcr.io/trainstep/trainstep:latest",
		Arch:           "amd64",
		CACertificates: "/etc/ssl/certs/ca-certificates.crt",
	}
}

// Build compiles the binaries, assembles the image and writes the archive.
// It returns the digest of the archive's OCI manifest, under which a
// registry serves the image pushed with `skopeo copy --preserve-digests`, so a
// template can pin the release as <tag>@<digest>.
func Build(ctx context.Context, opts Options) (v1.Hash, error) {
	caBundle, err := os.ReadFile(opts.CACertificates)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("reading the CA certificates: %w", err)
	}
	if want := opts.CACertificatesSHA256; want != "" {
		if got := fmt.Sprintf("%x", sha256.Sum256(caBundle)); got != want {
			return v1.Hash{}, fmt.Errorf("the CA bundle %s has sha256 %s, want %s: built with it, the image would not be the one pinned", opts.CACertificates, got, want)
		}
	}
	work, err := os.MkdirTemp("", "trainstep-image-")
	if err != nil {
		return v1.Hash{}, fmt.Errorf("creating a build directory: %w", err)
	}
	defer os.RemoveAll(work)

	bins, err := buildBinaries(ctx, opts, filepath.Join(work, "bin"))
	if err != nil {
		return v1.Hash{}, err
	}
	files := rootFiles(bins, caBundle)
	layer, err := rootfsLayer(files)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("building the image layer: %w", err)
	}
	img, err := assemble(layer, opts)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("assembling the image: %w", err)
	}
	if err := writeArchive(img, opts.Tag, opts.Output, filepath.Join(work, "layout")); err != nil {
		return v1.Hash{}, fmt.Errorf("writing %s: %w", opts.Output, err)
	}
	return img.Digest()
}

// rootFiles is the whole file system of the image.
func rootFiles(bins builtBinaries, caBundle []byte) []file {
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:%s:/home/%s:/sbin/nologin\n",
		nonRootUserName, nonRootUID, nonRootUID, nonRootUserName, nonRootUserName)
	group := fmt.Sprintf("root:x:0:\n%s:x:%d:\n", nonRootUserName, nonRootUID)
	return []file{
		{path: "/etc/", mode: 0o755},
		{path: "/etc/passwd", mode: 0o644, data: []byte(passwd)},
		{path: "/etc/group", mode: 0o644, data: []byte(group)},
		{path: "/etc/ssl/", mode: 0o755},
		{path: "/etc/ssl/certs/", mode: 0o755},
		{path: caBundlePath, mode: 0o644, data: caBundle},
		{path: "/home/", mode: 0o755},
		{path: "/home/" + nonRootUserName + "/", mode: 0o700, uid: nonRootUID},
		{path: "/tmp/", mode: 0o1777},
		{path: entrypointPath, mode: 0o755, source: bins.trainstep},
		{path: "/usr/", mode: 0o755},
		{path: "/usr/local/", mode: 0o755},
		{path: binDir + "/", mode: 0o755},
		{path: binDir + "/demo-trainer", mode: 0o755, source: bins.demoTrainer},
	}
}

// assemble puts the layer on scratch with the runtime configuration.
func assemble(layer v1.Layer, opts Options) (v1.Image, error) {
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layer)
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", opts.Arch
	cfg.Created = v1.Time{Time: epoch}
	cfg.History = []v1.History{{Created: v1.Time{Time: epoch}, CreatedBy: "go run ./hack/image", Comment: "trainstep, the demo trainer, CA certificates, user nonroot"}}
	cfg.Config = v1.Config{
		Entrypoint: []string{entrypointPath},
		User:       fmt.Sprintf("%d:%d", nonRootUID, nonRootUID),
		WorkingDir: "/",
		Env: []string{
			"PATH=" + imagePath,
			"SSL_CERT_FILE=" + caBundlePath,
		},
		Labels: map[string]string{
			"org.opencontainers.image.title":       "trainstep",
			"org.opencontainers.image.description": "Runs one distributed training job as an Argo Workflows step, without a training operator",
			"org.opencontainers.image.source":      "https://github.com/trainstep/trainstep",
		},
	}
	if v := strings.TrimSpace(opts.Version); v != "" {
		cfg.Config.Labels["org.opencontainers.image.version"] = v
	}
	return mutate.ConfigFile(img, cfg)
}
