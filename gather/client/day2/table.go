package day2

import (
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"
	"text/tabwriter"
)

// Table is a table as `bosh` prints it: a header, sections of rows (an
// instance and its processes), notes; and as `bosh --json` shapes it.
type Table struct {
	Content  string
	Header   []string
	Sections [][][]string
	Notes    []string
}

// Text writes the table as `bosh` does: aligned columns, "-" for an
// empty value, "~" for a section's continued first column, then the count
// of sections.
func (t Table) Text(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(t.Header, "\t"))
	for _, section := range t.Sections {
		for i, row := range section {
			cells := make([]string, len(row))
			for j, v := range row {
				switch {
				case j == 0 && i > 0 && v == "":
					v = "~"
				case v == "":
					v = "-"
				}
				cells[j] = v
			}
			fmt.Fprintln(tw, strings.Join(cells, "\t"))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n%d %s\n", len(t.Sections), t.Content)
	for _, n := range t.Notes {
		fmt.Fprintln(w, n)
	}
	return nil
}

// jsonOutput is `bosh --json`'s document.
type jsonOutput struct {
	Tables []jsonTable
	Blocks []string
	Lines  []string
}

type jsonTable struct {
	Content string
	Header  map[string]string
	Rows    []map[string]string
	Notes   []string
}

// JSON writes the table as `bosh --json` does: the header and each row as
// objects keyed by the header's keyified labels ("Process State" is
// "process_state"), every row of every section in order.
func (t Table) JSON(w io.Writer, lines ...string) error {
	jt := jsonTable{Content: t.Content, Header: map[string]string{}, Rows: []map[string]string{}, Notes: t.Notes}
	keys := make([]string, len(t.Header))
	for i, h := range t.Header {
		keys[i] = keyify(h)
		jt.Header[keys[i]] = h
	}
	for _, section := range t.Sections {
		for _, row := range section {
			r := map[string]string{}
			for i, v := range row {
				r[keys[i]] = v
			}
			jt.Rows = append(jt.Rows, r)
		}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "    ")
	return enc.Encode(jsonOutput{Tables: []jsonTable{jt}, Lines: append([]string{}, lines...)})
}

var nonKey = regexp.MustCompile(`[^a-z0-9]+`)

// keyify is bosh's key of a header label.
func keyify(label string) string {
	return strings.Trim(nonKey.ReplaceAllString(strings.ToLower(label), "_"), "_")
}
