package app

import (
	"cmp"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"

	"github.com/bosh-injector/bosh-injector/gather/gathering"
	"github.com/bosh-injector/bosh-injector/gather/gathering/objects"
	"github.com/bosh-injector/bosh-injector/gather/model/bpm"
	"github.com/bosh-injector/bosh-injector/gather/model/deployment"
	"github.com/bosh-injector/bosh-injector/gather/model/inputfile"
	"github.com/bosh-injector/bosh-injector/gather/model/instance"
	"github.com/bosh-injector/bosh-injector/gather/model/variables"
	"github.com/bosh-injector/bosh-injector/gather/names"
)

type objectsOptions struct {
	manifest, output      string
	opsFiles, releases    []string
	storageClasses, sizes []string
	azZones               []string
	kubeconfig            string
	opts                  objects.Options
	render                renderOptions
	secrets               *variables.Redactor
}

func init() {
	register(func(g *globalOptions) *cobra.Command {
		o := &objectsOptions{secrets: g.secrets}
		cmd := &cobra.Command{
			Use:   "objects",
			Short: "Print the Kubernetes objects that run a deployment",
			Long: `objects prints what kubectl apply needs to run a BOSH deployment with
bosh-injector: the manifest Secret with its ops files, per instance group and AZ a
StatefulSet labelled for the webhook (an Indexed Job for errands), with the
director's instance-to-AZ distribution, a "store" volumeClaimTemplate for the
persistent disk, pod resources from vm_resources and a rolling update from
max_in_flight, each AZ's pods required in the zone of its name and spread
over its nodes, and per instance group a PodDisruptionBudget of max_in_flight
so that a node drain stops no more instances at once than a deploy does.
It works offline; with --kubeconfig it also warns of AZs no node's zone
matches. What the manifest says that Kubernetes cannot is printed as a
warning on stderr. The objects are yours to edit; the webhook adds the rest.`,
			Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
		}
		f := cmd.Flags()
		f.StringVar(&o.manifest, "manifest", "", "deployment manifest (required)")
		f.StringArrayVar(&o.opsFiles, "ops-file", nil, "ops file, applied in order and stored in the manifest Secret (repeatable)")
		f.StringVar(&o.opts.Namespace, "namespace", "", "namespace of the objects (default: none, for kubectl -n)")
		f.StringVar(&o.output, "output", "", "write one file per object into this directory instead of printing")
		f.StringArrayVar(&o.storageClasses, "storage-class-map", nil, "TYPE=CLASS: the StorageClass of disk type TYPE (persistent_disk_type, persistent_disks) (repeatable)")
		f.StringArrayVar(&o.sizes, "disk-size", nil, "TYPE=SIZE: the size of disk type TYPE (persistent_disk_type, persistent_disks), e.g. large=10Gi (repeatable)")
		f.StringArrayVar(&o.releases, "release", nil, "NAME=DIR: release sources as for template; their bpm.yml names each group's container after its first process (repeatable; needs ruby)")
		f.StringArrayVar(&o.azZones, "az-zone", nil, "AZ=ZONE: run AZ's instances in the nodes of zone ZONE (label topology.kubernetes.io/zone; default: the AZ's name) (repeatable)")
		f.BoolVar(&o.opts.Placement.NoZoneAffinity, "no-zone-affinity", false, "leave each AZ's placement to the scheduler: no zone is required")
		f.StringVar(&o.kubeconfig, "kubeconfig", "", "check that the cluster of this kubeconfig has a node in each AZ's zone (the objects are printed offline otherwise)")
		o.render.register(f)
		return cmd
	})
}

