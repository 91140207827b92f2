package ociimage_test

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/ociimage"
)

// build compiles testdata/hello, static, for linux/arch: make image packs
// devicesim and deviceagent the same way.
func build(t *testing.T, arch string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "hello-"+arch)
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, "./testdata/hello")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", b)
	return out
}

// The image read back as a registry or a runtime reads it: an OCI index
// with a manifest for each platform; each manifest's config names the
// platform, a non-root user, the entrypoint and the labels; its one layer
// holds the binary alone, executable; and the binary taken out of the
// layer runs (the other platform's under qemu, where it is installed).
// Built twice, the image has the same digest.
func TestTheImageReadsBackAndItsBinaryRuns(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("linux binaries")
	}
	bins := map[string]string{"linux/amd64": build(t, "amd64"), "linux/arm64": build(t, "arm64")}
	spec := ociimage.Spec{Name: "hello", Binaries: bins, Version: "v1.2.3", Source: "https://github.com/herdguard/herdguard",
		Created: time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)}
	dir := filepath.Join(t.TempDir(), "image")
	digest, err := ociimage.Build(dir, spec)
	require.NoError(t, err)
	again, err := ociimage.Build(filepath.Join(t.TempDir(), "again"), spec)
	require.NoError(t, err)
	assert.Equal(t, digest, again, "reproducible")

	idx, err := layout.ImageIndexFromPath(dir) // index.json, as a runtime reads a layout
	require.NoError(t, err)
	got, err := idx.Digest()
	require.NoError(t, err)
	assert.Equal(t, digest, got)
	mt, err := idx.MediaType()
	require.NoError(t, err)
	assert.Equal(t, types.OCIImageIndex, mt)
	im, err := idx.IndexManifest()
	require.NoError(t, err)
	require.Len(t, im.Manifests, 2)
	for _, d := range im.Manifests {
		require.NotNil(t, d.Platform)
		plat := d.Platform.OS + "/" + d.Platform.Architecture
		img, err := idx.Image(d.Digest)
		require.NoError(t, err)
		m, err := img.Manifest()
		require.NoError(t, err)
		assert.Equal(t, types.OCIManifestSchema1, m.MediaType, plat)
		assert.Equal(t, types.OCIConfigJSON, m.Config.MediaType, plat)
		require.Len(t, m.Layers, 1, "FROM scratch: the binary's layer alone")
		assert.Equal(t, types.OCILayer, m.Layers[0].MediaType)
		cf, err := img.ConfigFile()
		require.NoError(t, err)
		assert.Equal(t, d.Platform.OS, cf.OS)
		assert.Equal(t, d.Platform.Architecture, cf.Architecture)
		assert.Equal(t, ociimage.User, cf.Config.User, "not root")
		assert.Equal(t, []string{"/hello"}, cf.Config.Entrypoint)
		assert.Equal(t, "v1.2.3", cf.Config.Labels["org.opencontainers.image.version"])
		assert.Equal(t, "https://github.com/herdguard/herdguard", cf.Config.Labels["org.opencontainers.image.source"])

		bin := extract(t, img, "hello")
		want, err := os.ReadFile(bins[plat])
		require.NoError(t, err)
		assert.True(t, bytes.Equal(want, bin), "%s: the binary as built", plat)
		f, err := elf.NewFile(bytes.NewReader(bin))
		require.NoError(t, err)
		assert.Equal(t, map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[d.Platform.Architecture], f.Machine)
		run(t, plat, bin)
	}
}

// extract returns the one file in img's one layer, checking that it is
// name, executable, and all the layer holds.
func extract(t *testing.T, img v1.Image, name string) []byte {
	t.Helper()
	layers, err := img.Layers()
	require.NoError(t, err)
	rc, err := layers[0].Uncompressed()
	require.NoError(t, err)
	defer rc.Close()
	tr := tar.NewReader(rc)
	hdr, err := tr.Next()
	require.NoError(t, err)
	assert.Equal(t, name, hdr.Name)
	assert.Equal(t, int64(0o755), hdr.Mode)
	b, err := io.ReadAll(tr)
	require.NoError(t, err)
	_, err = tr.Next()
	assert.Equal(t, io.EOF, err, "one file")
	return b
}

// run runs the binary, natively on its own architecture and under qemu on
// the other one.
func run(t *testing.T, plat string, bin []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hello")
	require.NoError(t, os.WriteFile(path, bin, 0o755))
	var cmd *exec.Cmd
	switch {
	case plat == "linux/"+runtime.GOARCH:
		cmd = exec.Command(path)
	default:
		qemu, err := exec.LookPath(map[string]string{"linux/amd64": "qemu-x86_64-static", "linux/arm64": "qemu-aarch64-static"}[plat])
		if err != nil {
			t.Logf("%s: no qemu for it here; its ELF header is checked", plat)
			return
		}
		cmd = exec.Command(qemu, path)
	}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "hello from "+plat, plat)
}
