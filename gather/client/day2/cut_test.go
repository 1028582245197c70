package day2

import (
	"bytes"
	"compress/gzip"
	"testing"
)

// TestGzipCheck: a whole gzip stream passes, a cut or empty one is an
// error, and every byte reaches the writer either way.
func TestGzipCheck(t *testing.T) {
	var whole bytes.Buffer
	zw := gzip.NewWriter(&whole)
	_, _ = zw.Write(bytes.Repeat([]byte("log line\n"), 1000))
	_ = zw.Close()
	for _, tc := range []struct {
		name string
		data []byte
		ok   bool
	}{{"whole", whole.Bytes(), true}, {"cut", whole.Bytes()[:whole.Len()-4], false}, {"empty", nil, false}} {
		var out bytes.Buffer
		c := newGzipCheck(&out)
		_, _ = c.Write(tc.data)
		if err := c.Close(); (err == nil) != tc.ok || !bytes.Equal(out.Bytes(), tc.data) {
			t.Errorf("%s: %v, %d of %d bytes passed", tc.name, err, out.Len(), len(tc.data))
		}
	}
}
