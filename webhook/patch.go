package webhook

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"sync"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
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
func podPatch(before, after *corev1.Pod) ([]byte, error) {
	// The patch is written into a buffer kept from admission to
	// admission and copied out at its size: growing a fresh buffer
	// allocates about twice the patch, and under concurrent admissions
	// the collector's work is what grows fastest.
	w := patchWriter{buf: patchBuffers.Get().(*bytes.Buffer)}
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
	buf *bytes.Buffer
	err error
}

// fields writes the ops for the changed fields of the structs before and
// after at path, descending depth levels into non-empty structs.
func (w *patchWriter) fields(path string, before, after reflect.Value, depth int) {
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
			w.fields(path, b, a, depth)
			continue
		case name == "":
			name = f.Name
		}
		switch {
		case reflect.DeepEqual(b.Interface(), a.Interface()):
		case depth > 0 && a.Kind() == reflect.Struct && !b.IsZero():
			w.fields(path+"/"+name, b, a, depth-1)
		default:
			w.add(path+"/"+name, a.Interface())
		}
	}
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
	// The Encoder writes straight into the buffer; its trailing newline
	// is whitespace JSON allows.
	w.err = json.NewEncoder(w.buf).Encode(value)
	w.buf.WriteByte('}')
}
