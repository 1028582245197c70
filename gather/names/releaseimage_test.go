package names

import "testing"

// TestReleaseImageDevVersion: a dev release's version ("56+dev.1") names a
// valid image tag; gathering and release-image derive the same one.
func TestReleaseImageDevVersion(t *testing.T) {
	if got, want := ReleaseImage("registry.example.com/me", "nats", "ubuntu-jammy", "1.621", "56.26.0+dev.1"), "registry.example.com/me/nats:ubuntu-jammy-1.621-56.26.0_dev.1"; got != want {
		t.Errorf("ReleaseImage = %s, want %s", got, want)
	}
}
