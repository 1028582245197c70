package charts_test

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The chart's README lists every value with its default: values.yaml,
// values.schema.json and the README's table name the same values, and the
// table's defaults are values.yaml's. A value is a leaf of the schema's
// properties; a value the schema leaves open (resources, nodeSelector, …)
// is listed whole.
func TestValuesDocumented(t *testing.T) {
	dir := "bosh-injector"
	var schema map[string]any
	if err := json.Unmarshal(readFile(t, filepath.Join(dir, "values.schema.json")), &schema); err != nil {
		t.Fatalf("values.schema.json: %v", err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(readFile(t, filepath.Join(dir, "values.yaml")), &values); err != nil {
		t.Fatalf("values.yaml: %v", err)
	}

	inSchema := map[string]bool{}
	schemaLeaves(schema, "", inSchema)
	defaults := map[string]string{}
	valueLeaves(values, schema, "", defaults)
	documented := readmeTable(t, string(readFile(t, filepath.Join(dir, "README.md"))))

	for _, k := range slices.Sorted(maps.Keys(inSchema)) {
		if _, ok := defaults[k]; !ok {
			t.Errorf("%s is in values.schema.json but not in values.yaml", k)
		}
		if _, ok := documented[k]; !ok {
			t.Errorf("%s is in values.schema.json but not in README.md's table", k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(defaults)) {
		if !inSchema[k] {
			t.Errorf("%s is in values.yaml but not in values.schema.json", k)
		}
		if got, ok := documented[k]; !ok {
			t.Errorf("%s is in values.yaml but not in README.md's table (default `%s`)", k, defaults[k])
		} else if got != defaults[k] {
			t.Errorf("README.md gives %s the default `%s`, values.yaml `%s`", k, got, defaults[k])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(documented)) {
		if _, ok := defaults[k]; !ok && !inSchema[k] {
			t.Errorf("%s is in README.md's table but neither in values.yaml nor in values.schema.json", k)
		}
	}
}

// schemaLeaves adds the paths of the schema's properties that declare no
// properties of their own.
func schemaLeaves(schema map[string]any, prefix string, out map[string]bool) {
	props, _ := schema["properties"].(map[string]any)
	for k, sub := range props {
		sub, _ := sub.(map[string]any)
		if _, nested := sub["properties"]; nested {
			schemaLeaves(sub, prefix+k+".", out)
		} else {
			out[prefix+k] = true
		}
	}
}

// valueLeaves adds the paths of values.yaml, descending where the schema
// declares properties, each with its value as compact JSON.
func valueLeaves(values, schema map[string]any, prefix string, out map[string]string) {
	props, _ := schema["properties"].(map[string]any)
	for k, v := range values {
		sub, _ := props[k].(map[string]any)
		if m, ok := v.(map[string]any); ok && sub["properties"] != nil {
			valueLeaves(m, sub, prefix+k+".", out)
			continue
		}
		data, _ := json.Marshal(v) // decoded from YAML, always encodes
		out[prefix+k] = string(data)
	}
}

var tableRow = regexp.MustCompile("^\\| `([^`]+)` \\| `([^`]*)` \\|")

// readmeTable is the README's value table: value path → default.
func readmeTable(t *testing.T, readme string) map[string]string {
	out := map[string]string{}
	for n, line := range strings.Split(readme, "\n") {
		if m := tableRow.FindStringSubmatch(line); m != nil {
			if _, dup := out[m[1]]; dup {
				t.Errorf("README.md line %d lists %s again", n+1, m[1])
			}
			out[m[1]] = m[2]
		}
	}
	if len(out) == 0 {
		t.Fatal("README.md has no value table (rows | `path` | `default` | meaning |)")
	}
	return out
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
