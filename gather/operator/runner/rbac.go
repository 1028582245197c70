package runner

import (
	"context"
	_ "embed"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/yaml"

	"github.com/bosh-injector/bosh-injector/gather/gathering"
	"github.com/bosh-injector/bosh-injector/gather/names"
)

//go:embed rbac.yaml
var rbacYAML string

// ensureRBAC creates the gathering Job's ServiceAccount, Role and RoleBinding
// from rbac.yaml, owned by the manifest Secret; the Role names the manifest,
// the variable Secrets of inputs and the Secrets plan lets the gathering
// read, and is updated when they change.
func (r *Reconciler) ensureRBAC(ctx context.Context, manifest *corev1.Secret, deployment string, inputs Inputs, plan gathering.Plan) error {
	name := names.DNS1123Label(deployment) + "-gather"
	objects := []client.Object{&corev1.ServiceAccount{}, &rbacv1.Role{}, &rbacv1.RoleBinding{}}
	for i, doc := range strings.Split(rbacYAML, "\n---\n") {
		doc = strings.ReplaceAll(doc, "NAME", name)
		if err := yaml.UnmarshalStrict([]byte(doc), objects[i]); err != nil {
			return fmt.Errorf("rbac.yaml document %d: %w", i+1, err)
		}
		obj := objects[i]
		obj.SetNamespace(manifest.Namespace)
		obj.SetLabels(r.labels(deployment))
		switch o := obj.(type) {
		case *rbacv1.RoleBinding:
			o.Subjects[0].Namespace = manifest.Namespace
		case *rbacv1.Role:
			// With a config server, gathering reads only the variable
			// Secrets it imports.
			vars := inputs.Variables
			if r.Config.ConfigServer.server() {
				vars = plan.Import
			}
			fillSecretNames(o, manifest.Name, deployment, vars, plan.Names())
		case *corev1.ServiceAccount:
			annotations, err := serverScope(inputs)
			if err != nil {
				return err
			}
			o.Annotations = annotations
		}
		if err := controllerutil.SetControllerReference(manifest, obj, r.Client.Scheme()); err != nil {
			return err
		}
		err := r.Client.Create(ctx, obj)
		if apierrors.IsAlreadyExists(err) {
			switch o := obj.(type) {
			case *rbacv1.Role:
				err = r.updateRole(ctx, o)
			case *corev1.ServiceAccount:
				err = r.updateAnnotations(ctx, o)
			}
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %T %s: %w", obj, name, err)
		}
	}
	return nil
}

// fillSecretNames puts the manifest's, the variables' and the other read
// Secrets' names in the Role's rules that name them.
func fillSecretNames(role *rbacv1.Role, manifest, deployment string, variables, reads []string) {
	var vars []string
	for _, v := range variables {
		vars = append(vars, names.VariableSecret(deployment, v))
	}
	slices.Sort(vars)
	filled := map[string][]string{"MANIFEST": {manifest}, "VARIABLES": slices.Compact(vars), "READS": reads}
	var rules []rbacv1.PolicyRule
	for _, rule := range role.Rules {
		if len(rule.ResourceNames) == 1 {
			if want, placeholder := filled[rule.ResourceNames[0]]; placeholder {
				// No names would grant every Secret: a rule without any
				// is left out.
				if len(want) == 0 {
					continue
				}
				rule.ResourceNames = want
			}
		}
		rules = append(rules, rule)
	}
	role.Rules = rules
}

// updateAnnotations brings an existing gathering ServiceAccount's
// annotations to want's.
func (r *Reconciler) updateAnnotations(ctx context.Context, want *corev1.ServiceAccount) error {
	var have corev1.ServiceAccount
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(want), &have); err != nil {
		return err
	}
	if maps.Equal(have.Annotations, want.Annotations) {
		return nil
	}
	have.Annotations = want.Annotations
	return r.Client.Update(ctx, &have)
}

// updateRole brings an existing gathering Role's rules to want's.
func (r *Reconciler) updateRole(ctx context.Context, want *rbacv1.Role) error {
	var have rbacv1.Role
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(want), &have); err != nil {
		return err
	}
	if equality.Semantic.DeepEqual(have.Rules, want.Rules) {
		return nil
	}
	have.Rules = want.Rules
	return r.Client.Update(ctx, &have)
}
