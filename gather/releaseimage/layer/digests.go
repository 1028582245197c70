package layer

import (
	"compress/gzip"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Digests are a layer file's: its size and digest (the blob's) and its
// DiffID (the tar's), kept in a file beside it (<layer>.digests). An image
// names every layer by both: computing the DiffID unzips the layer, a second
// or more for a layer holding a toolchain, at every image built from it.
type Digests struct {
	Size   int64
	Digest v1.Hash
	DiffID v1.Hash
}

func digestsPath(layer string) string { return layer + ".digests" }

// Open returns the layer file at path as an image layer of media type mt,
// its digests read from beside it; when they are missing or not of this
// file (a layer fetched from a shared cache, or written before they were
// kept) they are computed once and kept.
func Open(path string, mt types.MediaType) (v1.Layer, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	d, err := readDigests(path)
	if err != nil || d.Size != info.Size() {
		if d, err = compute(path); err != nil {
			return nil, fmt.Errorf("layer %s: %w", path, err)
		}
		if err := writeDigests(path, d); err != nil {
			return nil, err
		}
	}
	return partial.CompressedToLayer(&file{path: path, digests: d, mediaType: mt})
}

func readDigests(path string) (Digests, error) {
	var d Digests
	data, err := os.ReadFile(digestsPath(path))
	if err != nil {
		return d, err
	}
	return d, json.Unmarshal(data, &d)
}

func writeDigests(path string, d Digests) error {
	data, err := json.Marshal(d)
	if err != nil {
		return err
	}
	return atomically(digestsPath(path), func(f *os.File) error {
		_, err := f.Write(data)
		return errors.Join(err, f.Close())
	})
}

// compute reads the layer file for its digests.
func compute(path string) (Digests, error) {
	f, err := os.Open(path)
	if err != nil {
		return Digests{}, err
	}
	defer f.Close()
	blob := newCounter()
	gz, err := gzip.NewReader(io.TeeReader(f, blob))
	if err != nil {
		return Digests{}, err
	}
	diff := sha256.New()
	if _, err := io.Copy(diff, gz); err != nil {
		return Digests{}, err
	}
	// The rest of the blob after the gzip stream, if any.
	if _, err := io.Copy(blob, f); err != nil {
		return Digests{}, err
	}
	return Digests{Size: blob.n, Digest: hashOf(blob.h), DiffID: hashOf(diff)}, nil
}

// counter hashes and counts what is written to it.
type counter struct {
	h hash.Hash
	n int64
}

func newCounter() *counter { return &counter{h: sha256.New()} }

func (c *counter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return c.h.Write(p)
}

func hashOf(h hash.Hash) v1.Hash {
	return v1.Hash{Algorithm: "sha256", Hex: fmt.Sprintf("%x", h.Sum(nil))}
}

// file is a layer file with known digests.
type file struct {
	path      string
	digests   Digests
	mediaType types.MediaType
}

func (f *file) Digest() (v1.Hash, error)            { return f.digests.Digest, nil }
func (f *file) DiffID() (v1.Hash, error)            { return f.digests.DiffID, nil }
func (f *file) Size() (int64, error)                { return f.digests.Size, nil }
func (f *file) MediaType() (types.MediaType, error) { return f.mediaType, nil }
func (f *file) Compressed() (io.ReadCloser, error)  { return os.Open(f.path) }
