// Package ociimage builds an OCI image of one static binary, without a
// daemon and without a base image: FROM scratch, one layer holding the
// binary, a non-root user, one manifest a platform under one index, and
// the version and source as labels. The same binaries and Spec give the
// same digests: every time in it is Spec.Created.
package ociimage

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// User is the image's user and group: nobody's, by the number distroless
// uses, since the image has no /etc/passwd to name one.
const User = "65532:65532"

// Spec is the image to build.
type Spec struct {
	// Name is the binary's name in the image: /Name is its entrypoint.
	Name string
	// Binaries maps each platform ("linux/amd64", "linux/arm64") to the
	// static binary built for it.
	Binaries map[string]string
	// Version and Source become the labels org.opencontainers.image.version
	// and .source.
	Version, Source string
	// Created is every time the image holds (0: the Unix epoch).
	Created time.Time
}

// Build writes the image as an OCI image layout in dir (created, or
// appended to if it is one already) and returns the index's digest.
func Build(dir string, s Spec) (v1.Hash, error) {
	if s.Name == "" || strings.Contains(s.Name, "/") || len(s.Binaries) == 0 {
		return v1.Hash{}, errors.New("ociimage: a name without a slash and at least one binary")
	}
	created := s.Created
	if created.IsZero() {
		created = time.Unix(0, 0)
	}
	platforms := make([]string, 0, len(s.Binaries))
	for p := range s.Binaries {
		platforms = append(platforms, p)
	}
	sort.Strings(platforms) // the index's order does not depend on the map's
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range platforms {
		os_, arch, ok := strings.Cut(p, "/")
		if !ok || os_ == "" || arch == "" {
			return v1.Hash{}, fmt.Errorf("ociimage: platform %q: want os/arch", p)
		}
		img, err := image(s, s.Binaries[p], os_, arch, created)
		if err != nil {
			return v1.Hash{}, fmt.Errorf("ociimage: %s: %w", p, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: os_, Architecture: arch}}})
	}
	if _, err := layout.Write(dir, idx); err != nil {
		return v1.Hash{}, fmt.Errorf("ociimage: %w", err)
	}
	return idx.Digest()
}

// image is one platform's image: the binary as its only layer.
func image(s Spec, binary, os_, arch string, created time.Time) (v1.Image, error) {
	b, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	tarred, err := tarOf(s.Name, b, created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(tarred)), nil },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	if img, err = mutate.AppendLayers(img, layer); err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created = os_, arch, v1.Time{Time: created}
	cf.Config.User = User
	cf.Config.Entrypoint = []string{"/" + s.Name}
	cf.Config.WorkingDir = "/"
	cf.Config.Labels = map[string]string{"org.opencontainers.image.title": s.Name}
	if s.Version != "" {
		cf.Config.Labels["org.opencontainers.image.version"] = s.Version
	}
	if s.Source != "" {
		cf.Config.Labels["org.opencontainers.image.source"] = s.Source
	}
	cf.History = []v1.History{{Created: v1.Time{Time: created}, CreatedBy: "ociimage: /" + s.Name}}
	return mutate.ConfigFile(img, cf)
}

// tarOf is a layer holding one executable file, root's, at /name. The
// user runs it, but cannot replace it.
func tarOf(name string, b []byte, created time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdr := &tar.Header{Name: path.Clean(name), Mode: 0o755, Size: int64(len(b)), ModTime: created, Typeflag: tar.TypeReg,
		Format: tar.FormatPAX}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, err
	}
	if _, err := tw.Write(b); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
