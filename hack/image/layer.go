package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// file is one entry of the image's file system: a directory when path ends
// in "/", else a regular file with data or the contents of source.
type file struct {
	path   string
	mode   int64
	uid    int
	data   []byte
	source string
}

// rootfsLayer writes files, in order, into one uncompressed tar held in
// memory and wraps it as a gzip-compressed OCI layer. Owners, times and
// order are fixed, so the layer's digest depends only on the contents.
func rootfsLayer(files []file) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		if err := writeEntry(tw, f); err != nil {
			return nil, fmt.Errorf("adding %s: %w", f.path, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	opener := func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }
	return tarball.LayerFromOpener(opener, tarball.WithMediaType(types.OCILayer))
}

func writeEntry(tw *tar.Writer, f file) error {
	hdr := &tar.Header{
		Name:    strings.TrimPrefix(f.path, "/"),
		Mode:    f.mode,
		Uid:     f.uid,
		Gid:     f.uid,
		ModTime: epoch,
		Format:  tar.FormatPAX,
	}
	if strings.HasSuffix(f.path, "/") {
		hdr.Typeflag = tar.TypeDir
		return tw.WriteHeader(hdr)
	}
	data := f.data
	if f.source != "" {
		var err error
		if data, err = os.ReadFile(f.source); err != nil {
			return err
		}
	}
	hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(data))
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}
