package variables

import (
	"context"
	"fmt"
	"strings"

	"github.com/bosh-injector/bosh-injector/gather/model/inputfile"
	"github.com/bosh-injector/bosh-injector/gather/model/yamlvalue"
)

// Given reads the variables a user gives as bosh's -l and -v do: each vars
// file a hash of variables, later files winning, then NAME=VALUE pairs
// (strings), which win over the files.
func Given(ctx context.Context, varsFiles, kvs []string) (*MapSource, error) {
	given := NewMapSource(nil)
	for _, f := range varsFiles {
		data, err := inputfile.Read(ctx, "--vars-file", f)
		if err != nil {
			return nil, err
		}
		doc, err := yamlvalue.Parse(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if m, ok := doc.(*yamlvalue.Map); ok {
			for _, k := range m.Keys() {
				v, _ := m.Get(k)
				_ = given.Put(k, v)
			}
		} else if doc != nil {
			return nil, fmt.Errorf("%s: expected a hash of variables", f)
		}
	}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--var %q: expected NAME=VALUE", kv)
		}
		_ = given.Put(k, v)
	}
	return given, nil
}
