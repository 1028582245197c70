// Command bosh-injector runs BOSH releases on Kubernetes: the admission
// webhook and operator, the gathering and rendering steps it runs in pods, and
// an offline renderer for deployment authors.
package main

import (
	"os"

	"github.com/bosh-injector/bosh-injector/cmd/bosh-injector/app"
)

func main() {
	os.Exit(app.Main(os.Args[1:], os.Stdout, os.Stderr))
}
