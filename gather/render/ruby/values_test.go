package ruby_test

import (
	"context"
	"math"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/bosh-injector/bosh-injector/gather/model/yamlvalue"
	"github.com/bosh-injector/bosh-injector/gather/render/ruby"
)

// Every type of the value model arrives as its Ruby class, at the edges of
// Marshal's encodings (one-byte lengths, 32-bit Fixnums, Bignums, encodings).
func TestValuesArriveAsRubyObjects(t *testing.T) {
	props := yamlvalue.NewMap()
	values := []struct {
		v    any
		want string
	}{
		{nil, "nil NilClass"}, {true, "true TrueClass"}, {false, "false FalseClass"},
		{int64(0), "0 Integer"}, {int64(122), "122 Integer"}, {int64(123), "123 Integer"}, {int64(-123), "-123 Integer"},
		{int64(-124), "-124 Integer"}, {int64(256), "256 Integer"}, {int64(-257), "-257 Integer"},
		{int64(math.MaxInt32), "2147483647 Integer"}, {int64(math.MinInt32), "-2147483648 Integer"},
		{int64(math.MaxInt32 + 1), "2147483648 Integer"}, {int64(math.MinInt64), "-9223372036854775808 Integer"},
		{yamlvalue.BigInt("12345678901234567890"), "12345678901234567890 Integer"},
		{yamlvalue.BigInt("-340282366920938463463374607431768211457"), "-340282366920938463463374607431768211457 Integer"},
		{1.0, "1.0 Float"}, {0.0, "0.0 Float"}, {math.Copysign(0, -1), "-0.0 Float"}, {1e20, "1.0e+20 Float"},
		{1.5e-5, "1.5e-05 Float"}, {0.1, "0.1 Float"}, {math.MaxFloat64, "1.7976931348623157e+308 Float"},
		{math.Inf(1), "Infinity Float"}, {math.Inf(-1), "-Infinity Float"}, {math.NaN(), "NaN Float"},
		{"", `"" String UTF-8`}, {"héllo ✓", `"héllo ✓" String UTF-8`}, {strings.Repeat("x", 300), `"` + strings.Repeat("x", 300) + `" String UTF-8`},
		{yamlvalue.Symbol("sym"), ":sym Symbol US-ASCII"}, {yamlvalue.Symbol("E"), ":E Symbol US-ASCII"}, {yamlvalue.Symbol("ünï"), ":ünï Symbol UTF-8"},
		{[]any{1.0, int64(2), "3"}, `[1.0, 2, "3"] Array`},
	}
	names := make([]string, len(values))
	for i, v := range values {
		names[i] = "v" + string(rune('a'+i/26)) + string(rune('a'+i%26))
		props.Set(names[i], v.v)
	}
	s := spec("{}", "")
	s.Set("properties", props)
	tpl := `<% raw_properties.each do |k, v| -%><%= k %> <%= v.inspect %> <%= v.class %><%= " #{v.encoding}" if v.respond_to?(:encoding) %>
<% end -%>`
	got := strings.Split(string(render(t, s, ruby.Template{Name: "values.erb", Source: tpl})[0].Content), "\n")
	for i, v := range values {
		if want := names[i] + " " + v.want; i >= len(got) || got[i] != want {
			t.Errorf("got %q, want %q", got[min(i, len(got)-1)], want)
		}
	}
}

