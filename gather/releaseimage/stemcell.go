package releaseimage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Where a stemcell image can come from besides a registry, named as podman
// and skopeo name them.
const (
	// TransportOCI is an OCI image layout directory: oci:DIR[:NAME], NAME
	// the image's org.opencontainers.image.ref.name when DIR holds several.
	TransportOCI = "oci:"
	// TransportStorage is podman's local storage: containers-storage:IMAGE.
	TransportStorage = "containers-storage:"
)

// LocalStemcellName is what an OCI layout's stemcell is loaded into
// podman's storage as, tagged with its image ID's first 12 digits.
const LocalStemcellName = "localhost/bosh-injector-stemcell"

// refNameAnnotation names an image in an OCI layout's index.
const refNameAnnotation = "org.opencontainers.image.ref.name"

// OpenStemcell reads the stemcell image ref: from its registry, an OCI
// layout (oci:DIR[:NAME]) or podman's storage (containers-storage:IMAGE,
// saved as an OCI layout under work). A local stemcell is put into podman's
// storage for the compile containers, which run it by ID. OS and Version
// are left for the caller to name it.
func OpenStemcell(ctx context.Context, ref string, insecure bool, work string) (Stemcell, error) {
	switch {
	case strings.HasPrefix(ref, TransportOCI):
		dir, refName, _ := strings.Cut(strings.TrimPrefix(ref, TransportOCI), ":")
		s, err := fromLayout(dir, refName)
		if err != nil {
			return Stemcell{}, fmt.Errorf("stemcell image %s: %w", ref, err)
		}
		// The compile containers run it from podman's storage; `podman pull
		// oci:DIR` would name it after DIR, which need not be a valid name.
		if err := Load(ctx, LocalStemcellName+":"+s.Ref[:12], s.Image, work); err != nil {
			return Stemcell{}, fmt.Errorf("stemcell image %s: %w", ref, err)
		}
		return s, nil
	case strings.HasPrefix(ref, TransportStorage):
		image := strings.TrimPrefix(ref, TransportStorage)
		if _, err := podman(ctx, "image", "save", "-q", "--format", "oci-dir", "-o", work, image); err != nil {
			return Stemcell{}, fmt.Errorf("stemcell image %s: %w", ref, err)
		}
		s, err := fromLayout(work, "")
		if err != nil {
			return Stemcell{}, fmt.Errorf("stemcell image %s: %w", ref, err)
		}
		return s, nil
	}
	r, err := name.ParseReference(ref, nameOptions(insecure)...)
	if err != nil {
		return Stemcell{}, fmt.Errorf("--stemcell-image: %w", err)
	}
	img, err := remote.Image(r, remoteOptions(ctx)...)
	if err != nil {
		return Stemcell{}, fmt.Errorf("stemcell image %s: %w", ref, err)
	}
	s, err := stemcellOf(img)
	if err != nil {
		return Stemcell{}, err
	}
	s.Ref = r.Context().Digest(s.Digest).String()
	return s, nil
}

// fromLayout is the image of the OCI layout in dir named refName, or its
// only image when refName is empty; Ref is its ID.
func fromLayout(dir, refName string) (Stemcell, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return Stemcell{}, err
	}
	index, err := p.ImageIndex()
	if err != nil {
		return Stemcell{}, err
	}
	m, err := index.IndexManifest()
	if err != nil {
		return Stemcell{}, err
	}
	var found []v1.Descriptor
	var names []string
	for _, d := range m.Manifests {
		names = append(names, d.Annotations[refNameAnnotation])
		if refName == "" || d.Annotations[refNameAnnotation] == refName {
			found = append(found, d)
		}
	}
	if len(found) != 1 {
		return Stemcell{}, fmt.Errorf("%d images match %q in the OCI layout (its images: %s); name one as oci:DIR:NAME", len(found), refName, strings.Join(names, ", "))
	}
	img, err := p.Image(found[0].Digest)
	if err != nil {
		return Stemcell{}, err
	}
	s, err := stemcellOf(img)
	if err != nil {
		return Stemcell{}, err
	}
	s.Ref = strings.TrimPrefix(s.ID, "sha256:")
	return s, nil
}

func stemcellOf(img v1.Image) (Stemcell, error) {
	d, err := img.Digest()
	if err != nil {
		return Stemcell{}, err
	}
	id, err := img.ConfigName()
	if err != nil {
		return Stemcell{}, err
	}
	return Stemcell{Image: img, Digest: d.String(), ID: id.String()}, nil
}

// podman runs podman and returns its output; its error says what podman
// said.
func podman(ctx context.Context, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "podman", args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", errors.Join(fmt.Errorf("podman %s: %w", strings.Join(args, " "), err), errors.New(strings.TrimSpace(stderr.String())))
	}
	return stdout.String(), nil
}
