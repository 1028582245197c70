// Package gather_test keeps the house plan (issue 45) by the packages'
// imports: gather/ has no code of its own, only its floors (model, render,
// releaseimage, gathering, operator, client) and this test of what each
// may depend on.
package gather_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/bosh-injector/bosh-injector/"

// controllers are the operator's controller packages and their manager:
// the admission webhook and the client commands share the controllers'
// contract (gather/operator/status, orphan, statefulsets, podstate) and
// never a controller itself.
var controllers = []string{
	module + "gather/operator/manager",
	module + "gather/operator/runner",
	module + "gather/operator/rollout",
	module + "gather/operator/disks",
}

// kubernetesClients are what the BOSH model must not depend on: it is
// pure, the API types being the most it may know of Kubernetes.
var kubernetesClients = []string{"k8s.io/client-go", "sigs.k8s.io/controller-runtime"}

// TestHousePlan fails when webhook/ or a client command's package
// (gather/client/...) depends on a controller package, or when a package
// of the BOSH model (gather/model/...) depends on Kubernetes client code,
// naming the import chain that does.
func TestHousePlan(t *testing.T) {
	graph := importGraph(t)
	var webhook, clients, model []string
	for p := range graph {
		switch rel, _ := strings.CutPrefix(p, module); {
		case rel == "webhook" || strings.HasPrefix(rel, "webhook/"):
			webhook = append(webhook, p)
		case strings.HasPrefix(rel, "gather/client/"):
			clients = append(clients, p)
		case strings.HasPrefix(rel, "gather/model/"):
			model = append(model, p)
		}
	}
	// A floor moved or renamed must move this test with it, not empty it.
	for _, c := range controllers {
		if _, ok := graph[c]; !ok {
			t.Errorf("controller package %s is gone: update the plan", c)
		}
	}
	if len(webhook) == 0 || len(clients) == 0 || len(model) == 0 {
		t.Fatalf("found %d webhook, %d client and %d model packages: update the plan", len(webhook), len(clients), len(model))
	}
	isController := func(p string) bool {
		return slices.ContainsFunc(controllers, func(c string) bool { return p == c || strings.HasPrefix(p, c+"/") })
	}
	isClient := func(p string) bool {
		return slices.ContainsFunc(kubernetesClients, func(c string) bool { return p == c || strings.HasPrefix(p, c+"/") })
	}
	for _, p := range append(webhook, clients...) {
		if chain := graph.chain(p, isController); chain != nil {
			t.Errorf("%s depends on a controller package: %s", short(p), strings.Join(chain, " → "))
		}
	}
	for _, p := range model {
		if chain := graph.chain(p, isClient); chain != nil {
			t.Errorf("%s (the BOSH model) depends on Kubernetes client code: %s", short(p), strings.Join(chain, " → "))
		}
	}
}

// graph is each package's imports (tests left out).
type graph map[string][]string

// importGraph lists the module's gather/ and webhook/ packages and every
// package they depend on; a package that does not build is listed with
// the imports it has (-e): building is other tests' business.
func importGraph(t *testing.T) graph {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH")
	}
	cmd := exec.Command("go", "list", "-e", "-deps", "-json=ImportPath,Imports", module+"gather/...", module+"webhook/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	g := graph{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		g[p.ImportPath] = p.Imports
	}
	return g
}

// chain is a shortest import chain from package from to one that
// forbidden holds, nil when there is none.
func (g graph) chain(from string, forbidden func(string) bool) []string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if forbidden(p) {
			var chain []string
			for ; p != ""; p = prev[p] {
				chain = append(chain, short(p))
			}
			slices.Reverse(chain)
			return chain
		}
		for _, q := range g[p] {
			if _, seen := prev[q]; !seen {
				prev[q] = p
				queue = append(queue, q)
			}
		}
	}
	return nil
}

// short is a package path without the module's.
func short(p string) string { return strings.TrimPrefix(p, module) }
