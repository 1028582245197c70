package releaseimage

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// nameOptions parse references; insecure allows plain HTTP registries
// (localhost and 127.0.0.1 always are).
func nameOptions(insecure bool) []name.Option {
	if insecure {
		return []name.Option{name.Insecure}
	}
	return nil
}

// remoteOptions authenticate from the docker and podman configurations.
func remoteOptions(ctx context.Context) []remote.Option {
	return []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}
}

// Push writes images to their registries under tags (one per image):
// every image by digest first, then the tags. An upload failing part way
// (a blob, a registry refusing) then moves no tag; only the tagging, a
// manifest write per image, can stop between tags.
func Push(ctx context.Context, tags []string, images []v1.Image, insecure bool) error {
	refs := make([]name.Tag, len(tags))
	for i, tag := range tags {
		t, err := name.NewTag(tag, nameOptions(insecure)...)
		if err != nil {
			return err
		}
		d, err := images[i].Digest()
		if err != nil {
			return err
		}
		if err := remote.Write(t.Digest(d.String()), images[i], remoteOptions(ctx)...); err != nil {
			return fmt.Errorf("pushing %s: %w", tag, err)
		}
		refs[i] = t
	}
	for i, t := range refs {
		if err := remote.Tag(t, images[i], remoteOptions(ctx)...); err != nil {
			return fmt.Errorf("tagging %s: %w", tags[i], err)
		}
	}
	return nil
}

// WriteLayout adds img to the OCI image layout in dir (created when
// missing), named ref.
func WriteLayout(dir, ref string, img v1.Image) error {
	p, err := layout.FromPath(dir)
	if err != nil {
		if p, err = layout.Write(dir, empty.Index); err != nil {
			return fmt.Errorf("--oci-layout %s: %w", dir, err)
		}
	}
	return p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref}))
}

// Load loads img into local podman storage as ref.
func Load(ctx context.Context, ref string, img v1.Image, work string) error {
	r, err := name.ParseReference(ref)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}
	archive := filepath.Join(work, "load.tar")
	if err := tarball.WriteToFile(archive, r, img); err != nil {
		return err
	}
	defer os.Remove(archive)
	_, err = podman(ctx, "load", "-q", "-i", archive)
	return err
}
