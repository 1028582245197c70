package objects

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// Encode is the YAML of one object without its status and what an empty Go
// field prints (`creationTimestamp: null`, `resources: {}`), so the file
// holds only what was set.
func Encode(obj client.Object) ([]byte, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var v map[string]any
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, err
	}
	// Status is the cluster's to write.
	delete(v, "status")
	return yaml.Marshal(prune(v))
}

// EncodeAll is the objects as one YAML stream, `---` before each.
func EncodeAll(objs []client.Object) ([]byte, error) {
	var out bytes.Buffer
	for _, o := range objs {
		data, err := Encode(o)
		if err != nil {
			return nil, err
		}
		out.WriteString("---\n")
		out.Write(data)
	}
	return out.Bytes(), nil
}

// FileName is the file an object is written to in an output directory.
func FileName(obj client.Object) string {
	return fmt.Sprintf("%s-%s.yaml", strings.ToLower(obj.GetObjectKind().GroupVersionKind().Kind), obj.GetName())
}

// prune drops nulls and the maps left empty by dropping them.
func prune(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			p := prune(e)
			if m, ok := p.(map[string]any); p == nil || ok && len(m) == 0 {
				delete(t, k)
				continue
			}
			t[k] = p
		}
		return t
	case []any:
		for i, e := range t {
			t[i] = prune(e)
		}
		return t
	}
	return v
}
