// Package layer writes reproducible image layers: gzipped tars whose entries
// are placed under a prefix, with fixed modification times and root owners,
// so the same files always give the same layer digest. It also unpacks
// BOSH's .tgz archives (and its own layers) into directories.
package layer

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// epoch is every entry's modification time.
var epoch = time.Unix(0, 0).UTC()

// Writer writes one layer. Parent directories of every entry are written
// first, once each.
type Writer struct {
	tw   *tar.Writer
	gz   *gzip.Writer
	f    *os.File
	dirs map[string]bool
	// blob and diff hash the compressed and the tar stream, for Digests.
	blob, diff *counter
}

// Write writes the layer file at path (a .tar.gz) with add, atomically:
// on failure nothing is left at path. Its Digests are kept beside it.
func Write(path string, add func(*Writer) error) error {
	var d Digests
	if err := atomically(path, func(f *os.File) error {
		w := newWriter(f)
		err := add(w)
		err = errors.Join(err, w.close())
		d = Digests{Size: w.blob.n, Digest: hashOf(w.blob.h), DiffID: hashOf(w.diff.h)}
		return err
	}); err != nil {
		return err
	}
	return writeDigests(path, d)
}

// Save writes the layer file at path from r (a layer's compressed blob),
// atomically.
func Save(path string, r io.Reader) error {
	return atomically(path, func(f *os.File) error {
		_, err := io.Copy(f, r)
		return errors.Join(err, f.Close())
	})
}

// atomically writes the file at path with write, which closes it, through
// a temporary file renamed into place: on failure nothing is left at path.
func atomically(path string, write func(*os.File) error) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	err = write(tmp)
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
	}
	return err
}

func newWriter(f *os.File) *Writer {
	// BestSpeed: layers are often whole toolchains; Go's gzip output is the
	// same for the same input at a given level, which keeps digests stable.
	blob, diff := newCounter(), newCounter()
	gz, _ := gzip.NewWriterLevel(io.MultiWriter(f, blob), gzip.BestSpeed)
	return &Writer{tw: tar.NewWriter(io.MultiWriter(gz, diff)), gz: gz, f: f, dirs: map[string]bool{}, blob: blob, diff: diff}
}

func (w *Writer) close() error {
	err := errors.Join(w.tw.Close(), w.gz.Close())
	return errors.Join(err, w.f.Close())
}

// Dir writes directory name (slash-separated, relative) and its parents.
func (w *Writer) Dir(name string, mode fs.FileMode) error {
	name = strings.TrimSuffix(name, "/")
	if name == "" || name == "." || w.dirs[name] {
		return nil
	}
	if err := w.Dir(path.Dir(name), 0o755); err != nil {
		return err
	}
	w.dirs[name] = true
	return w.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: int64(mode.Perm() | mode&(fs.ModeSetgid|fs.ModeSticky)), ModTime: epoch})
}

// Entry writes h (its Name already final) with content r, normalizing
// times and owners.
func (w *Writer) entry(h *tar.Header, r io.Reader) error {
	if h.Typeflag == tar.TypeDir {
		return w.Dir(h.Name, fs.FileMode(h.Mode))
	}
	if err := w.Dir(path.Dir(h.Name), 0o755); err != nil {
		return err
	}
	n := &tar.Header{Typeflag: h.Typeflag, Name: h.Name, Linkname: h.Linkname, Size: h.Size, Mode: h.Mode & 0o7777, ModTime: epoch}
	if err := w.tw.WriteHeader(n); err != nil {
		return err
	}
	if h.Typeflag == tar.TypeReg {
		_, err := io.Copy(w.tw, r)
		return err
	}
	return nil
}

// clean makes a member name of an archive relative and safe: no absolute
// paths, no "..".
func clean(name string) (string, error) {
	c := path.Clean(strings.TrimPrefix(name, "./"))
	if c == "." {
		return "", nil
	}
	if path.IsAbs(c) || c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("member %q leaves the archive", name)
	}
	return c, nil
}

// AddArchive copies the members of the .tgz at archive under prefix, in
// archive order.
func (w *Writer) AddArchive(archive, prefix string) error {
	return eachMember(archive, func(name string, h *tar.Header, r io.Reader) error {
		h.Name = path.Join(prefix, name)
		if h.Typeflag == tar.TypeLink {
			link, err := clean(h.Linkname)
			if err != nil {
				return err
			}
			h.Linkname = path.Join(prefix, link)
		}
		return w.entry(h, r)
	})
}

// AddDir copies directory dir under prefix, entries in lexical order.
func (w *Writer) AddDir(dir, prefix string) error {
	if err := w.Dir(prefix, 0o755); err != nil {
		return err
	}
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		h := &tar.Header{Name: path.Join(prefix, filepath.ToSlash(rel)), Mode: int64(info.Mode().Perm() | info.Mode()&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky))}
		switch {
		case d.IsDir():
			h.Typeflag = tar.TypeDir
			return w.entry(h, nil)
		case info.Mode()&fs.ModeSymlink != 0:
			h.Typeflag = tar.TypeSymlink
			if h.Linkname, err = os.Readlink(p); err != nil {
				return err
			}
			return w.entry(h, nil)
		case info.Mode().IsRegular():
			h.Typeflag, h.Size = tar.TypeReg, info.Size()
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			return w.entry(h, f)
		}
		return fmt.Errorf("%s: cannot put a %s in a layer", p, info.Mode().Type())
	})
}

