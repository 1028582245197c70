package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/bosh-injector/bosh-injector/gather/gathering"
	"github.com/bosh-injector/bosh-injector/gather/model/deployment"
	"github.com/bosh-injector/bosh-injector/gather/model/inputfile"
	"github.com/bosh-injector/bosh-injector/gather/model/instance"
	"github.com/bosh-injector/bosh-injector/gather/model/jobspec"
	"github.com/bosh-injector/bosh-injector/gather/model/manifest"
	"github.com/bosh-injector/bosh-injector/gather/model/variables"
	"github.com/bosh-injector/bosh-injector/gather/render/ruby"
)

type templateOptions struct {
	manifest, varsFile, varsStore, output, group, ip string
	opsFiles, vars, releases                         []string
	index                                            int
	network                                          instance.Network
	render                                           renderOptions
	secrets                                          *variables.Redactor
}

func init() {
	register(func(g *globalOptions) *cobra.Command {
		o := &templateOptions{secrets: g.secrets}
		cmd := &cobra.Command{
			Use:   "template",
			Short: "Render a whole deployment offline, as the director would",
			Long: `template renders every job of every instance of a deployment into
OUTPUT/<instance-group>/<index>/<job>/… and each group's resolved BPM into
OUTPUT/<instance-group>/bpm.json, generating missing variables into the vars store.
On any error it prints the director-format error list, exits 1 and leaves OUTPUT as
it was.`,
			Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				if err := o.run(cmd); err != nil {
					fmt.Fprintln(cmd.OutOrStdout(), o.secrets.Redact(err.Error()))
					return exitError{code: 1}
				}
				return nil
			},
		}
		f := cmd.Flags()
		f.StringVar(&o.manifest, "manifest", "", "deployment manifest (required)")
		f.StringArrayVar(&o.opsFiles, "ops-file", nil, "ops file, applied in order (repeatable)")
		f.StringVar(&o.varsFile, "vars-file", "", "YAML file of variable values")
		f.StringArrayVar(&o.vars, "var", nil, "variable value as NAME=VALUE (repeatable)")
		f.StringVar(&o.varsStore, "vars-store", "", "YAML file holding generated variables, created or extended as needed")
		f.StringArrayVar(&o.releases, "release", nil, "NAME=DIR: a release source tree (DIR/jobs/<job>/spec) or a jobs directory (DIR/<job>/job.MF) (repeatable)")
		f.StringVar(&o.network.Namespace, "namespace", "default", "namespace of the instance addresses")
		f.StringVar(&o.network.ClusterDomain, "cluster-domain", "cluster.local", "cluster DNS domain of the instance addresses")
		f.StringVar(&o.ip, "ip", "127.0.0.1", "IP address the instances get (spec.ip)")
		f.StringVar(&o.output, "output", "", "output directory (required)")
		f.StringVar(&o.group, "instance-group", "", "render only this instance group")
		f.IntVar(&o.index, "index", -1, "render only this instance index")
		o.render.register(f)
		return cmd
	})
}

