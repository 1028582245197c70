package releasedir

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"slices"
	"strings"
)

// file is a member of a job or package archive: its path in the archive
// and where its content comes from.
type file struct {
	name string
	// source is the file on disk; link, when set, makes the member a
	// symbolic link to it instead (packages keep their symlinks).
	source string
	link   string
	// digest, when source is empty, is the content's sha256 digest known
	// without it (a blob config/blobs.yml lists but nobody downloaded).
	digest string
	exec   bool
	// noMode leaves the mode out of the fingerprint, as bosh-cli does for
	// a package's packaging script.
	noMode bool
}

// fingerprint is bosh-cli's "v2" fingerprint of a job or package
// (release/resource/fingerprint.go): over the files sorted by path, each
// path, sha256 digest and git-like mode, then the sorted extra chunks (a
// package's dependency names) joined by commas, all hashed with sha256.
func fingerprint(files []file, chunks []string) (string, error) {
	var b strings.Builder
	b.WriteString("v2")
	for _, f := range slices.SortedFunc(slices.Values(files), func(a, b file) int { return strings.Compare(a.name, b.name) }) {
		b.WriteString(f.name)
		var digest string
		switch {
		case f.link != "":
			digest = sha256String(f.link)
		case f.source == "":
			digest = f.digest
		default:
			d, err := sha256File(f.source)
			if err != nil {
				return "", err
			}
			digest = d
		}
		b.WriteString(digest)
		if f.noMode {
			continue
		}
		switch {
		case f.link != "":
			b.WriteString("symlink")
		case f.exec:
			b.WriteString("100755")
		default:
			b.WriteString("100644")
		}
	}
	if len(chunks) > 0 {
		b.WriteString(strings.Join(slices.Sorted(slices.Values(chunks)), ","))
	}
	return strings.TrimPrefix(sha256String(b.String()), "sha256:"), nil
}

func sha256String(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func sha256File(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}
