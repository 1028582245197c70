// Package compile compiles a release's source packages as the BOSH director
// does: in dependency order, each by its packaging script in a container of
// the stemcell image (through an Engine), independent packages in parallel.
// Results land in a cache of image layers keyed like the director's
// compiled packages, so a rebuild, or another release vendoring the same
// package, compiles nothing again.
package compile

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sync"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/singleflight"

	"github.com/bosh-injector/bosh-injector/gather/releaseimage/layer"
)

// Compiler compiles packages for one stemcell image.
type Compiler struct {
	Engine Engine
	// Stemcell is the stemcell image for the compile containers, pinned
	// (repo@sha256:…, or an image ID), and StemcellID its image ID (config
	// digest), part of every cache key: the same for the same stemcell
	// pulled from a registry or loaded locally.
	Stemcell   string
	StemcellID string
	// CacheDir holds compiled packages as layers, <key>.tar.gz.
	CacheDir string
	// Shared, when set, is a cache shared between machines behind CacheDir.
	Shared Shared
	// Jobs is how many packages compile at once (at least 1), over every
	// Compile call running at the same time.
	Jobs int
	Log  logr.Logger

	// slots hold the Jobs compiles running; flight has each cache key
	// compiled once when several releases vendoring a package build at
	// once.
	slotsOnce sync.Once
	slots     chan struct{}
	flight    singleflight.Group
}

// Shared is a compiled package cache shared between machines (a registry)
// behind the disk cache, under the same keys: a package missing on disk is
// fetched from it before compiling, and one compiled or found on disk is
// stored in it.
type Shared interface {
	// Fetch writes the layer stored under key to the file path and says
	// whether there was one.
	Fetch(ctx context.Context, key, path string) (bool, error)
	// Store stores the layer file at path, of package p, under key, unless
	// one is stored there already.
	Store(ctx context.Context, key string, p Package, path string) error
}

// LayerPrefix is where a package's files are in its layer.
func LayerPrefix(name string) string { return path.Join(PackagesDir, name)[1:] }

