package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestStore makes, mounts, grows online, unmounts and deletes a volume on
// this machine's loop devices, as the kubelet's calls would (root only).
func TestStore(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("loop devices and mounts need root")
	}
	dir := t.TempDir()
	s := &Store{Root: filepath.Join(dir, "volumes")}
	id, size, err := s.Create("node-a", "pvc-1", 1<<30)
	if err != nil || id != "node-a/pvc-1" || size != 1<<30 {
		t.Fatalf("Create: %q %d %v", id, size, err)
	}
	target := filepath.Join(dir, "pods", "mount")
	if err := s.Publish("node-b", id, target, false); err == nil {
		t.Fatal("published on another node")
	}
	if err := s.Publish("node-a", id, target, false); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Unpublish(target) })
	if err := s.Publish("node-a", id, target, false); err != nil {
		t.Fatalf("publishing again: %v", err)
	}
	if err := os.WriteFile(filepath.Join(target, "marker"), []byte("bytes"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(id); err == nil {
		t.Fatal("deleted a mounted volume")
	}
	if size, err = s.Expand(id, 2<<30); err != nil || size != 2<<30 {
		t.Fatalf("Expand: %d %v", size, err)
	}
	if size, err = s.NodeExpand(target); err != nil || size != 2<<30 {
		t.Fatalf("NodeExpand: %d %v", size, err)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(target, &st); err != nil || int64(st.Blocks)*st.Bsize < 19<<30/10 {
		t.Fatalf("filesystem after growing: %d bytes, %v", int64(st.Blocks)*st.Bsize, err)
	}
	if err := s.Unpublish(target); err != nil {
		t.Fatal(err)
	}
	if dev, _ := loopOf(filepath.Join(s.Root, "node-a", "pvc-1.img")); dev != "" {
		t.Fatalf("loop device %s left after the unmount", dev)
	}
	if err := s.Publish("node-a", id, target, false); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(target, "marker")); err != nil || string(b) != "bytes" {
		t.Fatalf("marker after mounting again: %q %v", b, err)
	}
	if err := s.Unpublish(target); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(id); err != nil {
		t.Fatal(err)
	}
}
