// Command demo walks a newcomer through bosh-injector on this machine (`make
// demo`): a local cluster of one real node or more (test/cluster) with cert-manager,
// the chart installed with helm, the example shop deployment gathered, an
// injected pod run by the kubelet, what a template mistake looks like, and
// the Events. It stops everything it started, unless --keep leaves the
// cluster up for kubectl (`make demo KEEP=1`, then `make demo-down`).
//
// With --kubeconfig and --registry (`make demo-cluster`) the same flow runs
// on a real cluster with cert-manager: the images are pushed to the
// registry, the chart's operator and the cluster's kubelets do the rest.
//
// With --manifest and --release (`make demo MANIFEST=… RELEASES=…`) it runs
// that deployment in a sandbox instead (see test/sandbox); with --keep the
// sandbox stays up until --down (`make demo-down`).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/bosh-injector/bosh-injector/gather/operator/status"
	"github.com/bosh-injector/bosh-injector/test/cluster"
	"github.com/bosh-injector/bosh-injector/test/fixtures"
	"github.com/bosh-injector/bosh-injector/test/sandbox"
	"github.com/bosh-injector/bosh-injector/test/walkthrough"
)

func main() {
	var opts walkthrough.Options
	// Its own flag set: controller-runtime registers --kubeconfig globally.
	flags := flag.NewFlagSet("demo", flag.ExitOnError)
	var sb sandbox.Config
	flags.StringVar(&sb.Binary, "binary", "bin/bosh-injector", "with --manifest: the bosh-injector binary that builds the release images and the objects")
	flags.StringVar(&opts.Kubeconfig, "kubeconfig", "", "run on this real cluster (with cert-manager) instead of a local control plane")
	flags.StringVar(&opts.Registry, "registry", "", "with --kubeconfig: registry prefix the cluster pulls from, e.g. registry.example.com/me")
	flags.BoolVar(&opts.Keep, "keep", false, "leave the local cluster up (until --down); with --kubeconfig: leave the chart and the demo namespaces installed; with --manifest: leave the sandbox up in the background")
	flags.StringVar(&sb.Manifest, "manifest", "", "run this deployment manifest in a sandbox instead of the walkthrough")
	flags.Func("release", "with --manifest: a release tarball, source or compiled (repeatable)", appendTo(&sb.Releases))
	flags.Func("ops-file", "with --manifest: an ops file (repeatable)", appendTo(&sb.OpsFiles))
	flags.Func("var", "with --manifest: a variable NAME=VALUE, as bosh's -v (repeatable)", appendTo(&sb.Vars))
	flags.Func("vars-file", "with --manifest: a YAML file of variables, as bosh's -l (repeatable)", appendTo(&sb.VarsFiles))
	flags.Func("stand-in", "with --manifest: PACKAGE=DIR standing in for a vendored package of a release directory (repeatable)", appendTo(&sb.StandIns))
	flags.StringVar(&sb.StemcellImage, "stemcell-image", "", "with --manifest: the stemcell image to build the releases on (default: the base image)")
	name := flags.String("sandbox", "", "the kept sandbox's name: sandboxes of different names run side by side")
	stateDir := flags.String("state-dir", "", "where a kept sandbox keeps its state (default: from --sandbox, in $TMPDIR)")
	flags.IntVar(&opts.Nodes, "nodes", 0, "how many nodes the local cluster has (default one, or one per zone)")
	flags.Func("zones", "each node's zone, comma-separated in node order, e.g. z1,z1,z2", func(v string) error {
		opts.Zones = strings.Split(v, ",")
		return nil
	})
	down := flags.Bool("down", false, "stop the cluster or sandbox --keep left up")
	daemon := flags.Bool("daemon", false, "be the kept sandbox's own process (--keep starts it)")
	_ = flags.Parse(os.Args[1:])
	if *stateDir == "" {
		var err error
		if *stateDir, err = sandbox.DefaultDir(*name); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	if *down {
		downed, err := cluster.Down()
		for _, d := range downed {
			fmt.Println("stopped", d)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "demo-down failed:", err)
			os.Exit(1)
		}
	}
	if *down || sb.Manifest != "" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		if err := runSandbox(ctx, sb, opts, *stateDir, *down, *daemon); err != nil {
			fmt.Fprintln(os.Stderr, "sandbox failed:", err)
			os.Exit(1)
		}
		return
	}
	if (opts.Kubeconfig == "") != (opts.Registry == "") {
		fmt.Fprintln(os.Stderr, "--kubeconfig and --registry go together")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	opts.Out = os.Stdout
	if err := run(ctx, opts); err != nil {
		fmt.Fprintln(os.Stderr, "demo failed:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, opts walkthrough.Options) (err error) {
	if opts.Dir, err = os.MkdirTemp("", "bosh-injector-demo-"); err != nil {
		return err
	}
	defer os.RemoveAll(opts.Dir)
	out := opts.Out

	where := "a local cluster of real nodes"
	if opts.Kubeconfig != "" {
		where = "your cluster"
	}
	fmt.Fprintln(out, "bosh-injector runs BOSH releases on Kubernetes without a director. This walkthrough")
	fmt.Fprintf(out, "installs it on %s and deploys the example `shop` deployment\n", where)
	fmt.Fprintln(out, "(test/fixtures/deployments/shop.yml: a message bus, a database, a web tier), then deploys")
	fmt.Fprintln(out, "changes to a three-group deployment as a director does: in order, canaries first, stopping at a failure.")
	if opts.Registry != "" {
		if err := push(ctx, out, walkthrough.OperatorImage, opts.Registry+"/bosh-injector:dev"); err != nil {
			return err
		}
	}

	w, err := walkthrough.Start(ctx, opts)
	defer func() {
		if opts.Keep && w.Cluster != nil {
			w.Step("The cluster stays up: `make demo-down` stops it")
			fmt.Fprintf(out, "\nKUBECONFIG=%s\n", w.Kubeconfig)
		} else {
			w.Step("Removing what the walkthrough started")
		}
		// A kept cluster is only let go of.
		if serr := w.Stop(); serr != nil && err == nil {
			err = serr
		}
	}()
	if err != nil {
		return err
	}
	// The cluster's node pulls the release images from its registry, as a
	// cluster's kubelets pull from the registry the releases' url names.
	releaseURL := w.Registry() + "/bosh-injector-fixtures"
	w.Step("The example release images, built from their BOSH release tarballs with `bosh-injector release-image --push` "+
		"(packages compiled on the stemcell image %s) into %s", walkthrough.BaseImage, releaseURL)
	if err := fixtures.BuildImages(ctx, walkthrough.BaseImage, releaseURL, append(fixtures.Releases, "echo")...); err != nil {
		return err
	}

	if err := deploy(ctx, w, "shop", releaseURL); err != nil {
		return err
	}
	run, err := w.StartInstance(ctx, "shop", walkthrough.Instance{Group: "web", AZIndex: 1, Container: "storefront-storefront", Image: fixtures.Image(releaseURL, "shop")})
	if err != nil {
		return err
	}
	logs, err := run.WaitForLog(ctx, "storefront-storefront", "listen_port:", 2*time.Minute)
	if err != nil {
		return err
	}
	if _, err := w.Report(ctx, run); err != nil {
		return err
	}
	w.Step("The storefront process's output: the configuration render produced from the manifest, the generated variables and the links to the db and bus groups")
	if logs, err = w.Redact(ctx, "shop", logs); err != nil {
		return err
	}
	w.Say("%s", logs)
	w.Say("(generated credentials shown as their names on the config server)")
	if w.Cluster != nil {
		if _, err := w.FetchCredential(ctx, "/"+walkthrough.DirectorName+"/shop/db_password"); err != nil {
			return err
		}
	}

	w.Step("A mistake: the same deployment with an ops file removing bus.password, which bus.conf.erb requires")
	gst, err := w.Deploy(ctx, "shop", fixtures.Shop(releaseURL, "missing-bus-password.yml"))
	if err != nil {
		return err
	}
	if gst.State != status.ReasonGatherFailed {
		return fmt.Errorf("the broken manifest gathered: %+v", gst)
	}
	w.Step("Like the director, gathering rendered every template of every instance first and wrote nothing: pods keep the last good versions")
	w.Say("resolved versions: %v", gst.Versions)
	pods, err := w.Kubectl(ctx, "get", "pod", run.Key().Name, "--namespace", "shop")
	if err != nil {
		return err
	}
	w.Say("%s", strings.TrimRight(pods, "\n"))
	if err := w.Events(ctx, "shop"); err != nil {
		return err
	}
	// Deploying as the director does, on a deployment of three groups.
	return w.Rollout(ctx, "rollout", releaseURL)
}

// runSandbox runs the sandbox of cfg (`make demo MANIFEST=…`), in the
// background with opts.Keep, or stops the kept one (down).
func runSandbox(ctx context.Context, cfg sandbox.Config, opts walkthrough.Options, stateDir string, down, daemon bool) (err error) {
	if down {
		return sandbox.Down(os.Stdout, stateDir)
	}
	cfg.Out, cfg.Nodes, cfg.Zones = os.Stdout, opts.Nodes, opts.Zones
	for _, p := range append([]*string{&cfg.Manifest, &cfg.Binary}, pointers(cfg.Releases, cfg.OpsFiles, cfg.VarsFiles)...) {
		if *p, err = filepath.Abs(*p); err != nil {
			return err
		}
	}
	switch {
	case opts.Keep && !daemon:
		args := []string{"--daemon", "--keep", "--state-dir", stateDir, "--binary", cfg.Binary, "--manifest", cfg.Manifest}
		for _, r := range cfg.Releases {
			args = append(args, "--release", r)
		}
		for _, o := range cfg.OpsFiles {
			args = append(args, "--ops-file", o)
		}
		for _, v := range cfg.Vars {
			args = append(args, "--var", v)
		}
		for _, f := range cfg.VarsFiles {
			args = append(args, "--vars-file", f)
		}
		if cfg.StemcellImage != "" {
			args = append(args, "--stemcell-image", cfg.StemcellImage)
		}
		for _, si := range cfg.StandIns {
			args = append(args, "--stand-in", si)
		}
		if opts.Nodes > 0 {
			args = append(args, "--nodes", strconv.Itoa(opts.Nodes))
		}
		if len(opts.Zones) > 0 {
			args = append(args, "--zones", strings.Join(opts.Zones, ","))
		}
		return sandbox.Background(os.Stdout, stateDir, args)
	case opts.Keep:
		cfg.Dir, cfg.Ready = filepath.Join(stateDir, "run"), sandbox.Keep(stateDir, os.Stdout)
		err = os.MkdirAll(cfg.Dir, 0o755)
	default:
		cfg.Dir, err = os.MkdirTemp("", "bosh-injector-sandbox-")
	}
	if err != nil {
		return err
	}
	return sandbox.Run(ctx, cfg)
}

func pointers(lists ...[]string) []*string {
	var out []*string
	for _, l := range lists {
		for i := range l {
			out = append(out, &l[i])
		}
	}
	return out
}

func appendTo(list *[]string) func(string) error {
	return func(v string) error {
		*list = append(*list, v)
		return nil
	}
}

// deploy applies the shop manifest with ops files in namespace ns and
// gathers it.
func deploy(ctx context.Context, w *walkthrough.Walkthrough, ns, releaseURL string, ops ...string) error {
	gst, err := w.Deploy(ctx, ns, fixtures.Shop(releaseURL, ops...))
	if err != nil {
		return err
	}
	if gst.State != status.ReasonGathered {
		return fmt.Errorf("gathering %s: %s", ns, strings.TrimSpace(gst.State+" "+gst.Message))
	}
	return nil
}

// push tags a local image as ref and pushes it.
func push(ctx context.Context, out io.Writer, image, ref string) error {
	fmt.Fprintf(out, "pushing %s\n", ref)
	for _, args := range [][]string{{"tag", image, ref}, {"push", "-q", ref}} {
		if out, err := fixtures.Podman(ctx, args...).CombinedOutput(); err != nil {
			return fmt.Errorf("podman %s: %w: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}