func (o *templateOptions) run(cmd *cobra.Command) (err error) {
	if o.manifest == "" || o.output == "" {
		return fmt.Errorf("--manifest and --output are required")
	}
	if err := o.checkFlags(cmd); err != nil {
		return err
	}
	data, err := inputfile.Read(cmd.Context(), "--manifest", o.manifest)
	if err != nil {
		return err
	}
	ops, err := deployment.ReadOpsFiles(cmd.Context(), o.opsFiles)
	if err != nil {
		return err
	}
	vars, store, err := o.variables(cmd.Context())
	if err != nil {
		return err
	}
	// Generated values are saved before the render is written, so no
	// render holds a value the store lacks, and kept when a step fails,
	// so the next run generates nothing again.
	saved := false
	save := func() error {
		saved = true
		if store == nil {
			return nil
		}
		return store.Save()
	}
	defer func() {
		if err != nil && !saved {
			err = errors.Join(err, save())
		}
	}()
	specs, err := o.specSource()
	if err != nil {
		return err
	}
	m, err := deployment.Load(data, ops, vars, time.Now())
	if err != nil {
		return err
	}
	if o.varsStore == "" && len(m.Variables) > 0 {
		fmt.Fprintf(cmd.ErrOrStderr(), "Warning: no --vars-store: credentials generated for this render (variables: %s) are discarded; give --vars-store FILE to keep them and render the same values again\n", variableNames(m))
	}
	if err := o.checkSelection(m); err != nil {
		return err
	}
	d, err := deployment.Resolve(deployment.Input{Manifest: m, Specs: specs, Variables: vars, Network: o.network})
	if err != nil {
		return err
	}
	if err := save(); err != nil {
		return err
	}
	renderer, err := o.render.offline(cmd.ErrOrStderr(), o.releases)
	if err != nil {
		return err
	}
	// One Ruby process renders every template and every bpm.yml, as
	// gathering does.
	r, err := gathering.RenderDeployment(cmd.Context(), renderer, d, o.ip, func(g string, i int) bool {
		return (o.group == "" || g == o.group) && (o.index < 0 || i == o.index)
	})
	if err != nil {
		return err
	}
	rendered, bpms := r.Instances, r.BPM
	files := 0
	err = writeAtomically(o.output, func(dir string, root *os.Root) error {
		for _, inst := range rendered {
			idx := filepath.Join(inst.Group, fmt.Sprint(inst.Index))
			if err := root.MkdirAll(idx, 0o750); err != nil {
				return err
			}
			for _, j := range inst.Jobs {
				if err := ruby.WriteJob(filepath.Join(dir, idx, j.Name), j.Files); err != nil {
					return err
				}
				files += len(j.Files)
			}
		}
		for gi, g := range d.Groups {
			if o.group != "" && g.Manifest.Name != o.group {
				continue
			}
			data, err := json.MarshalIndent(bpms[gi], "", "  ")
			if err != nil {
				return err
			}
			if err := root.MkdirAll(g.Manifest.Name, 0o750); err != nil {
				return err
			}
			// BPM's env and args may hold properties: as private as the
			// templates.
			if err := root.WriteFile(filepath.Join(g.Manifest.Name, "bpm.json"), append(data, '\n'), 0o640); err != nil {
				return err
			}
			files++
		}
		return nil
	})
	if err != nil {
		return err
	}
	groups := map[string]bool{}
	for _, inst := range rendered {
		groups[inst.Group] = true
	}
	fmt.Fprintf(cmd.OutOrStdout(), "Rendered %s, %s, %s into %s\n",
		plural(len(groups), "instance group"), plural(len(rendered), "instance"), plural(files, "file"), o.output)
	return nil
}

