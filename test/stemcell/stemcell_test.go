// Package stemcell holds the stand-in for an Ubuntu stemcell that `make
// stemcell-image` builds (Containerfile); this test checks it gives job
// scripts what Ubuntu stemcells give them.
package stemcell

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/bosh-injector/bosh-injector/test/controlplane"
	"github.com/bosh-injector/bosh-injector/test/fixtures"
)

// TestStemcellImage runs what CF job scripts use in one container of the
// image: perl with its core modules, the vcap user and its groups, setcap,
// nc, curl, host and dig, ps, ip, the en_US.UTF-8 locale, CA certificates.
func TestStemcellImage(t *testing.T) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	name := exec.Command("make", "-s", "--no-print-directory", "print-stemcell-image")
	name.Dir = root
	out, err := name.Output()
	if err != nil {
		t.Fatalf("make print-stemcell-image: %v", err)
	}
	image := strings.TrimSpace(string(out))
	if fixtures.Podman(context.Background(), "image", "exists", image).Run() != nil {
		t.Fatalf("no image %s: run `make stemcell-image`", image)
	}
	script := `set -e
perl -MTime::HiRes -MPOSIX -MFile::Temp -MIO::Socket::INET -MGetopt::Long -e 'print "perl ok\n"'
id vcap
command -v setcap getcap nc curl wget host dig ps pgrep ip killall lsof openssl
LC_ALL=en_US.UTF-8 perl -e 'use POSIX; print setlocale(LC_ALL) eq "en_US.UTF-8" ? "locale ok\n" : "locale missing\n"'
test -s /etc/ssl/certs/ca-certificates.crt && echo certificates ok`
	run, err := fixtures.Podman(context.Background(), "run", "--rm", "--network=none", image, "bash", "-c", script).CombinedOutput()
	if err != nil {
		t.Fatalf("in %s: %v:\n%s", image, err, run)
	}
	for _, want := range []string{"perl ok", "uid=1000(vcap) gid=1000(vcap)", "bosh_sshers", "dip", "plugdev", "/sbin/setcap", "/bin/nc", "/bin/dig", "locale ok", "certificates ok"} {
		if !strings.Contains(string(run), want) {
			t.Errorf("%s lacks %q:\n%s", image, want, run)
		}
	}
}
