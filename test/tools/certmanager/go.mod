module github.com/bosh-injector/bosh-injector/test/tools/certmanager

// cert-manager's controller and cainjector for the chart tests. Its official
// cmd/* modules are not in the module proxy, so small mains over its public
// packages are built here by `make testbin`.
go 1.26.0

require github.com/cert-manager/cert-manager v1.21.2
