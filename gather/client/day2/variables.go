package day2

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/names"
)

// Variable is a variable of the deployment's manifest that has a value:
// never the value.
type Variable struct {
	// ID is the Secret's resourceVersion: it changes when the value is
	// stored again, as a config server's id does.
	ID, Name, Type string
	Secret         string
}

// Variables are the manifest's variables that have a Secret, in manifest
// order, named as the director names them ("/<namespace>/<deployment>/
// <name>": a namespace is what a director is to its deployments).
func (d *Deployment) Variables(ctx context.Context) ([]Variable, error) {
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

// VariablesTable is `bosh variables`' table.
func VariablesTable(vars []Variable) Table {
	t := Table{Content: "variables", Header: []string{"ID", "Name", "Type"}}
	for _, v := range vars {
		t.Sections = append(t.Sections, [][]string{{v.ID, v.Name, v.Type}})
	}
	return t
}
