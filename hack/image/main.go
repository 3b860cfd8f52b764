// Command image builds the trainstep container image without a container
// engine and writes it as one archive: an OCI image layout (oci-layout,
// index.json, blobs/) that also carries Docker's manifest.json, so
// `docker load`, `podman load`, `ctr images import`, `kind load
// image-archive` and `skopeo copy oci-archive:` all accept it.
//
// The image is FROM scratch: static linux binaries of trainstep (the
// entrypoint, /trainstep) and the demo trainer (on PATH), the build machine's
// CA certificates, and a non-root user, 65532. deploy/Dockerfile builds the
// same image with Docker.
//
// The same sources, Go toolchain and CA bundle give the same archive, so
// the same manifest digest: `make image-pin` writes it into the shipped
// references (<repo>:<tag>@sha256:<digest>), `make image-verify` rebuilds and
// compares.
//
// It must stay a build tool: nothing in the product imports it, and it
// writes nothing but the archive it is asked for (and, with -digest-file,
// the archive's manifest digest).
//
//	go run ./hack/image -o bin/trainstep-image.tar [-tag ghcr.io/trainstep/trainstep:latest] [-digest-file F]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	opts := defaultOptions()
	flag.StringVar(&opts.Output, "o", "", "archive to write (required)")
	flag.StringVar(&opts.Tag, "tag", opts.Tag, "image reference recorded in the archive")
	flag.StringVar(&opts.Arch, "arch", opts.Arch, "CPU architecture of the binaries (GOARCH)")
	flag.StringVar(&opts.CACertificates, "ca-certificates", opts.CACertificates, "CA bundle copied to /etc/ssl/certs/ca-certificates.crt")
	flag.StringVar(&opts.CACertificatesSHA256, "ca-certificates-sha256", "", "refuse a CA bundle whose sha256 (hex) is not this one")
	flag.StringVar(&opts.Version, "version", "", "version stamped into trainstep (default: the module version)")
	digestFile := flag.String("digest-file", "", "also write the image's manifest digest (sha256:…) to this file")
	flag.Parse()
	if opts.Output == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: image -o ARCHIVE [-tag REF] [-arch GOARCH] [-ca-certificates FILE] [-ca-certificates-sha256 HEX] [-version V] [-digest-file FILE]")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	root, err := moduleRoot()
	var digest fmt.Stringer
	if err == nil {
		opts.ModuleRoot = root
		digest, err = Build(ctx, opts)
	}
	if err == nil && *digestFile != "" {
		err = os.WriteFile(*digestFile, []byte(digest.String()+"\n"), 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "image: wrote %s (%s, linux/%s), manifest digest %s\n", opts.Output, opts.Tag, opts.Arch, digest)
}
