package objects

import (
	"fmt"

	"github.com/bosh-injector/bosh-injector/gather/model/deployment"
)

// MaxSecretSize is what the API server accepts in one Secret's data.
const MaxSecretSize = 1 << 20

// checkSecretSize fails when the manifest and its ops files would make a
// manifest Secret the API server refuses.
func checkSecretSize(name string, manifestYAML []byte, ops []deployment.OpsFile) error {
	n := len(manifestYAML)
	for _, op := range ops {
		n += len(op.Data)
	}
	if n > MaxSecretSize {
		return fmt.Errorf("the manifest Secret '%s' would hold %d bytes (the manifest and its ops files), more than the %d (1 MiB) a Secret may hold", name, n, MaxSecretSize)
	}
	return nil
}
