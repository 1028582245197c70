package releaseimage_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/bosh-injector/bosh-injector/gather/releaseimage"
)

// A push failing on its second image moves no tag: the first image is in
// the registry by digest only.
func TestPushFailingPartWayMovesNoTag(t *testing.T) {
	reg := registry.New()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v2/fixtures/refused/") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"errors":[{"code":"DENIED","message":"refused by the test"}]}`))
			return
		}
		reg.ServeHTTP(w, r)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")

	var images []v1.Image
	for range 2 {
		img, err := random.Image(64, 2)
		if err != nil {
			t.Fatal(err)
		}
		images = append(images, img)
	}
	tags := []string{host + "/fixtures/accepted:1", host + "/fixtures/refused:1"}
	err := releaseimage.Push(context.Background(), tags, images, true)
	if err == nil || !strings.Contains(err.Error(), "pushing "+tags[1]) {
		t.Fatalf("error %v, want one naming %s", err, tags[1])
	}
	head := func(ref string) error {
		r, err := name.ParseReference(ref, name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		_, err = remote.Head(r)
		return err
	}
	if head(tags[0]) == nil {
		t.Errorf("%s was tagged", tags[0])
	}
	d, _ := images[0].Digest()
	if err := head(host + "/fixtures/accepted@" + d.String()); err != nil {
		t.Errorf("the first image is not in the registry by digest: %v", err)
	}
}
