package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/bosh-injector/bosh-injector/gather/model/deployment"
	"github.com/bosh-injector/bosh-injector/gather/model/inputfile"
	"github.com/bosh-injector/bosh-injector/gather/model/yamlvalue"
	"github.com/bosh-injector/bosh-injector/gather/releaseimage"
)

func init() {
	register(func(g *globalOptions) *cobra.Command {
		var cfg releaseimage.Config
		var manifestPath string
		var standInFlags, opsPaths []string
		cmd := &cobra.Command{
			Use:   "release-image RELEASE.tgz|RELEASE-DIR...",
			Short: "Build OCI images of BOSH release tarballs or release directories, compiling source packages on a stemcell image",
			Long: `release-image reads BOSH release tarballs (source releases from bosh create-release
--tarball, compiled ones from bosh export-release) or release directories (a checkout
with src/, blobs/ and config/, read as bosh create-release does, no bosh CLI needed;
a vendored package comes from another release given, bosh's ~/.bosh/cache, or a
--stand-in), checks every job and package against
release.MF, compiles source packages in dependency order in containers of the stemcell
image (podman; results cached by fingerprint, dependencies and stemcell digest, on disk
and with --cache-repository in a registry other machines share) and builds
one image per release: jobs under /var/vcap/jobs-src, packages under /var/vcap/packages.
Images are named <repository>/<release>:<stemcell os>-<stemcell version>-<release version>,
the name the gathering and the webhook look for, and printed pinned by digest. Nothing is
written out unless every release built.

With --manifest, every release the manifest names is built (from the tarballs given, or
from a release url that is a local file) and the ops file pointing the manifest at the
images is printed; only the packages the manifest's jobs need are compiled (the
others are listed in the image's label bosh-injector.io/skipped-packages).`,
			RunE: func(cmd *cobra.Command, args []string) error {
				log, err := g.logger(cmd.ErrOrStderr())
				if err != nil {
					return err
				}
				cfg.Log, cfg.Tarballs = log, args
				if cfg.StandIns, err = pairs("--stand-in", "PACKAGE=DIR", standInFlags); err != nil {
					return err
				}
				if cfg.OCILayout != "" {
					// The layout is extended, so an existing one is fine.
					if err := checkOutputDir("--oci-layout", cfg.OCILayout, "oci-layout", "OCI image layout"); err != nil {
						return err
					}
				}
				if manifestPath != "" {
					if cfg.Manifest, err = inputfile.Read(cmd.Context(), "--manifest", manifestPath); err != nil {
						return err
					}
					if cfg.Manifest, err = interpolate(cmd.Context(), cfg.Manifest, opsPaths); err != nil {
						return fmt.Errorf("--manifest %s: %w", manifestPath, err)
					}
				} else if len(args) == 0 {
					return fmt.Errorf("give release tarballs or release directories, or --manifest")
				}
				results, err := releaseimage.Run(cmd.Context(), cfg)
				if err != nil {
					return flagNames(err)
				}
				if manifestPath != "" {
					ops, err := releaseimage.OpsFile(results)
					if err != nil {
						return err
					}
					_, err = cmd.OutOrStdout().Write(ops)
					return err
				}
				for _, r := range results {
					fmt.Fprintln(cmd.OutOrStdout(), r.Ref())
				}
				return nil
			},
		}
		cache, _ := os.UserCacheDir()
		f := cmd.Flags()
		f.StringVar(&cfg.Repository, "repository", "", "image repository prefix, the releases' url in the manifest (e.g. ghcr.io/acme)")
		f.StringVar(&cfg.StemcellImage, "stemcell-image", "", "stemcell image to build on and compile in: in a registry, an OCI layout (oci:DIR[:NAME]) or podman's storage (containers-storage:IMAGE)")
		f.StringVar(&cfg.StemcellOS, "stemcell-os", "", "stemcell os naming the images (default: the manifest's stemcell)")
		f.StringVar(&cfg.StemcellVersion, "stemcell-version", "", "stemcell version naming the images (default: the manifest's stemcell)")
		f.BoolVar(&cfg.Push, "push", false, "push the images (credentials from the docker or podman configuration)")
		f.StringVar(&cfg.OCILayout, "oci-layout", "", "add the images to the OCI image layout in this directory")
		f.BoolVar(&cfg.Load, "load", false, "load the images into local podman storage")
		f.BoolVar(&cfg.Insecure, "insecure", false, "allow registries without TLS or with self-signed certificates")
		f.IntVar(&cfg.Jobs, "jobs", runtime.NumCPU(), "packages compiled at once")
		f.StringVar(&cfg.CacheDir, "cache", filepath.Join(cache, "bosh-injector", "compiled-packages"), "compiled package cache")
		f.StringVar(&cfg.CacheRepository, "cache-repository", "", "registry repository sharing compiled packages between machines, behind --cache (e.g. ghcr.io/acme/compiled-packages)")
		f.StringVar(&manifestPath, "manifest", "", "deployment manifest: build its releases and print an ops file pointing it at the images")
		f.StringArrayVar(&opsPaths, "ops-file", nil, "with --manifest: an ops file applied to it first (repeatable)")
		f.StringArrayVar(&standInFlags, "stand-in", nil, "PACKAGE=DIR: a directory (packaging script and files) standing in for vendored package PACKAGE of a release directory")
		return cmd
	})
}

// releaseImageFlags are the flags of releaseimage.Config's fields.
var releaseImageFlags = map[string]string{
	"Repository":      "--repository",
	"StemcellImage":   "--stemcell-image",
	"StemcellOS":      "--stemcell-os",
	"StemcellVersion": "--stemcell-version",
	"Manifest":        "--manifest",
}

// flagNames names the Config fields of a releaseimage.FieldError by their
// flags.
func flagNames(err error) error {
	var fe *releaseimage.FieldError
	if errors.As(err, &fe) {
		for i, f := range fe.Fields {
			fe.Fields[i] = cmp.Or(releaseImageFlags[f], f)
		}
	}
	return err
}

// interpolate applies ops files to a manifest, as bosh interpolate does.
func interpolate(ctx context.Context, manifest []byte, opsPaths []string) ([]byte, error) {
	if len(opsPaths) == 0 {
		return manifest, nil
	}
	ops, err := deployment.ReadOpsFiles(ctx, opsPaths)
	if err != nil {
		return nil, err
	}
	doc, err := deployment.Document(manifest, ops)
	if err != nil {
		return nil, err
	}
	return yamlvalue.Marshal(doc)
}
