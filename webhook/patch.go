package webhook

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"sync"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/bosh-injector/bosh-injector/inject"
)

// patched allows a pod with patch, as admission.Patched does with
// operations.
func patched(patch []byte) admission.Response {
	resp := admission.Allowed("")
	if len(patch) > 0 {
		pt := admissionv1.PatchTypeJSONPatch
		resp.Patch, resp.PatchType = patch, &pt
	}
	return resp
}

// podPatch returns the JSON patch, encoded, that turns the request's pod,
// decoded as before, into after: one `add` (which replaces an existing
// member) per field of the pod's metadata, spec and status, or of the pod
// itself, whose typed value changed. Diffing the whole encoded pod instead
// costs most of an admission, and grows with everything injected.
//
// A changed field's value is the typed one, so the patched request decodes
// to after. The paths exist in the request: before was decoded from it case
// sensitively and without duplicate keys, so a non-empty metadata, spec or
// status there is a JSON object; an empty one is replaced whole.
//
// The patch is written here rather than by admission.Response.Complete:
// that marshals each operation on its own and then re-scans every byte of
// it to compact it, which cost as much as encoding the values.
//
// The injected containers and volumes that after holds as reuse says are
// written from reuse's JSON, encoded once per instance.
func podPatch(before, after *corev1.Pod, reuse *reuse) ([]byte, error) {
	// The patch is written into a buffer kept from admission to
	// admission and copied out at its size: growing a fresh buffer
	// allocates about twice the patch, and under concurrent admissions
	// the collector's work is what grows fastest.
	w := patchWriter{buf: patchBuffers.Get().(*bytes.Buffer), reuse: reuse}
	defer func() {
		if w.buf.Cap() <= maxKeptBuffer {
			w.buf.Reset()
			patchBuffers.Put(w.buf)
		}
	}()
	w.buf.WriteByte('[')
	w.fields("", reflect.ValueOf(before).Elem(), reflect.ValueOf(after).Elem(), 1)
	if w.err != nil || w.buf.Len() == 1 {
		return nil, w.err
	}
	w.buf.WriteByte(']')
	return bytes.Clone(w.buf.Bytes()), nil
}

var patchBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxKeptBuffer bounds the buffers kept: a rare huge pod does not pin its
// patch's size in every pooled buffer.
const maxKeptBuffer = 4 << 20

type patchWriter struct {
	buf   *bytes.Buffer
	reuse *reuse
	err   error
}

// reuse is what a pod's patch takes from its instance's shared JSON: the
// elements added is the injection's own.
type reuse struct {
	json  *encodings
	added inject.Added
}

// encodings are JSON encodings of an instance's injected containers and
// volumes, by patch path and name: the same for every pod of the instance.
type encodings struct{ m sync.Map }

// encodingKey is an element's: its array's patch path and its name.
type encodingKey struct{ path, name string }

// of returns the encoding under key, encoding v first if none is there.
func (e *encodings) of(key encodingKey, v any) ([]byte, error) {
	if data, ok := e.m.Load(key); ok {
		return data.([]byte), nil
	}
	data, err := json.Marshal(v)
	if err == nil {
		e.m.Store(key, data)
	}
	return data, err
}

// fields writes the ops for the changed fields of the structs before and
// after at path, descending depth levels into non-empty structs.
func (w *patchWriter) fields(path string, before, after reflect.Value, depth int) {
	for _, f := range jsonFields(before.Type()) {
		b, a := before.Field(f.index), after.Field(f.index)
		if f.inline && a.Kind() == reflect.Struct {
			// Inlined (TypeMeta): its fields are the parent's members.
			w.fields(path, b, a, depth)
			continue
		}
		switch {
		// Compared through pointers: boxing a field's value would copy it.
		case reflect.DeepEqual(b.Addr().Interface(), a.Addr().Interface()):
		case depth > 0 && a.Kind() == reflect.Struct && !b.IsZero():
			w.fields(path+"/"+f.name, b, a, depth-1)
		default:
			w.add(path+"/"+f.name, a.Addr().Interface())
		}
	}
}

// jsonField is a struct field as encoding/json names it.
type jsonField struct {
	index  int
	name   string
	inline bool
}

// fieldsOf holds each struct type's jsonFields: reading the tags is most
// of a walk over fields that did not change.
var fieldsOf sync.Map

// jsonFields are t's exported fields that JSON encodes, with their names.
func jsonFields(t reflect.Type) []jsonField {
	if fs, ok := fieldsOf.Load(t); ok {
		return fs.([]jsonField)
	}
	var fs []jsonField
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-" || !f.IsExported():
			continue
		case name == "" && f.Anonymous:
			fs = append(fs, jsonField{index: i, name: f.Name, inline: true})
			continue
		case name == "":
			name = f.Name
		}
		fs = append(fs, jsonField{index: i, name: name})
	}
	fieldsOf.Store(t, fs)
	return fs
}

// add writes an `add` operation of value at path.
func (w *patchWriter) add(path string, value any) {
	if w.err != nil {
		return
	}
	if w.buf.Len() > 1 {
		w.buf.WriteByte(',')
	}
	w.buf.WriteString(`{"op":"add","path":`)
	p, _ := json.Marshal(path) // a string always encodes
	w.buf.Write(p)
	w.buf.WriteString(`,"value":`)
	switch v := value.(type) {
	case *[]corev1.Container:
		added := w.reuse.added.Containers
		if path == "/spec/initContainers" {
			added = w.reuse.added.InitContainers
		}
		elements(w, path, *v, func(c *corev1.Container) string { return c.Name }, added)
	case *[]corev1.Volume:
		elements(w, path, *v, func(v *corev1.Volume) string { return v.Name }, w.reuse.added.Volumes)
	default:
		w.encode(value)
	}
	w.buf.WriteByte('}')
}

// encode writes value. The Encoder writes straight into the buffer; its
// trailing newline is whitespace JSON allows.
func (w *patchWriter) encode(value any) {
	if w.err == nil {
		w.err = json.NewEncoder(w.buf).Encode(value)
	}
}

// elements writes the array of elems, those named in added from the
// reused JSON.
func elements[T any](w *patchWriter, path string, elems []T, name func(*T) string, added []string) {
	if elems == nil {
		w.encode(elems)
		return
	}
	w.buf.WriteByte('[')
	for i := range elems {
		if i > 0 {
			w.buf.WriteByte(',')
		}
		if n := name(&elems[i]); slices.Contains(added, n) {
			data, err := w.reuse.json.of(encodingKey{path, n}, &elems[i])
			if w.err == nil {
				w.err = err
			}
			w.buf.Write(data)
			continue
		}
		w.encode(&elems[i])
	}
	w.buf.WriteByte(']')
}
