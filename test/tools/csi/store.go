package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// minSize is the smallest volume: mkfs.xfs refuses filesystems under 300 MB.
const minSize = 300 << 20

// Store keeps every volume as a sparse file Root/NODE/NAME.img formatted
// XFS: the volume ID is NODE/NAME, so a volume is reachable on its node
// only, as a local disk is.
type Store struct{ Root string }

// ErrOtherNode is a volume asked for on a node it does not live on.
var ErrOtherNode = errors.New("the volume lives on another node")

func (s *Store) file(id string) (string, error) {
	node, name, ok := strings.Cut(id, "/")
	if !ok || node == "" || name == "" || strings.ContainsAny(name, "/") || node == ".." || name == ".." {
		return "", fmt.Errorf("volume ID %q is not NODE/NAME", id)
	}
	return filepath.Join(s.Root, node, name+".img"), nil
}

// Create makes the volume NAME on node of at least size bytes (whole MiB)
// and returns its ID and size; an existing one is returned as it is.
func (s *Store) Create(node, name string, size int64) (string, int64, error) {
	id := node + "/" + name
	path, err := s.file(id)
	if err != nil {
		return "", 0, err
	}
	if fi, err := os.Stat(path); err == nil {
		return id, fi.Size(), nil
	}
	size = max(size, minSize)
	size = (size + 1<<20 - 1) &^ (1<<20 - 1)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", 0, err
	}
	// Made aside and renamed: a half-made volume is never taken for one.
	tmp := path + ".new"
	f, err := os.Create(tmp)
	if err != nil {
		return "", 0, err
	}
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = command("mkfs.xfs", "-q", "-f", tmp)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return "", 0, err
	}
	return id, size, nil
}

// Delete removes a volume; one still mounted somewhere is refused.
func (s *Store) Delete(id string) error {
	path, err := s.file(id)
	if err != nil {
		return err
	}
	if dev, _ := loopOf(path); dev != "" {
		return fmt.Errorf("volume %s is in use (%s)", id, dev)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// Expand grows a volume's file to size bytes (never shrinks it) and
// returns its size; the filesystem grows on the node (NodeExpand).
func (s *Store) Expand(id string, size int64) (int64, error) {
	path, err := s.file(id)
	if err != nil {
		return 0, err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	if size <= fi.Size() {
		return fi.Size(), nil
	}
	size = (size + 1<<20 - 1) &^ (1<<20 - 1)
	return size, os.Truncate(path, size)
}

// Publish mounts volume id of node at target, through a loop device the
// kernel detaches at its unmount (mount's autoclear). A fresh
// filesystem's root is opened to every user, as the host-path
// provisioner's directories were: the jobs' users write there.
func (s *Store) Publish(node, id, target string, readOnly bool) error {
	path, err := s.file(id)
	if err != nil {
		return err
	}
	if !strings.HasPrefix(id, node+"/") {
		return fmt.Errorf("%w: %s asked on node %s", ErrOtherNode, id, node)
	}
	if src, _ := mountSource(target); src != "" {
		return nil
	}
	if err := os.MkdirAll(target, 0o750); err != nil {
		return err
	}
	opts := "loop"
	if readOnly {
		opts += ",ro"
	}
	if err := command("mount", "-t", "xfs", "-o", opts, path, target); err != nil {
		return err
	}
	if entries, err := os.ReadDir(target); err == nil && len(entries) == 0 && !readOnly {
		return os.Chmod(target, 0o777)
	}
	return nil
}

// Unpublish unmounts target (its loop device goes with it) and removes it.
func (s *Store) Unpublish(target string) error {
	if src, _ := mountSource(target); src != "" {
		if err := command("umount", target); err != nil {
			return err
		}
	}
	if err := os.Remove(target); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// NodeExpand grows the filesystem mounted at target to its file's size,
// online, and returns that size.
func (s *Store) NodeExpand(target string) (int64, error) {
	dev, err := mountSource(target)
	if err != nil {
		return 0, err
	}
	if !strings.HasPrefix(dev, "/dev/loop") {
		return 0, fmt.Errorf("%s is not mounted from a loop device (%q)", target, dev)
	}
	if err := command("losetup", "-c", dev); err != nil {
		return 0, err
	}
	if err := command("xfs_growfs", target); err != nil {
		return 0, err
	}
	backing, err := os.ReadFile(filepath.Join("/sys/block", filepath.Base(dev), "loop", "backing_file"))
	if err != nil {
		return 0, err
	}
	fi, err := os.Stat(strings.TrimSpace(string(backing)))
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// mountSource is the source of the mount at target; "" when none.
func mountSource(target string) (string, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	target = filepath.Clean(target)
	source := ""
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || f[4] != target {
			continue
		}
		for i, v := range f {
			if v == "-" && i+2 < len(f) {
				source = f[i+2] // the last mount on target wins
			}
		}
	}
	if source == "" {
		return "", fmt.Errorf("nothing is mounted at %s", target)
	}
	return source, nil
}

// loopOf is the loop device backed by file; "" when none.
func loopOf(file string) (string, error) {
	devs, err := filepath.Glob("/sys/block/loop*/loop/backing_file")
	if err != nil {
		return "", err
	}
	for _, d := range devs {
		if b, err := os.ReadFile(d); err == nil && strings.TrimSpace(string(b)) == file {
			return "/dev/" + filepath.Base(filepath.Dir(filepath.Dir(d))), nil
		}
	}
	return "", nil
}

func command(name string, args ...string) error {
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
