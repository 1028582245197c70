package names

import "strings"

// FreeLabelValue turns free text (a deploy step such as "api.canary.1-of-3")
// into a label value keeping what label values allow, [A-Za-z0-9._-]: other
// characters become '-', the ends are alphanumeric and a longer value is cut
// at 63 characters. Names that must agree with object names use LabelValue.
func FreeLabelValue(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			b[i] = '-'
		}
	}
	out := string(b)
	if len(out) > 63 {
		out = out[:63]
	}
	return strings.Trim(out, "._-")
}