// Compile compiles the packages of release that the cache does not hold
// and returns, by package name, the layer file holding each compiled
// package at /var/vcap/packages/<name>/. Work files go under work. On error
// nothing is added to the cache for the failed package or those after it.
func (c *Compiler) Compile(ctx context.Context, release string, pkgs []Package, work string) (map[string]string, error) {
	ordered, err := order(release, pkgs)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(c.CacheDir, 0o755); err != nil {
		return nil, fmt.Errorf("compiled package cache: %w", err)
	}
	byName := map[string]Package{}
	for _, p := range ordered {
		byName[p.Name] = p
	}
	r := &run{c: c, release: release, byName: byName, work: work, keys: map[string]string{},
		done: map[string]chan struct{}{}, installed: map[string]*installed{}}
	for _, p := range ordered {
		r.keys[p.Name] = c.key(p, r.keys)
		r.done[p.Name] = make(chan struct{})
		r.installed[p.Name] = &installed{}
	}
	g, ctx := errgroup.WithContext(ctx)
	for _, p := range ordered {
		g.Go(func() error {
			for _, d := range p.Dependencies {
				select {
				case <-r.done[d]:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			if err := r.ensure(ctx, p); err != nil {
				return fmt.Errorf("release '%s': %w", release, err)
			}
			close(r.done[p.Name])
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	layers := map[string]string{}
	for _, p := range ordered {
		layers[p.Name] = c.cached(r.keys[p.Name])
	}
	return layers, nil
}

// key is the cache key of p: its name and fingerprint, its dependencies'
// keys (so a changed dependency recompiles its dependents) and the stemcell
// image's ID, what the director keys compiled packages on.
func (c *Compiler) key(p Package, keys map[string]string) string {
	h := sha256.New()
	fmt.Fprintf(h, "name %s\nfingerprint %s\nstemcell %s\n", p.Name, p.Fingerprint, c.StemcellID)
	for _, d := range slices.Sorted(slices.Values(p.Dependencies)) {
		fmt.Fprintf(h, "dependency %s %s\n", d, keys[d])
	}
	return hex.EncodeToString(h.Sum(nil))
}

func (c *Compiler) cached(key string) string { return filepath.Join(c.CacheDir, key+".tar.gz") }

// run is one Compile call.
type run struct {
	c         *Compiler
	release   string
	byName    map[string]Package
	work      string
	keys      map[string]string
	done      map[string]chan struct{}
	installed map[string]*installed
}

// installed is a compiled package unpacked into a directory, for packages
// depending on it.
type installed struct {
	once sync.Once
	dir  string
	err  error
}

// ensure makes sure the cache holds p, compiling it when it does not;
// another release's run compiling it meanwhile is waited for.
func (r *run) ensure(ctx context.Context, p Package) error {
	key := r.keys[p.Name]
	_, err, _ := r.c.flight.Do(key, func() (any, error) { return nil, r.ensureOnce(ctx, p, key) })
	return err
}

func (r *run) ensureOnce(ctx context.Context, p Package, key string) error {
	log := r.c.Log.WithValues("release", r.release, "package", p.Name, "key", key[:12])
	if _, err := os.Stat(r.c.cached(key)); err == nil {
		log.V(1).Info("compiled package cached")
		return r.share(ctx, p, key)
	}
	if r.c.Shared != nil {
		found, err := r.c.Shared.Fetch(ctx, key, r.c.cached(key))
		if err != nil {
			return fmt.Errorf("package '%s': shared compiled package cache: %w", p.Name, err)
		}
		if found {
			log.Info("compiled package fetched from the shared cache")
			return nil
		}
	}
	r.c.slotsOnce.Do(func() { r.c.slots = make(chan struct{}, max(r.c.Jobs, 1)) })
	select {
	case r.c.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-r.c.slots }()
	dir := filepath.Join(r.work, "compile", p.Name)
	src, install := filepath.Join(dir, "source"), filepath.Join(dir, "install")
	if err := os.MkdirAll(install, 0o755); err != nil {
		return err
	}
	if err := layer.Extract(p.Source, "", src); err != nil {
		return fmt.Errorf("package '%s': source: %w", p.Name, err)
	}
	deps := map[string]string{}
	for _, d := range closure(r.byName, p.Name) {
		depDir, err := r.install(d)
		if err != nil {
			return fmt.Errorf("package '%s': dependency '%s': %w", p.Name, d, err)
		}
		deps[d] = depDir
	}
	// The agent skips a package without a packaging script; it compiles to
	// nothing.
	if _, err := os.Stat(filepath.Join(src, "packaging")); err == nil {
		log.Info("compiling package", "dependencies", len(deps))
		t := Task{Image: r.c.Stemcell, Name: p.Name, Version: p.Version, Source: src, Dependencies: deps, Install: install}
		if r.c.Log.V(1).Enabled() {
			t.Output = logWriter{log}
		}
		if err := r.c.Engine.Compile(ctx, t); err != nil {
			return err
		}
	}
	if err := r.store(install, p.Name, key); err != nil {
		return fmt.Errorf("package '%s': caching: %w", p.Name, err)
	}
	r.installed[p.Name].once.Do(func() { r.installed[p.Name].dir = install })
	if err := os.RemoveAll(src); err != nil {
		return err
	}
	return r.share(ctx, p, key)
}

// share stores the cached layer of p in the shared cache, when there is one.
func (r *run) share(ctx context.Context, p Package, key string) error {
	if r.c.Shared == nil {
		return nil
	}
	if err := r.c.Shared.Store(ctx, key, p, r.c.cached(key)); err != nil {
		return fmt.Errorf("package '%s': shared compiled package cache: %w", p.Name, err)
	}
	return nil
}

// store writes the compiled package's layer into the cache.
func (r *run) store(install, name, key string) error {
	return layer.Write(r.c.cached(key), func(w *layer.Writer) error { return w.AddDir(install, LayerPrefix(name)) })
}

// install returns a directory holding compiled package name: the install
// directory it was compiled into in this run, else its cached layer
// unpacked once.
func (r *run) install(name string) (string, error) {
	in := r.installed[name]
	in.once.Do(func() {
		in.dir = filepath.Join(r.work, "installed", name)
		in.err = layer.Extract(r.c.cached(r.keys[name]), LayerPrefix(name), in.dir)
	})
	return in.dir, in.err
}

// logWriter sends a script's output to the debug log as it comes.
type logWriter struct{ log logr.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	w.log.V(1).Info("packaging", "output", string(p))
	return len(p), nil
}
