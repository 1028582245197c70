// Package secretdata encodes the documents bosh-injector keeps in Secrets:
// JSON, gzip-compressed when large so a realistic instance group stays well
// under the 1 MiB Secret limit. Decoding recognises gzip by its magic bytes,
// so readers need not know which form was written.
package secretdata

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
)

// CompressAbove is the JSON size above which Encode compresses.
const CompressAbove = 64 << 10

// MaxSize is what a Secret's data may hold in all; Encode fails above it.
const MaxSize = 1 << 20

var gzipMagic = []byte{0x1f, 0x8b}

// Encode returns v as JSON, gzip-compressed when over CompressAbove. The
// output is deterministic, so equal content gives equal bytes.
func Encode(v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	if len(data) > CompressAbove {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		if _, err := zw.Write(data); err != nil {
			return nil, err
		}
		if err := zw.Close(); err != nil {
			return nil, err
		}
		data = buf.Bytes()
	}
	if len(data) > MaxSize {
		return nil, fmt.Errorf("%d bytes even compressed, over the %d bytes a Secret can hold", len(data), MaxSize)
	}
	return data, nil
}

// Decode reads what Encode wrote into v.
func Decode(data []byte, v any) error {
	if bytes.HasPrefix(data, gzipMagic) {
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return err
		}
		if data, err = io.ReadAll(io.LimitReader(zr, 64*MaxSize)); err != nil {
			return err
		}
	}
	return json.Unmarshal(data, v)
}

// Digest is the SHA-256 of a Secret's data, keys sorted, each key and value
// length-prefixed: what the operator records of a version it accepted, and
// what a pod checks the version it mounted against.
func Digest(data map[string][]byte) string {
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(data)) {
		fmt.Fprintf(h, "%d:%s%d:", len(k), k, len(data[k]))
		h.Write(data[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}
