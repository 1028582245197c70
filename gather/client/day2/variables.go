package day2

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/configserver/director"
	"github.com/bosh-injector/bosh-injector/gather/configserver/store"
	"github.com/bosh-injector/bosh-injector/gather/names"
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

// Variables are the manifest's variables that have a value, in manifest
// order: the current version on the embedded config server, named as the
// director names them; else the variable Secret, named
// "/<namespace>/<deployment>/<name>" (a namespace is what a director is to
// its deployments). A store the user may not read is left out.
func (d *Deployment) Variables(ctx context.Context, server ConfigServer) ([]Variable, error) {
	creds := &store.Store{Client: d.Client, Namespace: server.Namespace}
	var out []Variable
	for _, v := range d.Manifest.Variables {
		full := director.Name(server.Director, d.Name(), v.Name)
		cur, err := creds.Current(ctx, full)
		if err != nil && !apierrors.IsForbidden(err) {
			return nil, err
		}
		if cur != nil {
			out = append(out, Variable{ID: cur.ID, Name: cur.Name, Type: cur.Type})
			continue
		}
		var s corev1.Secret
		err = d.Client.Get(ctx, client.ObjectKey{Namespace: d.Namespace, Name: names.VariableSecret(d.Name(), v.Name)}, &s)
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
