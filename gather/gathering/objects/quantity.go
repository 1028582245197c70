package objects

import (
	"fmt"
	"math"
	"strconv"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/bosh-injector/bosh-injector/gather/model/manifest"
)

// vmQuantity is vm_resources' cpu (cores) or ram (MiB, unit "Mi") as a
// quantity, refused when Kubernetes cannot hold it in an int64 (millicores,
// bytes) or it is negative.
func vmQuantity(n int, unit string) (resource.Quantity, error) {
	most := math.MaxInt64 / 1000
	if unit == "Mi" {
		most = manifest.MaxMiB
	}
	if n < 0 || n > most {
		return resource.Quantity{}, fmt.Errorf("%d is not a size Kubernetes can hold (0 to %d)", n, most)
	}
	return resource.MustParse(strconv.Itoa(n) + unit), nil
}
