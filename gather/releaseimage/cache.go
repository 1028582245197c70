package releaseimage

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/bosh-injector/bosh-injector/gather/releaseimage/compile"
	"github.com/bosh-injector/bosh-injector/gather/releaseimage/layer"
)

// Annotations of a compiled package in a registry cache, for people
// browsing it; the tag is what release-image looks packages up by.
const (
	AnnotationPackage     = "org.opencontainers.image.title"
	AnnotationFingerprint = "io.bosh-injector.package.fingerprint"
	AnnotationStemcell    = "io.bosh-injector.stemcell.id"
)

// registryCache keeps compiled packages in a registry repository, each a
// one-layer image tagged with its cache key (a sha256 hex, a valid tag). The
// layer is the disk cache's file byte for byte, so images built from a
// fetched package have the digests of the machine that compiled it.
type registryCache struct {
	repo       name.Repository
	stemcellID string
}

func newRegistryCache(repository string, insecure bool, stemcellID string) (*registryCache, error) {
	repo, err := name.NewRepository(repository, nameOptions(insecure)...)
	if err != nil {
		return nil, fmt.Errorf("--cache-repository: %w", err)
	}
	return &registryCache{repo: repo, stemcellID: stemcellID}, nil
}

// Fetch implements compile.Shared.
func (c *registryCache) Fetch(ctx context.Context, key, path string) (bool, error) {
	ref := c.repo.Tag(key)
	img, err := remote.Image(ref, remoteOptions(ctx)...)
	if notFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	layers, err := img.Layers()
	if err != nil {
		return false, err
	}
	if len(layers) != 1 {
		return false, fmt.Errorf("%s has %d layers, not one compiled package", ref, len(layers))
	}
	// remote verifies the blob's digest as it is read.
	blob, err := layers[0].Compressed()
	if err != nil {
		return false, err
	}
	defer blob.Close()
	if err := layer.Save(path, blob); err != nil {
		return false, fmt.Errorf("fetching %s: %w", ref, err)
	}
	return true, nil
}

// Store implements compile.Shared.
func (c *registryCache) Store(ctx context.Context, key string, p compile.Package, path string) error {
	ref := c.repo.Tag(key)
	_, err := remote.Head(ref, remoteOptions(ctx)...)
	if err == nil {
		return nil
	}
	if !notFound(err) {
		return err
	}
	l, err := layer.Open(path, types.OCILayer)
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON), l)
	if err != nil {
		return err
	}
	img = mutate.Annotations(img, map[string]string{AnnotationPackage: p.Name, AnnotationFingerprint: p.Fingerprint,
		AnnotationStemcell: c.stemcellID}).(v1.Image)
	if err := remote.Write(ref, img, remoteOptions(ctx)...); err != nil {
		return fmt.Errorf("pushing %s: %w", ref, err)
	}
	return nil
}

func notFound(err error) bool {
	var terr *transport.Error
	return errors.As(err, &terr) && terr.StatusCode == http.StatusNotFound
}
