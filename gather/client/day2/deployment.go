package day2

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/client/cluster"
	"github.com/bosh-injector/bosh-injector/gather/client/instances"
	"github.com/bosh-injector/bosh-injector/gather/model/manifest"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/operator/podstate"
	"github.com/bosh-injector/bosh-injector/inject/runtime/contract"
)

// Deployment is a deployment the operator runs, reached with the user's
// credentials.
type Deployment struct {
	cluster.Cluster
	Namespace string
	Manifest  *manifest.Manifest
	Secret    *corev1.Secret
}

// Open finds the deployment's manifest Secret in namespace.
func Open(ctx context.Context, c cluster.Cluster, namespace, name string) (*Deployment, error) {
	secret, m, err := cluster.Manifest(ctx, c.Client, namespace, name)
	if err != nil {
		return nil, err
	}
	return &Deployment{Cluster: c, Namespace: namespace, Manifest: m, Secret: secret}, nil
}

// Name is the deployment's BOSH name.
func (d *Deployment) Name() string { return d.Manifest.Name }

// selector selects the deployment's objects.
func (d *Deployment) selector() client.MatchingLabels {
	return client.MatchingLabels{names.LabelDeployment: names.LabelValue(d.Name())}
}

// Instances are the deployment's instances the spec names (all for "").
func (d *Deployment) Instances(ctx context.Context, spec string) ([]Instance, error) {
	filters, err := instances.ParseSpec(spec)
	if err != nil {
		return nil, err
	}
	var pods corev1.PodList
	if err := d.Client.List(ctx, &pods, client.InNamespace(d.Namespace), d.selector()); err != nil {
		return nil, err
	}
	return Select(d.Name(), Instances(d.Manifest, pods.Items), filters)
}

// Rows are the instances with their states, each read from its launchers
// (at once, an exec per pod); an instance whose launchers cannot be asked
// is shown from its pod alone.
func (d *Deployment) Rows(ctx context.Context, instances []Instance) []Row {
	rows := make([]Row, len(instances))
	var wg sync.WaitGroup
	for i, in := range instances {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, statusTimeout)
			defer cancel()
			st, _ := LauncherStatus(ctx, d.Cluster, in.Pod)
			rows[i] = Row{Instance: in, State: StateOf(in.Pod, st)}
		})
	}
	wg.Wait()
	return rows
}

// statusTimeout bounds asking one pod's launchers: an instance that does
// not answer is shown from its pod.
const statusTimeout = 10 * time.Second

// LauncherStatus asks the instance's launchers, through its first running
// process container, what they recorded.
func LauncherStatus(ctx context.Context, c cluster.Cluster, pod *corev1.Pod) (*contract.Status, error) {
	container, err := FirstProcess(pod)
	if err != nil {
		return nil, err
	}
	var out, errOut bytes.Buffer
	if err := c.Exec(ctx, pod, container, []string{contract.Binary, contract.StatusCommand}, cluster.Streams{Stdout: &out, Stderr: &errOut}); err != nil {
		return nil, fmt.Errorf("pod %s, container %s: %w: %s", pod.Name, container, err, errOut.String())
	}
	var st contract.Status
	if err := json.Unmarshal(out.Bytes(), &st); err != nil {
		return nil, fmt.Errorf("pod %s, container %s: status: %w", pod.Name, container, err)
	}
	return &st, nil
}

// FirstProcess is the pod's first process container that runs, where
// `bosh ssh` and `bosh logs` reach the instance.
func FirstProcess(pod *corev1.Pod) (string, error) {
	if pod == nil {
		return "", fmt.Errorf("it has no pod")
	}
	for _, p := range ProcessContainers(pod) {
		if podstate.Running(pod, p.Container) {
			return p.Container, nil
		}
	}
	return "", fmt.Errorf("no process container of pod %s runs (phase %s)", pod.Name, pod.Status.Phase)
}
