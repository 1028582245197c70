package webhook

import (
	"reflect"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
)

// podPatch returns the JSON patch that turns the request's pod, decoded as
// before, into after: one `add` (which replaces an existing member) per
// field of the pod's metadata, spec and status, or of the pod itself, whose
// typed value changed. Diffing the whole encoded pod instead costs most of
// an admission, and grows with everything injected.
//
// A changed field's value is the typed one, so the patched request decodes
// to after. The paths exist in the request: before was decoded from it case
// sensitively and without duplicate keys, so a non-empty metadata, spec or
// status there is a JSON object; an empty one is replaced whole.
func podPatch(before, after *corev1.Pod) []jsonpatch.Operation {
	return fieldOps(nil, "", reflect.ValueOf(before).Elem(), reflect.ValueOf(after).Elem(), 1)
}

// fieldOps appends the ops for the changed fields of the structs before and
// after at path, descending depth levels into non-empty structs.
func fieldOps(ops []jsonpatch.Operation, path string, before, after reflect.Value, depth int) []jsonpatch.Operation {
	t := before.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		b, a := before.Field(i), after.Field(i)
		switch {
		case name == "-" || !f.IsExported():
			continue
		case name == "" && f.Anonymous && a.Kind() == reflect.Struct:
			// Inlined (TypeMeta): its fields are the parent's members.
			ops = fieldOps(ops, path, b, a, depth)
			continue
		case name == "":
			name = f.Name
		}
		switch {
		case reflect.DeepEqual(b.Interface(), a.Interface()):
		case depth > 0 && a.Kind() == reflect.Struct && !b.IsZero():
			ops = fieldOps(ops, path+"/"+name, b, a, depth-1)
		default:
			ops = append(ops, jsonpatch.Operation{Operation: "add", Path: path + "/" + name, Value: a.Interface()})
		}
	}
	return ops
}
