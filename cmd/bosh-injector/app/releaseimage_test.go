package app

import (
	"context"
	"strings"
	"testing"

	"github.com/bosh-injector/bosh-injector/gather/releaseimage"
)

// The library names its Config fields; release-image's errors name its
// flags.
func TestReleaseImageErrorsNameFlags(t *testing.T) {
	for _, c := range []struct {
		cfg  releaseimage.Config
		want string
	}{
		{releaseimage.Config{}, "--repository is required: images are named <repository>/<release>:<stemcell os>-<stemcell version>-<release version>"},
		{releaseimage.Config{Repository: "r"}, "--stemcell-image is required"},
		{releaseimage.Config{Repository: "r", StemcellImage: "s", Manifest: []byte("[")}, "--manifest: "},
	} {
		_, err := releaseimage.Run(context.Background(), c.cfg)
		if err == nil || !strings.HasPrefix(flagNames(err).Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
}
