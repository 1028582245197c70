// Package boshcli is what `bosh deploy` makes of a manifest before the
// director reads it. The director never sees the file: the CLI's
// director/template Template.Evaluate unmarshals it with go-yaml v2 into
// interface{}, applies the ops files (go-patch), interpolates the CLI's
// own variables and marshals the result with go-yaml v2; the director
// reads that text with Psych. The round trip shows in what templates see:
// integral floats lose their fraction (3.0 arrives as the Integer 3), the
// keys of every hash come in go-yaml v2's sorted order, and scalars the two
// libraries read differently (dates, 1:30, integers beyond 64 bits) arrive
// as go-yaml v2 printed them.
package boshcli

import (
	"fmt"

	"gopkg.in/yaml.v2"

	"github.com/bosh-injector/bosh-injector/gather/model/opsfile"
	"github.com/bosh-injector/bosh-injector/gather/model/yamlvalue"
)

// OpsFile is a named ops file; the name appears in errors.
type OpsFile struct {
	Name string
	Data []byte
}

// Document is the manifest document the director reads when `bosh deploy`
// sends it the manifest with the ops files applied in order. The CLI's
// own variables take no part: variables are the director's here,
// interpolated in the document afterwards.
func Document(manifest []byte, ops []OpsFile) (any, error) {
	text, err := evaluate(manifest, ops)
	if err != nil {
		return nil, err
	}
	doc, err := yamlvalue.ParsePsych(text)
	if err != nil {
		// Psych reading what go-yaml v2 printed, as the director would.
		return nil, fmt.Errorf("manifest as `bosh deploy` sends it: %w", err)
	}
	return doc, nil
}

// evaluate is Template.Evaluate without variables. The CLI reads every ops
// file when it parses its flags, before the manifest, so their errors come
// first, with its wording.
func evaluate(manifest []byte, ops []OpsFile) ([]byte, error) {
	parsed := make([][]opsfile.Op, len(ops))
	for i, f := range ops {
		var err error
		if parsed[i], err = opsfile.Parse(f.Data); err != nil {
			return nil, fmt.Errorf("Deserializing ops file '%s': %w", f.Name, err)
		}
	}
	var doc any
	if err := yamlvalue.CheckValues(manifest); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	if err := yaml.Unmarshal(manifest, &doc); err != nil {
		return nil, fmt.Errorf("manifest: Evaluating manifest: %w", err)
	}
	for i, f := range ops {
		var err error
		if doc, err = opsfile.Apply(doc, parsed[i]); err != nil {
			return nil, fmt.Errorf("ops file %s: %w", f.Name, err)
		}
	}
	text, err := yaml.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("manifest: Evaluating manifest: %w", err)
	}
	return text, nil
}
