package secretdata_test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/bosh-injector/bosh-injector/gather/gathering/secretdata"
)

type doc struct {
	Items []string `json:"items"`
}

func TestRoundTrip(t *testing.T) {
	small := doc{Items: []string{"a", "b"}}
	large := doc{Items: []string{strings.Repeat("property: value\n", 10000)}}
	for name, d := range map[string]doc{"small": small, "large": large} {
		enc, err := secretdata.Encode(d)
		if err != nil {
			t.Fatal(err)
		}
		if compressed := bytes.HasPrefix(enc, []byte{0x1f, 0x8b}); compressed != (name == "large") {
			t.Errorf("%s: compressed=%v", name, compressed)
		}
		again, _ := secretdata.Encode(d)
		if !bytes.Equal(enc, again) {
			t.Errorf("%s: encoding is not deterministic", name)
		}
		var got doc
		if err := secretdata.Decode(enc, &got); err != nil {
			t.Fatal(err)
		}
		if len(got.Items) != len(d.Items) || got.Items[0] != d.Items[0] {
			t.Errorf("%s: round trip changed the document", name)
		}
	}
}

func TestTooLarge(t *testing.T) {
	// Random text does not compress below the limit.
	b := make([]byte, secretdata.MaxSize)
	_, _ = rand.Read(b)
	_, err := secretdata.Encode(doc{Items: []string{hex.EncodeToString(b)}})
	if err == nil || !strings.Contains(err.Error(), "over the 1048576 bytes a Secret can hold") {
		t.Fatalf("want a size error, got %v", err)
	}
}
