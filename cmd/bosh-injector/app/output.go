package app

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// renderMarker is the file that makes a directory a render of template's:
// the only kind of non-empty directory it replaces, so a mistaken --output
// (".", "..", a release directory) is refused instead of wiped.
const renderMarker = ".bosh-injector-template"

// checkOutput fails, naming the flag, unless output can be replaced
// without losing anything template did not write: it must be missing, an
// empty directory or a previous render, must not hold the working
// directory, and must not hold any input (flag to paths), such as the vars
// store a render extends.
func checkOutput(output string, inputs map[string][]string) error {
	if err := checkOutputDir("--output", output, renderMarker, "render of template or objects"); err != nil {
		return err
	}
	out, err := resolve(output)
	if err != nil {
		return fmt.Errorf("--output %s: %w", output, err)
	}
	if wd, err := os.Getwd(); err == nil {
		if wd, err = resolve(wd); err == nil && within(wd, out) {
			return fmt.Errorf("--output %s: holds the working directory %s, which a render replaces; give a directory beside or below it", output, wd)
		}
	}
	for flag, paths := range inputs {
		for _, p := range paths {
			if p == "" {
				continue
			}
			r, err := resolve(p)
			if err != nil {
				return fmt.Errorf("%s %s: %w", flag, p, err)
			}
			if within(r, out) {
				return fmt.Errorf("%s %s: is inside --output %s, which a render replaces; keep it elsewhere", flag, p, output)
			}
		}
	}
	return nil
}

// releaseDirs are the DIRs of --release NAME=DIR flags.
func releaseDirs(releases []string) []string {
	dirs := make([]string, len(releases))
	for i, r := range releases {
		_, dirs[i], _ = strings.Cut(r, "=")
	}
	return dirs
}

// checkOutputDir fails, naming flag, unless output is missing, an empty
// directory or one holding marker (a previous output, what): never a
// symbolic link, a file, or a directory of the user's or the system's
// (/, /etc).
func checkOutputDir(flag, output, marker, what string) error {
	info, err := os.Lstat(output)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("%s %s: %w", flag, output, err)
	case info.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("%s %s: is a symbolic link; give the directory it points to, or a new one", flag, output)
	case !info.IsDir():
		return fmt.Errorf("%s %s: exists and is not a directory", flag, output)
	default:
		entries, err := os.ReadDir(output)
		if err != nil {
			return fmt.Errorf("%s %s: %w", flag, output, err)
		}
		if _, err := os.Lstat(filepath.Join(output, marker)); len(entries) > 0 && err != nil {
			return fmt.Errorf("%s %s: the directory is not empty and is not a previous %s (it has no %s): give a new or empty directory, nothing in it is replaced", flag, output, what, marker)
		}
	}
	return nil
}

// resolve makes p absolute with symlinks resolved as far as it exists (a
// vars store may not exist yet).
func resolve(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	rest := ""
	for dir := abs; ; dir = filepath.Dir(dir) {
		if r, err := filepath.EvalSymlinks(dir); err == nil {
			return filepath.Join(r, rest), nil
		}
		if dir == filepath.Dir(dir) {
			return abs, nil
		}
		rest = filepath.Join(filepath.Base(dir), rest)
	}
}

// within says whether path is dir or inside it (both resolved).
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// writeAtomically fills a new directory beside output (marked as a render)
// and puts it in output's place only when fill succeeds; a previous render
// moves aside first and is removed only once the new one is in place.
// Writes go through an os.Root on the new directory.
func writeAtomically(output string, fill func(dir string, root *os.Root) error) error {
	parent := filepath.Dir(filepath.Clean(output))
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(parent, ".template-")
	if err != nil {
		return err
	}
	err = fillRoot(tmp, fill)
	if err == nil {
		// The render holds credentials: not open to other users.
		err = os.Chmod(tmp, 0o750)
	}
	if err != nil {
		os.RemoveAll(tmp)
		return err
	}
	previous := ""
	if _, err := os.Lstat(output); err == nil {
		previous = tmp + "-previous"
		if err := os.Rename(output, previous); err != nil {
			os.RemoveAll(tmp)
			return err
		}
	}
	if err := os.Rename(tmp, output); err != nil {
		if previous != "" {
			_ = os.Rename(previous, output)
		}
		os.RemoveAll(tmp)
		return err
	}
	if previous != "" {
		return os.RemoveAll(previous)
	}
	return nil
}

func fillRoot(dir string, fill func(dir string, root *os.Root) error) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	if err := root.WriteFile(renderMarker, []byte("written by bosh-injector template or objects; the next run replaces this directory\n"), 0o640); err != nil {
		return err
	}
	return fill(dir, root)
}
