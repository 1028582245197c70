package day2

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/configserver/director"
	"github.com/bosh-injector/bosh-injector/gather/configserver/store"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/operator/status"
)

// Variable is a variable of the deployment's manifest that has a value:
// never the value.
type Variable struct {
	// ID is the config server's id of the current version; with variables
	// in Secrets, the Secret's resourceVersion, which changes when the
	// value is stored again.
	ID, Name, Type string
	Secret         string
}

// ConfigServer is the embedded config server's store, as the chart
// installs it: its namespace and the director's name.
type ConfigServer struct {
	Namespace, Director string
}

// Variables are the deployment's variables that have a value. With a
// config server, those of its accepted variable set, as `bosh variables`
// lists a deployment's current set: each credential version's id and full
// name, and its type where the embedded server's store can be read (or the
// manifest declares it). With variables in Secrets, the manifest's
// variables that have one, in manifest order, named
// "/<namespace>/<deployment>/<name>" (a namespace is what a director is to
// its deployments).
func (d *Deployment) Variables(ctx context.Context, server ConfigServer) ([]Variable, error) {
	if name := status.GatheringOf(d.Secret).VariableSet; name != "" {
		return d.variableSet(ctx, name, server)
	}
	var out []Variable
	for _, v := range d.Manifest.Variables {
		var s corev1.Secret
		err := d.Client.Get(ctx, client.ObjectKey{Namespace: d.Namespace, Name: names.VariableSecret(d.Name(), v.Name)}, &s)
		if client.IgnoreNotFound(err) != nil {
			return nil, err
		}
		if err == nil {
			out = append(out, Variable{ID: s.ResourceVersion, Name: "/" + d.Namespace + "/" + d.Name() + "/" + v.Name, Type: v.Type, Secret: s.Name})
		}
	}
	return out, nil
}

// variableSet lists the variable set Secret name.
func (d *Deployment) variableSet(ctx context.Context, name string, server ConfigServer) ([]Variable, error) {
	var s corev1.Secret
	if err := d.Client.Get(ctx, client.ObjectKey{Namespace: d.Namespace, Name: name}, &s); err != nil {
		return nil, fmt.Errorf("the deployment's variable set: %w", err)
	}
	var set map[string]string
	if err := json.Unmarshal(s.Data[names.VariableSetKey], &set); err != nil {
		return nil, fmt.Errorf("the deployment's variable set %s: %w", name, err)
	}
	declared := map[string]string{}
	for _, v := range d.Manifest.Variables {
		declared[director.Name(server.Director, d.Name(), v.Name)] = v.Type
	}
	versions, err := (&store.Store{Client: d.Client, Namespace: server.Namespace}).ByIDs(ctx, slices.Collect(maps.Values(set)))
	if err != nil && !apierrors.IsForbidden(err) {
		return nil, err
	}
	var out []Variable
	for _, full := range slices.Sorted(maps.Keys(set)) {
		v := Variable{ID: set[full], Name: full, Type: declared[full]}
		if version, ok := versions[v.ID]; ok {
			v.Type = version.Type
		}
		out = append(out, v)
	}
	return out, nil
}

// VariablesTable is `bosh variables`' table.
func VariablesTable(vars []Variable) Table {
	t := Table{Content: "variables", Header: []string{"ID", "Name", "Type"}}
	for _, v := range vars {
		t.Sections = append(t.Sections, [][]string{{v.ID, v.Name, v.Type}})
	}
	return t
}
