package names

import (
	"fmt"
	"strings"
)

// MaxPathName bounds a name that becomes a file or directory name, as
// file systems do (NAME_MAX).
const MaxPathName = 255

// PathName checks a BOSH name (instance group, job, release, package) that
// becomes one file or directory name on disk or in an image: a name that is
// empty, "." or "..", or holds '/' or NUL would leave its directory or fail
// deep in a write. what says which name, e.g. "instance group".
func PathName(what, name string) error {
	why := ""
	switch {
	case name == "":
		why = "must not be empty"
	case name == "." || name == "..":
		why = "must not be '.' or '..'"
	case strings.ContainsRune(name, '/'):
		why = "must not contain '/'"
	case strings.ContainsRune(name, 0):
		why = "must not contain a NUL character"
	case len(name) > MaxPathName:
		why = fmt.Sprintf("must not be longer than %d bytes", MaxPathName)
	default:
		return nil
	}
	return fmt.Errorf("Invalid %s name %q: it names a directory and %s", what, name, why)
}