func (o *objectsOptions) run(cmd *cobra.Command) error {
	if o.manifest == "" {
		return fmt.Errorf("--manifest is required")
	}
	data, err := inputfile.Read(cmd.Context(), "--manifest", o.manifest)
	if err != nil {
		return err
	}
	ops, err := deployment.ReadOpsFiles(cmd.Context(), o.opsFiles)
	if err != nil {
		return err
	}
	if o.opts.StorageClasses, err = pairs("--storage-class-map", "TYPE=CLASS", o.storageClasses); err != nil {
		return err
	}
	sizes, err := pairs("--disk-size", "TYPE=SIZE", o.sizes)
	if err != nil {
		return err
	}
	o.opts.DiskSizes = map[string]resource.Quantity{}
	for k, v := range sizes {
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return fmt.Errorf("--disk-size %s=%s: %w", k, v, err)
		}
		if q.Sign() <= 0 {
			return fmt.Errorf("--disk-size %s=%s: must be a positive size", k, v)
		}
		o.opts.DiskSizes[k] = q
	}
	if o.opts.Placement.Zones, err = pairs("--az-zone", "AZ=ZONE", o.azZones); err != nil {
		return err
	}
	if err := o.checkNames(); err != nil {
		return err
	}
	if o.output != "" {
		if err := checkOutput(o.output, map[string][]string{"--manifest": {o.manifest}, "--ops-file": o.opsFiles, "--release": releaseDirs(o.releases)}); err != nil {
			return err
		}
	}
	if len(o.releases) > 0 {
		if o.opts.Containers, err = o.containers(cmd, data, ops); err != nil {
			return err
		}
	}
	res, err := objects.Build(data, ops, o.opts)
	if err != nil {
		return fmt.Errorf("%s: %w", o.manifest, err)
	}
	if o.kubeconfig != "" {
		missing, err := missingZones(cmd, o.kubeconfig, res.Zones)
		if err != nil {
			return err
		}
		res.Warnings = append(res.Warnings, missing...)
	}
	for _, w := range res.Warnings {
		fmt.Fprintln(cmd.ErrOrStderr(), "Warning:", w)
	}
	if o.output == "" {
		out, err := objects.EncodeAll(res.Objects)
		if err != nil {
			return err
		}
		_, err = cmd.OutOrStdout().Write(out)
		return err
	}
	err = writeAtomically(o.output, func(_ string, root *os.Root) error {
		for _, obj := range res.Objects {
			out, err := objects.Encode(obj)
			if err != nil {
				return err
			}
			// The manifest Secret is as private as a render.
			if err := root.WriteFile(objects.FileName(obj), out, 0o640); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("--output %s: %w", o.output, err)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "wrote %d objects to %s\n", len(res.Objects), o.output)
	return nil
}

// checkNames fails, naming the flag, on a namespace or StorageClass the
// API server would refuse, rather than printing it.
func (o *objectsOptions) checkNames() error {
	if ns := o.opts.Namespace; ns != "" {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return fmt.Errorf("--namespace %q: not a valid namespace name: %s", ns, strings.Join(errs, "; "))
		}
	}
	for t, class := range o.opts.StorageClasses {
		if errs := validation.IsDNS1123Subdomain(class); len(errs) > 0 {
			return fmt.Errorf("--storage-class-map %s=%s: not a valid StorageClass name: %s", t, class, strings.Join(errs, "; "))
		}
	}
	return nil
}

// containers renders the deployment's bpm.yml as gather does (variables
// generated and discarded) and names each group's container after the first
// BPM process of its jobs, or an errand's bin/run.
func (o *objectsOptions) containers(cmd *cobra.Command, data []byte, ops []deployment.OpsFile) (map[string]objects.Container, error) {
	specs, err := releaseSpecs(o.releases)
	if err != nil {
		return nil, err
	}
	vars := o.secrets.Watch(variables.NewMapSource(nil))
	m, err := deployment.Load(data, ops, vars, time.Now())
	if err != nil {
		return nil, err
	}
	network := instance.Network{Namespace: cmp.Or(o.opts.Namespace, "default"), ClusterDomain: "cluster.local"}
	d, err := deployment.Resolve(deployment.Input{Manifest: m, Specs: specs, Variables: vars, Network: network})
	if err != nil {
		return nil, err
	}
	renderer, err := o.render.offline(cmd.ErrOrStderr(), o.releases)
	if err != nil {
		return nil, err
	}
	bpms, err := gathering.NewRenderBPM(cmd.Context(), renderer)(d)
	if err != nil {
		return nil, err
	}
	out := map[string]objects.Container{}
	for gi, g := range d.Groups {
		if len(bpms[gi]) == 0 {
			continue
		}
		configs := bpms[gi][0].Jobs
		for _, j := range g.Jobs {
			// A colocated errand, say, starts nothing.
			if bpm.Idle(g.Manifest.Lifecycle, bpms[gi][0], j.Name) {
				continue
			}
			if procs := configs[j.Name].Processes; len(procs) > 0 {
				out[g.Manifest.Name] = objects.Container{Job: j.Name, Name: names.DNS1123LabelMax(j.Name+"-"+procs[0].Name, 63)}
				break
			}
			if g.Manifest.Lifecycle == "errand" && j.Spec.IsErrand() {
				out[g.Manifest.Name] = objects.Container{Job: j.Name, Name: names.DNS1123LabelMax(j.Name+"-run", 63)}
				break
			}
		}
	}
	return out, nil
}

// missingZones lists the cluster's nodes' zones and warns of each AZ whose
// zone is not among them.
func missingZones(cmd *cobra.Command, kubeconfig string, required map[string]string) ([]string, error) {
	if len(required) == 0 {
		return nil, nil
	}
	cfg, err := restConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	nodes, err := kube.CoreV1().Nodes().List(cmd.Context(), metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig %s: listing the cluster's nodes for their zones: %w", kubeconfig, err)
	}
	var zones []string
	for _, n := range nodes.Items {
		if z, ok := n.Labels[corev1.LabelTopologyZone]; ok {
			zones = append(zones, z)
		}
	}
	return objects.MissingZones(required, zones), nil
}

// pairs reads repeated KEY=VALUE flags.
func pairs(flag, form string, values []string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range values {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || v == "" {
			return nil, fmt.Errorf("%s %q: expected %s", flag, kv, form)
		}
		out[k] = v
	}
	return out, nil
}
