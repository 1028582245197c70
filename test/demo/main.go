// Command demo walks a newcomer through bosh-injector on this machine (`make
// demo`): a local control plane with cert-manager, the chart, the operator
// from the built binary, the example shop deployment gathered, an injected
// pod running with real containers under podman, what a template mistake
// looks like, and the Events. It stops everything it started.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/bosh-injector/bosh-injector/gather/runner"
	"github.com/bosh-injector/bosh-injector/test/fixtures"
	"github.com/bosh-injector/bosh-injector/test/walkthrough"
)

func main() {
	binary := flag.String("binary", "bin/bosh-injector", "the bosh-injector binary the operator runs from")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *binary); err != nil {
		fmt.Fprintln(os.Stderr, "demo failed:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, binary string) (err error) {
	binary, err = filepath.Abs(binary)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "bosh-injector-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	fmt.Println("bosh-injector runs BOSH releases on Kubernetes without a director. This walkthrough")
	fmt.Println("installs it on a local control plane and deploys the example `shop` deployment")
	fmt.Println("(test/fixtures/deployments/shop.yml: a message bus, a database, a web tier).")
	fmt.Println("\nBuilding the example release images with podman (jobs under /var/vcap/jobs-src, and")
	fmt.Println("a small program as every package, printing the rendered files it is given)...")
	if err := fixtures.BuildImages(ctx, walkthrough.BaseImage); err != nil {
		return err
	}

	w, err := walkthrough.Start(ctx, walkthrough.Options{Out: os.Stdout, Binary: binary, Dir: dir})
	defer func() {
		w.Step("Stopping everything the walkthrough started: pods, operator, control plane")
		if serr := w.Stop(); serr != nil && err == nil {
			err = serr
		}
	}()
	if err != nil {
		return err
	}

	if err := deploy(ctx, w, "shop"); err != nil {
		return err
	}
	run, err := w.StartInstance(ctx, "shop", "web", 1, "storefront-storefront", fixtures.Image("shop"))
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
	w.Say("(generated credentials shown as the Secret holding them)")

	w.Step("A mistake: the same deployment with an ops file removing bus.password, which bus.conf.erb requires")
	if err := deploy(ctx, w, "broken", "missing-bus-password.yml"); err != nil {
		return err
	}
	run, err = w.StartInstance(ctx, "broken", "bus", 1, "bus-bus", fixtures.Image("bus"))
	if err != nil {
		return err
	}
	if _, err := run.Wait(ctx, 2*time.Minute); err != nil {
		return err
	}
	if _, err := w.Report(ctx, run); err != nil {
		return err
	}
	w.Say("`kubectl describe pod bus-z1-0` shows that message as the render container's state; the bus process never starts.")

	if err := w.Events(ctx, "shop"); err != nil {
		return err
	}
	return w.Events(ctx, "broken")
}

// deploy applies the shop manifest with ops files in namespace ns and
// gathers it.
func deploy(ctx context.Context, w *walkthrough.Walkthrough, ns string, ops ...string) error {
	status, err := w.Deploy(ctx, ns, fixtures.Shop(ops...))
	if err != nil {
		return err
	}
	if status.State != runner.ReasonGathered {
		return fmt.Errorf("gathering %s: %s", ns, strings.TrimSpace(status.State+" "+status.Message))
	}
	return nil
}
