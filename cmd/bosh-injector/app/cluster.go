package app

import (
	"fmt"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/client/cluster"
)

// userCluster connects with the user's kubeconfig, as kubectl does, and
// returns the namespace given, else the context's.
func userCluster(kubeconfig, namespace string) (cluster.Cluster, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
	if namespace == "" {
		ns, _, err := loader.Namespace()
		if err != nil {
			return cluster.Cluster{}, "", fmt.Errorf("kubeconfig: %w", err)
		}
		namespace = ns
	}
	cfg, err := restConfig(kubeconfig)
	if err != nil {
		return cluster.Cluster{}, "", err
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return cluster.Cluster{}, "", err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return cluster.Cluster{}, "", err
	}
	return cluster.Cluster{Config: cfg, Client: c, Kube: kube}, namespace, nil
}