// Extract unpacks the .tgz at archive into dst; only members under prefix
// are taken, with prefix removed (a layer written with that prefix comes
// back as the directory it was made from). Every write goes through an
// os.Root on dst: package sources come from release tarballs anyone may
// craft, and a symlink member followed by a member through it must not
// write outside dst.
func Extract(archive, prefix, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	root, err := os.OpenRoot(dst)
	if err != nil {
		return err
	}
	defer root.Close()
	prefix = strings.Trim(prefix, "/")
	var links [][2]string
	err = eachMember(archive, func(name string, h *tar.Header, r io.Reader) error {
		if prefix != "" {
			rest, ok := strings.CutPrefix(name, prefix)
			if !ok || (rest != "" && rest[0] != '/') {
				return nil
			}
			name = strings.TrimPrefix(rest, "/")
		}
		if name == "" {
			name = "." // the prefix directory itself: dst
		}
		target := filepath.FromSlash(name)
		mode := fs.FileMode(h.Mode).Perm()
		switch h.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(target, 0o755); err != nil {
				return err
			}
			return root.Chmod(target, mode|0o700)
		case tar.TypeReg:
			return writeFile(root, target, r, mode)
		case tar.TypeSymlink:
			if err := root.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			// The link may point anywhere (it is unpacked as shipped); the
			// root refuses to follow it out of dst later.
			return root.Symlink(h.Linkname, target)
		case tar.TypeLink:
			link, err := clean(h.Linkname)
			if err != nil {
				return err
			}
			if prefix != "" {
				link = strings.TrimPrefix(strings.TrimPrefix(link, prefix), "/")
			}
			links = append(links, [2]string{filepath.FromSlash(link), target})
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, l := range links {
		if err := root.Link(l[0], l[1]); err != nil {
			return fmt.Errorf("%s: %s: %w", filepath.Base(archive), filepath.ToSlash(l[1]), err)
		}
	}
	return nil
}

// MaxMemberSize bounds one member of a release tarball or of its job and
// package archives, so a crafted header cannot fill the disk; the largest
// real package archives are a few hundred MiB.
const MaxMemberSize = 4 << 30

// CheckMember fails on a tarball member a release has no use for and that
// would be unsafe to unpack: a device or fifo, a member larger than
// MaxMemberSize, or one whose name seen already holds (the last would
// silently win).
func CheckMember(h *tar.Header, seen map[string]bool) error {
	switch h.Typeflag {
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		return fmt.Errorf("a device or fifo (tar type %q) is not allowed in a release", h.Typeflag)
	}
	if h.Size > MaxMemberSize {
		return fmt.Errorf("%d bytes, more than the %d GiB a member may be", h.Size, MaxMemberSize>>30)
	}
	name := path.Clean(strings.TrimPrefix(h.Name, "./"))
	if seen[name] && h.Typeflag != tar.TypeDir {
		return errors.New("the archive holds this member twice")
	}
	seen[name] = true
	return nil
}

// WriteFile writes r to target with mode, creating its directory.
func WriteFile(target string, r io.Reader, mode fs.FileMode) error {
	dir := filepath.Dir(target)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	return writeFile(root, filepath.Base(target), r, mode)
}

// writeFile writes r to name inside root with mode, creating its
// directory.
func writeFile(root *os.Root, name string, r io.Reader, mode fs.FileMode) error {
	if err := root.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return err
	}
	f, err := root.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	// The umask may have narrowed mode at creation.
	return root.Chmod(name, mode)
}

// eachMember calls f for every member of the .tgz at archive, with its
// cleaned relative name (the archive's root itself is skipped); its
// errors name the archive.
func eachMember(archive string, f func(name string, h *tar.Header, r io.Reader) error) error {
	file, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer file.Close()
	if err := Walk(file, true, f); err != nil {
		return fmt.Errorf("%s: %w", filepath.Base(archive), err)
	}
	return nil
}

// ErrStop, returned by the function a Walk calls, ends the walk without an
// error.
var ErrStop = errors.New("stop the walk")

// Walk reads the gzipped tar r and calls f for every member in archive
// order, with its name relative ("./" removed, cleaned), once the member
// passed CheckMember; an error of f names the member, and f returning ErrStop
// ends the walk. With contained, a name that leaves the archive is an
// error and the archive's root is skipped, as unpacking needs; without,
// names are passed as they are, for a reader that looks members up by
// name.
func Walk(r io.Reader, contained bool, f func(name string, h *tar.Header, r io.Reader) error) error {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return err
	}
	tr := tar.NewReader(gz)
	seen := map[string]bool{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := path.Clean(strings.TrimPrefix(h.Name, "./"))
		if contained {
			if name, err = clean(h.Name); err != nil {
				return err
			}
		}
		if err := CheckMember(h, seen); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if contained && name == "" {
			continue
		}
		err = f(name, h, tr)
		if errors.Is(err, ErrStop) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
}
