package jobspec

import (
	"bytes"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// SchemaFile is the optional JSON schema of a job's bound properties.
const SchemaFile = "properties_schema.json"

const draft202012 = "https://json-schema.org/draft/2020-12/schema"

// Formats standing in for the director's extra `type: certificate`: alone
// it accepts "" or a PEM X.509 certificate and nothing else; in a list of
// types it checks strings only.
const (
	certificateFormat       = "bosh-certificate"
	certificateStringFormat = "bosh-certificate-string"
)

// PropertiesSchema is a compiled properties_schema.json.
type PropertiesSchema struct{ schema *jsonschema.Schema }

// CompileSchema compiles a properties schema as the director accepts it:
// `$schema` must be declared and be draft 2020-12, formats are asserted.
func CompileSchema(data []byte) (*PropertiesSchema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	m, _ := doc.(map[string]any)
	declared, _ := m["$schema"].(string)
	if strings.TrimSpace(declared) == "" {
		return nil, errors.New("You must declare your $schema draft version")
	}
	if strings.TrimSuffix(declared, "#") != draft202012 {
		return nil, fmt.Errorf("Only %s schema is currently supported", draft202012)
	}
	certificateTypes(doc)
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	c.RegisterFormat(&jsonschema.Format{Name: certificateFormat, Validate: func(v any) error {
		s, ok := v.(string)
		if !ok {
			return errors.New("not a string")
		}
		return parseCertificate(s)
	}})
	c.RegisterFormat(&jsonschema.Format{Name: certificateStringFormat, Validate: func(v any) error {
		if s, ok := v.(string); ok {
			return parseCertificate(s)
		}
		return nil
	}})
	if err := c.AddResource(SchemaFile, doc); err != nil {
		return nil, err
	}
	s, err := c.Compile(SchemaFile)
	if err != nil {
		return nil, err
	}
	return &PropertiesSchema{s}, nil
}

func parseCertificate(s string) error {
	if s == "" {
		return nil
	}
	b, _ := pem.Decode([]byte(s))
	if b == nil {
		return errors.New("no PEM block")
	}
	_, err := x509.ParseCertificate(b.Bytes)
	return err
}

// certificateTypes rewrites `type: certificate` into the stand-in formats.
func certificateTypes(v any) {
	switch t := v.(type) {
	case map[string]any:
		switch typ := t["type"].(type) {
		case string:
			if typ == "certificate" {
				delete(t, "type")
				t["format"] = certificateFormat
			}
		case []any:
			for i, e := range typ {
				if e == "certificate" {
					typ[i] = "string"
					t["format"] = certificateStringFormat
				}
			}
		}
		for _, e := range t {
			certificateTypes(e)
		}
	case []any:
		for _, e := range t {
			certificateTypes(e)
		}
	}
}

// Validate checks a job's bound properties (any JSON-marshallable value).
// The error reads as the director's: "Error validating properties for
// <job>" and one line per violation in json_schemer's words.
func (s *PropertiesSchema) Validate(job string, props any) error {
	js, err := json.Marshal(props)
	if err != nil {
		return err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(js))
	if err != nil {
		return err
	}
	err = s.schema.Validate(inst)
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return err
	}
	var lines []string
	for _, leaf := range leaves(verr) {
		lines = append(lines, describe(leaf))
	}
	// The validator visits properties in map order; sorted, the message is
	// the same on every run.
	sort.Strings(lines)
	return errors.New("Error validating properties for " + job + "\n" + strings.Join(lines, "\n"))
}

func leaves(e *jsonschema.ValidationError) []*jsonschema.ValidationError {
	if len(e.Causes) == 0 {
		return []*jsonschema.ValidationError{e}
	}
	var out []*jsonschema.ValidationError
	for _, c := range e.Causes {
		out = append(out, leaves(c)...)
	}
	return out
}

var english = message.NewPrinter(language.English)

// describe words a violation as json_schemer does for the common keywords.
func describe(e *jsonschema.ValidationError) string {
	at := "root"
	if len(e.InstanceLocation) > 0 {
		parts := make([]string, len(e.InstanceLocation))
		for i, p := range e.InstanceLocation {
			parts[i] = strings.NewReplacer("~", "~0", "/", "~1").Replace(p)
		}
		at = "`/" + strings.Join(parts, "/") + "`"
	}
	switch k := e.ErrorKind.(type) {
	case *kind.Type:
		if len(k.Want) == 1 {
			article := "a"
			switch k.Want[0] {
			case "integer", "object", "array":
				article = "an"
			case "null":
				return "value at " + at + " is not null"
			}
			return fmt.Sprintf("value at %s is not %s %s", at, article, k.Want[0])
		}
		want, _ := json.Marshal(k.Want)
		return fmt.Sprintf("value at %s is not one of the types: %s", at, want)
	case *kind.Format:
		if k.Want == certificateFormat || k.Want == certificateStringFormat {
			return "value at " + at + " is not a certificate"
		}
		return fmt.Sprintf("value at %s does not match format: %s", at, k.Want)
	case *kind.Required:
		return fmt.Sprintf("object at %s is missing required properties: %s", at, strings.Join(k.Missing, ", "))
	case *kind.Enum:
		want, _ := json.Marshal(k.Want)
		return fmt.Sprintf("value at %s is not one of: %s", at, want)
	case *kind.AdditionalProperties:
		return fmt.Sprintf("object at %s has disallowed additional properties: %s", at, strings.Join(k.Properties, ", "))
	default:
		return fmt.Sprintf("value at %s: %s", at, e.ErrorKind.LocalizedString(english))
	}
}