// A differential check against the Ruby at hand: each scalar read by
// ParsePsych and sent to Ruby prints as Psych's own YAML.load reads it.
func TestParsePsychAgreesWithRubysPsych(t *testing.T) {
	scalars := []string{
		"1.0", "0.0", "-0.0", "3.", ".5", "-.5", "1.0e+3", "1.e+3", "1e3", "1E3", "1.5e-05", "1_000.5", "1,000.5",
		"12345678901234567890", "-12345678901234567890", "0x1F", "0xFFFFFFFFFFFFFFFFFF", "017", "0o17", "08", "0b101", "-0b101", "1_000", "1,000",
		"1:30", "1:02:03", "-1:30", "1:30.5", "190:20:30.15", "1:60",
		".inf", ".Inf", "+.inf", "-.inf", "-.INF", ".nan", ".NaN",
		":sym", "::sym", ":\"a b\"", ":'x'", ":1",
		"y", "n", "yes", "No", "ON", "off", "true", "FALSE", "~", "null", "Null", "nil",
		"abc", "a1", "1a", "-", ".", "-.", "+", "0", "-0", "+12", "00", "1__0",
		"!!float 1", `!!float "2"`, "!!float 1e3", "!!float .inf", `!!int "3"`, "!!int 0x10", "!!bool yes", `!!null ""`, "!!str 1", "!foo bar", "!foo 1.0",
		"!ruby/sym abc",
	}
	doc := ""
	for _, s := range scalars {
		doc += "- " + s + "\n"
	}
	v, err := yamlvalue.ParsePsych([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	s := spec("{}", "")
	s.Set("properties", yamlvalue.NewMap())
	props, _ := s.Get("properties")
	props.(*yamlvalue.Map).Set("list", v)
	const show = `.map { |v| "#{v.inspect} #{v.class}" }.join("\n")`
	got := string(render(t, s, ruby.Template{Name: "psych.erb", Source: `<%= p("list")` + show + ` %>`})[0].Content)
	cmd := exec.Command("ruby", "--disable-gems", "-ryaml", "-e", `print YAML.load(STDIN.read)`+show)
	cmd.Stdin = strings.NewReader(doc)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	gotLines, wantLines := strings.Split(got, "\n"), strings.Split(string(out), "\n")
	if len(gotLines) != len(scalars) || len(wantLines) != len(scalars) {
		t.Fatalf("got %d and %d lines for %d scalars", len(gotLines), len(wantLines), len(scalars))
	}
	for i, s := range scalars {
		if gotLines[i] != wantLines[i] {
			t.Errorf("%s: got %s, Psych %s", s, gotLines[i], wantLines[i])
		}
	}
}

// A Map shared by several specs is sent once; each job still sees its own
// values, and what a template mutates stays in that template.
func TestSharedMapsAreSentOnceAndCopied(t *testing.T) {
	shared, err := yamlvalue.ParseJSON([]byte(`{"f":1.5,"big":123456789012345678901234,"s":"x","list":[0.5,"y",{"k":"v"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	links := yamlvalue.NewMap()
	links.Set("db", yamlvalue.NewMap())
	db, _ := links.Get("db")
	db.(*yamlvalue.Map).Set("instances", []any{shared})
	db.(*yamlvalue.Map).Set("properties", shared)
	var jobs []ruby.Job
	for i := range 3 {
		s := spec("{}", "")
		props := yamlvalue.NewMap()
		props.Set("own", float64(i))
		props.Set("shared", shared)
		s.Set("properties", props)
		s.Set("links", links)
		jobs = append(jobs, ruby.Job{Spec: s, Templates: []ruby.Template{
			{Name: "a.erb", Source: `<% p("shared.list")[2]["k"] << "!"; link("db").p("list") << 1 %><%= p("own") %> <%= p("shared").to_json %> <%= link("db").p("list").size %>`},
			{Name: "b.erb", Source: `<%= p("shared.list")[2]["k"] %> <%= link("db").p("list").size %> <%= spec.links.db.instances[0].big %> <%= spec.properties.shared.f %>`},
		}})
	}
	out, err := ruby.Render(context.Background(), jobs)
	if err != nil {
		t.Fatal(err)
	}
	for i, job := range out {
		want := []string{
			strconv.Itoa(i) + `.0 {"f":1.5,"big":123456789012345678901234,"s":"x","list":[0.5,"y",{"k":"v!"}]} 4`,
			"v 3 123456789012345678901234 1.5",
		}
		for k, o := range job {
			if string(o.Content) != want[k] || o.Error != "" {
				t.Errorf("job %d template %d: got %q (%s), want %q", i, k, o.Content, o.Error, want[k])
			}
		}
	}
}