func variableNames(m *manifest.Manifest) string {
	var out []string
	for _, v := range m.Variables {
		out = append(out, v.Name)
	}
	return strings.Join(out, ", ")
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// checkFlags fails, naming the flag, on values no render could use, and
// on an --output that a render must not replace (checkOutput).
func (o *templateOptions) checkFlags(cmd *cobra.Command) error {
	if cmd.Flags().Changed("index") && o.index < 0 {
		return fmt.Errorf("--index %d: must not be negative", o.index)
	}
	if errs := validation.IsDNS1123Label(o.network.Namespace); len(errs) > 0 {
		return fmt.Errorf("--namespace %q: not a valid namespace name: %s", o.network.Namespace, strings.Join(errs, "; "))
	}
	// The domain is part of every instance address templates render.
	if errs := validation.IsDNS1123Subdomain(o.network.ClusterDomain); len(errs) > 0 {
		return fmt.Errorf("--cluster-domain %q: not a valid DNS domain: %s", o.network.ClusterDomain, strings.Join(errs, "; "))
	}
	if _, err := netip.ParseAddr(o.ip); err != nil {
		return fmt.Errorf("--ip %q: not an IP address", o.ip)
	}
	return checkOutput(o.output, map[string][]string{
		"--manifest": {o.manifest}, "--ops-file": o.opsFiles, "--vars-file": {o.varsFile},
		"--vars-store": {o.varsStore}, "--release": releaseDirs(o.releases),
	})
}

// checkSelection fails, naming the flag or manifest key, when the manifest
// and --instance-group/--index select no instance to render.
func (o *templateOptions) checkSelection(m *manifest.Manifest) error {
	if len(m.InstanceGroups) == 0 {
		for _, k := range m.Raw.Keys() {
			if k != "instance_groups" && strings.HasPrefix(k, "instance_group") {
				return fmt.Errorf("%s: no instance groups: the manifest has key '%s'; did you mean 'instance_groups'?", o.manifest, k)
			}
		}
		return fmt.Errorf("%s: no instance groups: the key 'instance_groups' is missing or empty", o.manifest)
	}
	groups := m.InstanceGroups
	if o.group != "" {
		g := m.InstanceGroup(o.group)
		if g == nil {
			var known []string
			for _, g := range m.InstanceGroups {
				known = append(known, g.Name)
			}
			return fmt.Errorf("--instance-group '%s': deployment '%s' has no such instance group; its instance groups are %s", o.group, m.Name, strings.Join(known, ", "))
		}
		groups = []manifest.InstanceGroup{*g}
	}
	most := slices.MaxFunc(groups, func(a, b manifest.InstanceGroup) int { return a.Instances - b.Instances })
	switch {
	case most.Instances == 0 && o.group != "":
		return fmt.Errorf("--instance-group '%s': the instance group has 0 instances: nothing to render", o.group)
	case most.Instances == 0:
		return fmt.Errorf("%s: every instance group has 0 instances: nothing to render", o.manifest)
	case o.index >= most.Instances && o.group != "":
		return fmt.Errorf("--index %d: instance group '%s' has %d instances, indexes 0 to %d", o.index, o.group, most.Instances, most.Instances-1)
	case o.index >= most.Instances:
		return fmt.Errorf("--index %d: no instance group has that many instances; the largest, '%s', has %d, indexes 0 to %d", o.index, most.Name, most.Instances, most.Instances-1)
	}
	return nil
}

// variables layers --vars-file and --var over the vars store (or memory),
// every value watched by o.secrets; store is the vars store to save, if
// any.
func (o *templateOptions) variables(ctx context.Context) (src variables.Source, store *variables.FileSource, err error) {
	var files []string
	if o.varsFile != "" {
		files = []string{o.varsFile}
	}
	given, err := variables.Given(ctx, files, o.vars)
	if err != nil {
		return nil, nil, err
	}
	// Given values are redacted even when unused: an error may quote the
	// manifest text they were meant for.
	o.secrets.Remember(given.Values())
	var kept variables.Source = variables.NewMapSource(nil)
	if o.varsStore != "" {
		if store, err = variables.OpenFile(ctx, o.varsStore); err != nil {
			return nil, nil, err
		}
		kept = store
	}
	return o.secrets.Watch(variables.Layered{Given: given, Store: kept, Where: "--var, --vars-file or --vars-store"}), store, nil
}

// specSource reads each --release from a source tree or a jobs directory;
// a job not found names the directory and file looked for.
func (o *templateOptions) specSource() (deployment.SpecSource, error) {
	return releaseSpecs(o.releases)
}

// releaseSpecs reads each NAME=DIR of --release.
func releaseSpecs(releases []string) (deployment.SpecSource, error) {
	trees := map[string]string{}
	jobsDirs := map[string]string{}
	given := map[string]string{}
	for _, r := range releases {
		name, dir, ok := strings.Cut(r, "=")
		if !ok || name == "" || dir == "" {
			return nil, fmt.Errorf("--release %q: expected NAME=DIR", r)
		}
		if first, twice := given[name]; twice {
			return nil, fmt.Errorf("--release %s: given twice (%s=%s and %s); give each release once", name, name, first, r)
		}
		given[name] = dir
		if info, err := os.Stat(dir); err != nil {
			return nil, fmt.Errorf("--release %s: %w", r, err)
		} else if !info.IsDir() {
			return nil, fmt.Errorf("--release %s: %s is not a directory", r, dir)
		}
		if _, err := os.Stat(filepath.Join(dir, "jobs")); err == nil {
			trees[name] = dir
		} else {
			jobsDirs[name] = dir
		}
	}
	fromTrees := deployment.SourceTreeSpecs(trees)
	return func(release, job string) (*jobspec.Spec, error) {
		var s *jobspec.Spec
		var err error
		var looked string
		if dir, ok := jobsDirs[release]; ok {
			looked = filepath.Join(dir, job, "job.MF")
			s, err = jobspec.LoadImageLayout(dir, job)
		} else if dir, ok := trees[release]; ok {
			looked = filepath.Join(dir, "jobs", job, "spec")
			s, err = fromTrees(release, job)
		} else {
			return nil, fmt.Errorf("no directory given for release '%s': add --release %s=DIR, a release source tree (DIR/jobs/%s/spec) or a jobs directory (DIR/%s/job.MF)", release, release, job, job)
		}
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("job '%s' not found in release '%s': no %s; check --release %s=DIR", job, release, looked, release)
		}
		return s, err
	}, nil
}
