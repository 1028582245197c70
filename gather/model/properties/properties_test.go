package properties

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/bosh-injector/bosh-injector/gather/model/jobspec"
	"github.com/bosh-injector/bosh-injector/gather/model/manifest"
)

// specP is Spec P of the conformance cases.
const specP = `
name: myjob
properties:
  port:        {default: 8080}
  db.user:     {default: admin}
  db.pass:     {}
  tls.enabled: {default: false}
  opts:        {default: {zeta: 1, alpha: {y: 2, x: 1}}}
  new.name:    {}
  old.name:    {}
`

const specPBound = `"db":{"user":"admin","pass":null},"tls":{"enabled":false},"opts":{"alpha":{"x":1,"y":2},"zeta":1},"new":{"name":null},"old":{"name":null}}`

// bind loads a manifest whose single group "ig" runs "myjob" and binds it.
func bind(t *testing.T, spec, man string) (string, error) {
	t.Helper()
	s, err := jobspec.Parse([]byte(spec), "myjob")
	if err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Parse([]byte(man))
	if err != nil {
		t.Fatal(err)
	}
	g := &m.InstanceGroups[0]
	raw, err := RawSource(m, g, &g.Jobs[0])
	if err != nil {
		return "", err
	}
	b, err := Bind(s.Properties, raw)
	if err != nil {
		return "", err
	}
	js, err := json.Marshal(b)
	return string(js), err
}

func job(props string) string {
	return "name: dep\ninstance_groups:\n- name: ig\n  instances: 1\n  jobs:\n  - name: myjob\n    release: rel\n" + props
}

func TestBindSpecP(t *testing.T) {
	tests := []struct {
		name, manifest, want, err string
	}{
		{"T01 T04 T05 T06 T09 defaults", job(""), `{"port":8080,` + specPBound, ""},
		{"T02 manifest value", job("    properties: {port: 9090}\n"), `{"port":9090,` + specPBound, ""},
		{"T03 null falls back to default", job("    properties: {port: null}\n"), `{"port":8080,` + specPBound, ""},
		{"T07 undeclared dropped", job("    properties: {other: 1}\n"), `{"port":8080,` + specPBound, ""},
		{"T08 nested with nil leaf", job("    properties: {db: {user: bob, extra: x}}\n"), `{"port":8080,"db":{"user":"bob","pass":null},` + specPBound[strings.Index(specPBound, `"tls"`):], ""},
		{"T10 alternatives", job("    properties: {old: {name: o}}\n"), `"new":{"name":null},"old":{"name":"o"}}`, ""},
		{"T11 shape check", job("    properties: {db: str}\n"), "", "Property 'db.user' expects a hash, but received 'String'"},
		{"T11 integer", job("    properties: {db: 1}\n"), "", "Property 'db.user' expects a hash, but received 'Integer'"},
		{"T11 array", job("    properties: {db: [1]}\n"), "", "Property 'db.user' expects a hash, but received 'Array'"},
		{"T11 boolean", job("    properties: {tls: yes}\n"), "", "Property 'tls.enabled' expects a hash, but received 'TrueClass'"},
		{"T12 literal dotted key", job("    properties: {db.user: carl}\n"), `{"port":8080,` + specPBound, ""},
		{"T13 job properties hide the others", "properties: {port: 3}\n" + job("    properties: {port: 1}\n  properties: {port: 2, db: {user: carl}}\n"), `{"port":1,"db":{"user":"admin","pass":null}`, ""},
		{"T14 deep merge, group wins", "properties: {db: {user: g, pass: gp}}\n" + job("  properties: {db: {user: i}}\n"), `"db":{"user":"i","pass":"gp"}`, ""},
		{"T15 empty job properties", job("    properties: {}\n  properties: {port: 2}\n"), `{"port":8080,`, ""},
		{"null job properties", job("    properties: ~\n"), "", "Property 'properties' value (nil) did not match the required type 'Hash'"},
		{"T39f shape check sees the placeholder string", job("    properties: {tls: ((tls))}\n"), "", "Property 'tls.enabled' expects a hash, but received 'String'"},
		{"placeholder leaf kept for interpolation", job("    properties: {port: ((port))}\n"), `{"port":"((port))",`, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := bind(t, specP, tc.manifest)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("error = %v, want %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(got, tc.want) {
				t.Fatalf("got %s\nwant it to contain %s", got, tc.want)
			}
		})
	}
}

func TestBindOrderAndSorting(t *testing.T) {
	tests := []struct{ spec, manifest, want string }{
		// A parent and a child: order-dependent.
		{"name: myjob\nproperties: {a: {default: {x: 1}}, a.b: {default: 2}}", job(""), `{"a":{"x":1,"b":2}}`},
		{"name: myjob\nproperties: {a.b: {default: 2}, a: {default: {x: 1}}}", job(""), `{"a":{"x":1}}`},
		// Hashes sorted at every depth, inside arrays too: by the CLI's
		// go-yaml v2 round trip (binding sorts all but those in arrays).
		{"name: myjob\nproperties: {h: {}}", job("    properties: {h: {b: 1, a: [{z: 1, w: 2}], c: {e: 1, d: 2}}}\n"), `{"h":{"a":[{"w":2,"z":1}],"b":1,"c":{"d":2,"e":1}}}`},
		// T39f second half: tls.cert with {tls: {cert: ((tls))}} binds.
		{"name: myjob\nproperties: {tls.cert: {type: certificate}}", job("    properties: {tls: {cert: ((tls))}}\n"), `{"tls":{"cert":"((tls))"}}`},
		// YAML 1.1 typing of manifest values, after the CLI's round trip:
		// 1e3 is the float 1000 go-yaml v2 prints as 1000, an Integer.
		{"name: myjob\nproperties: {v: {}}", job("    properties: {v: [yes, no, on, off, ~, null, 0777, 0x1F, 1.5, nil, '1', 1e3]}\n"), `{"v":[true,false,true,false,null,null,511,31,1.5,"nil","1",1000]}`},
	}
	for _, tc := range tests {
		got, err := bind(t, tc.spec, tc.manifest)
		if err != nil {
			t.Errorf("%s: %v", tc.spec, err)
			continue
		}
		if got != tc.want {
			t.Errorf("%s\ngot  %s\nwant %s", tc.spec, got, tc.want)
		}
	}
}

func TestBindDoesNotAlias(t *testing.T) {
	s, _ := jobspec.Parse([]byte("name: myjob\nproperties: {l: {default: [1]}, h: {}}"), "myjob")
	m, _ := manifest.Parse([]byte(job("    properties: {h: {a: 1}}\n")))
	raw, _ := RawSource(m, &m.InstanceGroups[0], &m.InstanceGroups[0].Jobs[0])
	b1, _ := Bind(s.Properties, raw)
	h, _ := b1.Get("h")
	h.(interface{ Set(string, any) }).Set("a", 2)
	b2, _ := Bind(s.Properties, raw)
	js, _ := json.Marshal(b2)
	if string(js) != `{"l":[1],"h":{"a":1}}` {
		t.Fatalf("binding shares storage: %s", js)
	}
}
