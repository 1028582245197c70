package app

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/bosh-injector/bosh-injector/gather/deployment"
	"github.com/bosh-injector/bosh-injector/gather/gathering"
	"github.com/bosh-injector/bosh-injector/gather/instance"
	"github.com/bosh-injector/bosh-injector/gather/jobspec"
	"github.com/bosh-injector/bosh-injector/gather/rendering"
	"github.com/bosh-injector/bosh-injector/gather/ruby"
	"github.com/bosh-injector/bosh-injector/gather/variables"
	"github.com/bosh-injector/bosh-injector/gather/yamlvalue"
)

type templateOptions struct {
	manifest, varsFile, varsStore, output, group, ip string
	opsFiles, vars, releases                         []string
	index                                            int
	network                                          instance.Network
}

func init() {
	register(func(*globalOptions) *cobra.Command {
		o := &templateOptions{}
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
					fmt.Fprintln(cmd.OutOrStdout(), err)
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
		return cmd
	})
}

func (o *templateOptions) run(cmd *cobra.Command) error {
	if o.manifest == "" || o.output == "" {
		return fmt.Errorf("--manifest and --output are required")
	}
	data, err := os.ReadFile(o.manifest)
	if err != nil {
		return err
	}
	var ops []deployment.OpsFile
	for _, path := range o.opsFiles {
		d, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		ops = append(ops, deployment.OpsFile{Name: path, Data: d})
	}
	vars, err := o.variables()
	if err != nil {
		return err
	}
	specs, err := o.specSource()
	if err != nil {
		return err
	}
	m, err := deployment.Load(data, ops, vars, time.Now())
	if err != nil {
		return err
	}
	d, err := deployment.Resolve(deployment.Input{Manifest: m, Specs: specs, Variables: vars, Network: o.network})
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	bpms, err := gathering.NewRenderBPM(ctx)(d)
	if err != nil {
		return err
	}
	rendered, err := rendering.Deployment(ctx, d, o.ip, func(g string, i int) bool {
		return (o.group == "" || g == o.group) && (o.index < 0 || i == o.index)
	})
	if err != nil {
		return err
	}
	return writeAtomically(o.output, func(dir string) error {
		for _, inst := range rendered {
			for _, j := range inst.Jobs {
				if err := ruby.WriteJob(filepath.Join(dir, inst.Group, fmt.Sprint(inst.Index), j.Name), j.Files); err != nil {
					return err
				}
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
			if err := os.MkdirAll(filepath.Join(dir, g.Manifest.Name), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(dir, g.Manifest.Name, "bpm.json"), append(data, '\n'), 0o644); err != nil {
				return err
			}
		}
		return nil
	})
}

// variables layers --vars-file and --var over the vars store (or memory).
func (o *templateOptions) variables() (variables.Source, error) {
	given := variables.NewMapSource(nil)
	if o.varsFile != "" {
		data, err := os.ReadFile(o.varsFile)
		if err != nil {
			return nil, err
		}
		doc, err := yamlvalue.Parse(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", o.varsFile, err)
		}
		if m, ok := doc.(*yamlvalue.Map); ok {
			for _, k := range m.Keys() {
				v, _ := m.Get(k)
				_ = given.Put(k, v)
			}
		} else if doc != nil {
			return nil, fmt.Errorf("%s: expected a hash of variables", o.varsFile)
		}
	}
	for _, kv := range o.vars {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("--var %q: expected NAME=VALUE", kv)
		}
		_ = given.Put(k, v)
	}
	var store variables.Source = variables.NewMapSource(nil)
	if o.varsStore != "" {
		s, err := variables.OpenFile(o.varsStore)
		if err != nil {
			return nil, err
		}
		store = s
	}
	return variables.Layered{Given: given, Store: store}, nil
}

// specSource reads each --release from a source tree or a jobs directory.
func (o *templateOptions) specSource() (deployment.SpecSource, error) {
	trees := map[string]string{}
	jobsDirs := map[string]string{}
	for _, r := range o.releases {
		name, dir, ok := strings.Cut(r, "=")
		if !ok {
			return nil, fmt.Errorf("--release %q: expected NAME=DIR", r)
		}
		if _, err := os.Stat(filepath.Join(dir, "jobs")); err == nil {
			trees[name] = dir
		} else {
			jobsDirs[name] = dir
		}
	}
	fromTrees := deployment.SourceTreeSpecs(trees)
	return func(release, job string) (*jobspec.Spec, error) {
		if dir, ok := jobsDirs[release]; ok {
			return jobspec.LoadImageLayout(dir, job)
		}
		return fromTrees(release, job)
	}, nil
}

// writeAtomically writes into a temporary directory beside output and
// replaces output with it only when fill succeeds.
func writeAtomically(output string, fill func(dir string) error) error {
	if err := os.MkdirAll(filepath.Dir(filepath.Clean(output)), 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(filepath.Clean(output)), ".template-")
	if err != nil {
		return err
	}
	if err := fill(tmp); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	if err := os.RemoveAll(output); err != nil {
		return err
	}
	return os.Rename(tmp, output)
}
