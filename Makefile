# bosh-injector build, test and tooling targets. `make help` lists them.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := build

GO ?= go
BIN_DIR := bin
# Everything is built static, as Kubernetes releases its binaries: one cgo
# setting for the tools, bin/bosh-injector, the demo and the test binaries
# lets them share compiled packages (with cgo, `net` and all that imports it
# build apart), so nothing is compiled twice between `make demo` and
# `make test`.
export CGO_ENABLED := 0

# Test control plane binaries are built from pinned Go modules under
# test/tools and cached outside the repository, keyed by their versions, so a
# fresh clone on the same machine reuses them (hence the order-only
# prerequisites: a clone's files are newer than the cache, its versions not).
modver = $(shell awk '$$1 == "$(2)" && $$2 != "=>" { print $$2; exit } $$1 == "require" && $$2 == "$(2)" { print $$3; exit }' test/tools/$(1)/go.mod 2>/dev/null)
KUBE_VERSION := $(call modver,kube,k8s.io/kubernetes)
ETCD_VERSION := $(call modver,etcd,go.etcd.io/etcd/server/v3)
HELM_VERSION := $(call modver,helm,helm.sh/helm/v3)
CERT_MANAGER_VERSION := $(call modver,certmanager,github.com/cert-manager/cert-manager)
REGISTRY_VERSION := $(call modver,registry,github.com/distribution/distribution/v3)
TESTBIN_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/bosh-injector/testbin
TESTBIN := $(TESTBIN_CACHE)/k8s-$(KUBE_VERSION)_etcd-$(ETCD_VERSION)_helm-$(HELM_VERSION)_cert-manager-$(CERT_MANAGER_VERSION)
TESTBIN_TOOLS := etcd kube-apiserver kube-controller-manager kubectl helm cert-manager-controller cert-manager-cainjector cert-manager-crds
# The test cluster's node: the kubelet, kube-proxy and the scheduler from the
# same module as the apiserver, containerd v2 (with its runc shim and ctr).
NODE_TOOLS := kubelet kube-proxy kube-scheduler containerd containerd-shim-runc-v2 ctr
CONTAINERD_VERSION := $(call modver,containerd,github.com/containerd/containerd/v2)

# CoreDNS, which the chart runs, with the plugins it configures; cached by
# its own version (defined before the rules that name it: make expands
# prerequisites as it reads them) so the control plane's cache stays as it is.
COREDNS_VERSION := $(call modver,coredns,github.com/coredns/coredns)
COREDNS := $(TESTBIN_CACHE)/coredns-$(COREDNS_VERSION)/coredns

kube_minor = $(word 2,$(subst ., ,$(KUBE_VERSION)))
KUBE_LDFLAGS := -s -w \
	-X k8s.io/component-base/version.gitVersion=$(KUBE_VERSION) \
	-X k8s.io/component-base/version.gitMajor=1 \
	-X k8s.io/component-base/version.gitMinor=$(kube_minor) \
	-X k8s.io/component-base/version.gitTreeState=clean \
	-X k8s.io/client-go/pkg/version.gitVersion=$(KUBE_VERSION) \
	-X k8s.io/client-go/pkg/version.gitMajor=1 \
	-X k8s.io/client-go/pkg/version.gitMinor=$(kube_minor)

# The test cluster's CSI driver (test/tools/csi), the project's own code:
# cached by its sources' digest, so a change builds it again.
CSI_DIGEST := $(shell cat test/tools/csi/go.mod test/tools/csi/go.sum test/tools/csi/*.go 2>/dev/null | sha256sum | cut -c1-12)
CSI := $(TESTBIN_CACHE)/csi-$(CSI_DIGEST)/bosh-injector-csi

# One `go build` per module: the Kubernetes binaries (the kubelet shares
# 1,500 packages with the rest) and containerd's are each built by one
# invocation into the directory (`-o dir/`), linked at once; GNU make 4.3's
# grouped targets (&:) run it once for all of its files.
ifeq ($(filter grouped-target,$(.FEATURES)),)
$(error GNU make 4.3 or later is needed (grouped targets &:); this is $(MAKE_VERSION))
endif
KUBE_CMDS := kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubelet kubectl
KUBE_BINS := $(addprefix $(TESTBIN)/,$(KUBE_CMDS))
# containerd keyed by its own version inside the control plane's directory,
# linked beside the rest: containerd finds its shim next to itself.
CONTAINERD_CMDS := containerd containerd-shim-runc-v2 ctr
CONTAINERD_DIR := $(TESTBIN)/containerd-$(CONTAINERD_VERSION)
CONTAINERD_BINS := $(addprefix $(CONTAINERD_DIR)/,$(CONTAINERD_CMDS))

# A build step says what it builds, a line each minute while it runs, and
# how long it took; its output shows as it comes and its failure fails
# make. In a recipe: @$(call step,what it builds,command…); V=1 echoes the
# command too. A command that is a shell function runs without set -e (a
# function called left of || does): chain its commands with &&.
step_sh = step() { \
	local what=$$1 start ticker took rc=0; shift; start=$$(date +%s); \
	echo "==> $$what"; \
	if [ -n "$(V)" ]; then echo "$$*"; fi; \
	( s=; trap 'kill $$s 2>/dev/null; exit 0' TERM; \
	  while :; do sleep 60 >/dev/null 2>&1 </dev/null & s=$$!; wait $$s; kill -0 $$$$ 2>/dev/null || exit 0; \
	    echo "    still $${what\#\[*\] }… $$(( ($$(date +%s) - start) / 60 ))m elapsed"; done ) & ticker=$$!; \
	"$$@" || rc=$$?; \
	kill $$ticker 2>/dev/null || true; wait $$ticker 2>/dev/null || true; \
	took=$$(( $$(date +%s) - start )); \
	if [ $$took -ge 60 ]; then took="$$((took / 60))m$$((took % 60))s"; else took="$${took}s"; fi; \
	if [ $$rc -ne 0 ]; then echo "    failed after $$took (exit status $$rc)" >&2; return $$rc; fi; \
	echo "    done in $$took"; \
	}; step
step = $(step_sh) "$(1)"

# The testbin steps in the order make runs them (testbin's prerequisites'),
# numbered [i/N] among those left to build (N computed once, when the
# first runs) when the goal builds the whole testbin; a grouped step is
# left when any of its files is.
TESTBIN_STEPS := $(TESTBIN)/etcd $(firstword $(KUBE_BINS)) $(TESTBIN)/helm $(TESTBIN)/cert-manager-controller \
	$(TESTBIN)/cert-manager-cainjector $(firstword $(CONTAINERD_BINS)) $(TESTBIN)/registry-$(REGISTRY_VERSION) $(CSI) $(COREDNS)
step_files = $(if $(filter $(1),$(KUBE_BINS)),$(KUBE_BINS),$(if $(filter $(1),$(CONTAINERD_BINS)),$(CONTAINERD_BINS),$(1)))
TESTBIN_TODO = $(eval TESTBIN_TODO := $(foreach s,$(TESTBIN_STEPS),$(if $(filter-out $(wildcard $(call step_files,$(s))),$(call step_files,$(s))),$(s))))$(TESTBIN_TODO)
upto = $(if $(2),$(firstword $(2)) $(if $(filter $(1),$(firstword $(2))),,$(call upto,$(1),$(wordlist 2,$(words $(2)),$(2)))))
TESTBIN_GOALS := testbin test e2e demo demo-cluster acceptance-cf bench
# "[i/N] " for the step whose (first) file is $(1).
testbin_no = $(if $(filter $(TESTBIN_GOALS),$(MAKECMDGOALS)),[$(words $(call upto,$(1),$(TESTBIN_TODO)))/$(words $(TESTBIN_TODO))] )

.PHONY: testbin print-testbin
testbin: $(addprefix $(TESTBIN)/,$(TESTBIN_TOOLS) $(NODE_TOOLS)) $(TESTBIN)/registry $(TESTBIN)/bosh-injector-csi $(COREDNS) ## Build the test cluster (control plane, node, CSI driver), the registry and CoreDNS (cached outside the repo)

print-testbin: ## Print the directory holding the test control plane binaries
	@echo $(TESTBIN)

.PHONY: coredns print-coredns
coredns: $(COREDNS) ## Build CoreDNS from its Go module (cached outside the repo)

print-coredns: ## Print the path of the CoreDNS binary tests run
	@echo $(COREDNS)

# Static: the test cluster runs it in a pod from an image holding only it.
$(COREDNS): | test/tools/coredns/go.mod test/tools/coredns/main.go
	@mkdir -p $(@D)
	@$(call step,$(call testbin_no,$@)building CoreDNS ($(COREDNS_VERSION))) \
		env CGO_ENABLED=0 $(GO) -C test/tools/coredns build -ldflags '-s -w' -o $@ .

# Every tool is built static (CGO_ENABLED=0), as Kubernetes releases its
# binaries: one cgo setting for all lets the tools share their compiled
# packages (with cgo, `net` and all that imports it build apart; the kube
# binaries share 1,500 packages with the kubelet).
$(TESTBIN)/etcd: | test/tools/etcd/go.mod test/tools/etcd/main.go
	@mkdir -p $(@D)
	@$(call step,$(call testbin_no,$@)building etcd ($(ETCD_VERSION))) \
		env CGO_ENABLED=0 $(GO) -C test/tools/etcd build -ldflags '-s -w' -o $@ .

$(KUBE_BINS) &: | test/tools/kube/go.mod
	@mkdir -p $(TESTBIN)
	@$(call step,$(call testbin_no,$(firstword $(KUBE_BINS)))building $(KUBE_CMDS) (k8s $(KUBE_VERSION))) \
		env CGO_ENABLED=0 $(GO) -C test/tools/kube build -ldflags '$(KUBE_LDFLAGS)' -o $(TESTBIN)/ $(addprefix k8s.io/kubernetes/cmd/,$(KUBE_CMDS))

CONTAINERD_LDFLAGS := -s -w -X github.com/containerd/containerd/v2/version.Version=$(CONTAINERD_VERSION)
$(CONTAINERD_BINS) &: | test/tools/containerd/go.mod
	@mkdir -p $(CONTAINERD_DIR)
	@$(call step,$(call testbin_no,$(firstword $(CONTAINERD_BINS)))building $(CONTAINERD_CMDS) ($(CONTAINERD_VERSION))) \
		env CGO_ENABLED=0 $(GO) -C test/tools/containerd build -tags no_btrfs -ldflags '$(CONTAINERD_LDFLAGS)' -o $(CONTAINERD_DIR)/ $(addprefix github.com/containerd/containerd/v2/cmd/,$(CONTAINERD_CMDS))

$(TESTBIN)/containerd $(TESTBIN)/containerd-shim-runc-v2 $(TESTBIN)/ctr: $(TESTBIN)/%: $(CONTAINERD_DIR)/%
	@ln -sf $(<:$(TESTBIN)/%=%) $@

# The Kubernetes minor version helm's client-go is, once.
HELM_K8S_MINOR = $(eval HELM_K8S_MINOR := $(word 2,$(subst ., ,$(shell $(GO) -C test/tools/helm list -m -f '{{.Version}}' k8s.io/client-go))))$(HELM_K8S_MINOR)
$(TESTBIN)/helm: | test/tools/helm/go.mod
	@mkdir -p $(@D)
	@$(call step,$(call testbin_no,$@)building helm ($(HELM_VERSION))) \
		env CGO_ENABLED=0 $(GO) -C test/tools/helm build -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION) \
		-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$(HELM_K8S_MINOR) \
		-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$(HELM_K8S_MINOR)" \
		-o $@ helm.sh/helm/v3/cmd/helm

# The image registry release-image pushes to in tests. Keyed by its own
# version inside the control plane's directory, where tests find it as
# $KUBEBUILDER_ASSETS/registry.
$(TESTBIN)/registry-$(REGISTRY_VERSION): | test/tools/registry/go.mod
	@mkdir -p $(@D)
	@$(call step,$(call testbin_no,$@)building the image registry ($(REGISTRY_VERSION))) \
		env CGO_ENABLED=0 $(GO) -C test/tools/registry build -ldflags '-s -w' -o $@ github.com/distribution/distribution/v3/cmd/registry

$(TESTBIN)/registry: $(TESTBIN)/registry-$(REGISTRY_VERSION)
	@ln -sf $(<F) $@

$(CSI): | test/tools/csi/go.mod
	@mkdir -p $(@D)
	@$(call step,$(call testbin_no,$@)building the CSI driver (test/tools/csi $(CSI_DIGEST))) \
		env CGO_ENABLED=0 $(GO) -C test/tools/csi build -ldflags '-s -w' -o $@ .

# Linked where the cluster finds its binaries: relinked when the digest
# (the target's path) changes.
$(TESTBIN)/bosh-injector-csi: $(CSI)
	@mkdir -p $(@D)
	@ln -sf $< $@

# cert-manager's CRDs are plain YAML in its module.
$(TESTBIN)/cert-manager-crds: | test/tools/certmanager/go.mod
	@mkdir -p $@
	@echo "==> copying cert-manager's CRDs ($(CERT_MANAGER_VERSION))"
	@cp $$($(GO) -C test/tools/certmanager list -m -f '{{.Dir}}' github.com/cert-manager/cert-manager)/deploy/crds/*.yaml $@/
	@chmod 0644 $@/*.yaml

# Static: the test cluster runs them in pods from images holding only them.
$(TESTBIN)/cert-manager-%: | test/tools/certmanager/go.mod test/tools/certmanager/%/main.go
	@mkdir -p $(@D)
	@$(call step,$(call testbin_no,$@)building cert-manager's $* ($(CERT_MANAGER_VERSION))) \
		env CGO_ENABLED=0 $(GO) -C test/tools/certmanager build -ldflags '-s -w' -o $@ ./$*

# Debian packages, installed only when missing.
apt_install = missing=$$(for p in $(1); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages: $$missing"; \
		if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

.PHONY: deps
# ruby renders templates; the test cluster's node needs runc, the CNI
# plugins, iptables, conntrack and nftables (kube-proxy), iproute2 and
# util-linux (its network namespace), mount (losetup) and xfsprogs (its
# CSI driver's volumes). openssl, openssh-client and ruby-jwt check the
# config server's certificates, keys and tokens as tools it did not write.
NODE_PACKAGES := runc containernetworking-plugins iptables conntrack nftables iproute2 util-linux mount xfsprogs
CHECK_PACKAGES := openssl openssh-client ruby-jwt
deps: ## Install the Debian packages the tests need (ruby, the node's runc, CNI plugins, iptables, conntrack, nftables; openssl, ssh-keygen, ruby-jwt), when missing
	@$(call apt_install,ruby $(NODE_PACKAGES) $(CHECK_PACKAGES))

# Images are built with podman (the operator image, release packages
# compiled on a stemcell image): a Debian base image made by debootstrap
# stands in for the stemcell, since no registry is reachable.
E2E_PACKAGES := podman runc catatonit debootstrap
export CONTAINERS_CONF := $(CURDIR)/test/e2e/containers.conf
BASE_IMAGE := docker.io/library/debian:bookworm-slim
DEBIAN_MIRROR = $(shell awk '/^URIs:/ { print $$2; exit }' /etc/apt/sources.list.d/debian.sources 2>/dev/null)

.PHONY: e2e-deps base-image
e2e-deps: deps ## Install podman, runc, catatonit and debootstrap, when missing
	@$(call apt_install,$(E2E_PACKAGES))

base-image: e2e-deps ## Import a debootstrapped Debian as $(BASE_IMAGE), when missing
	@if ! podman image exists $(BASE_IMAGE); then \
		debootstrap_import() { \
			root=$$(mktemp -d) && trap 'rm -rf "$$root"' EXIT && \
			debootstrap --variant=minbase bookworm "$$root" $(DEBIAN_MIRROR) >/dev/null && \
			tar -C "$$root" -c . | podman import --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
				--change 'CMD ["bash"]' - $(BASE_IMAGE) >/dev/null; \
		}; \
		$(call step,debootstrapping Debian bookworm as $(BASE_IMAGE)) debootstrap_import; \
	fi

# The stemcell stand-in job scripts run on in the sandbox (`make demo
# MANIFEST=…`) and the acceptance run: the base image with what Ubuntu
# stemcells give job scripts (test/stemcell/Containerfile). Its tag carries
# the Containerfile's digest, so a change builds it again; otherwise it is
# built once, like the base image.
STEMCELL_CONTAINERFILE := test/stemcell/Containerfile
DEFAULT_STEMCELL_IMAGE := localhost/bosh-injector-stemcell:bookworm-$(shell sha256sum $(STEMCELL_CONTAINERFILE) 2>/dev/null | cut -c1-12)
.PHONY: stemcell-image print-stemcell-image
stemcell-image: base-image ## Build the stemcell stand-in image (perl, vcap, setcap, nc, curl, dig, ps, en_US locale…), when missing
	@if ! podman image exists $(DEFAULT_STEMCELL_IMAGE); then \
		build_stemcell() { podman build -q --network=host --build-arg BASE=$(BASE_IMAGE) -f $(STEMCELL_CONTAINERFILE) -t $(DEFAULT_STEMCELL_IMAGE) test/stemcell >/dev/null; }; \
		$(call step,building the stemcell stand-in image $(DEFAULT_STEMCELL_IMAGE)) build_stemcell; \
	fi

print-stemcell-image: ## Print the stemcell stand-in image's name
	@echo $(DEFAULT_STEMCELL_IMAGE)

# A Go toolchain image for the Dockerfile's build stage, made from the base
# image and this machine's Go when no registry can provide one: for
# `podman build .` without the Makefile (`make image` needs none).
GO_IMAGE := docker.io/library/golang:$(shell $(GO) env GOVERSION | sed 's/^go//; s/\.[0-9]*$$//')-bookworm
.PHONY: go-image
go-image: base-image ## Make $(GO_IMAGE) from this machine's Go, when missing, for the Dockerfile's build stage
	@if ! podman image exists $(GO_IMAGE); then \
		make_go_image() { \
			ctr=$$(podman create $(BASE_IMAGE) true) && trap 'podman rm -f $$ctr >/dev/null' EXIT && \
			podman cp $$($(GO) env GOROOT) $$ctr:/usr/local/go && \
			podman commit -q --change 'ENV PATH=/usr/local/go/bin:/root/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' $$ctr $(GO_IMAGE) >/dev/null; \
		}; \
		$(call step,making $(GO_IMAGE) from $$($(GO) env GOROOT)) make_go_image; \
	fi

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS := -s -w -X github.com/bosh-injector/bosh-injector/cmd/bosh-injector/app.version=$(VERSION) \
	-X github.com/bosh-injector/bosh-injector/cmd/bosh-injector/app.commit=$(COMMIT)

.PHONY: build
build: ## Build bin/bosh-injector (static)
	@$(call step,building $(BIN_DIR)/bosh-injector ($(VERSION))) \
		env CGO_ENABLED=0 $(GO) build -ldflags '$(LDFLAGS)' -o $(BIN_DIR)/bosh-injector ./cmd/bosh-injector

# The README's test command: installs and builds what is missing, then
# test/runner compiles every test binary before any runs (no compile
# competes with a running cluster) and runs them scheduled for this
# machine: at most two real-node clusters more than it has cores (four on
# two: the end-to-end package's two throughout; beside them the sandbox
# test's two, then the demo's and the cluster package's one each), and as
# many packages without a cluster as cores beside those. Tests use the binary
# `build` made (BOSH_INJECTOR_BINARY) instead of building their own.
# -w: test binaries without DWARF link in half the time (stack traces keep
# their lines); set TEST_BUILD_FLAGS without it to debug one.
TEST_BUILD_FLAGS ?= -ldflags=-w
TEST_TIMEOUT ?= 20m
GO_TEST_FLAGS ?= -count=1 -timeout $(TEST_TIMEOUT) $(TEST_BUILD_FLAGS)
.PHONY: test
test: deps testbin image stemcell-image build ## Build what is missing, then run every test suite
	KUBEBUILDER_ASSETS=$(TESTBIN) BOSH_INJECTOR_BINARY=$(abspath $(BIN_DIR)/bosh-injector) \
		$(GO) run ./test/runner -timeout $(TEST_TIMEOUT) -- $(TEST_BUILD_FLAGS)
	# The test cluster's CSI driver is a module of its own.
	cd test/tools/csi && $(GO) test $(GO_TEST_FLAGS) ./...

STATICCHECK_VERSION := v0.8.2
STATICCHECK := $(TESTBIN_CACHE)/staticcheck-$(STATICCHECK_VERSION)/staticcheck
$(STATICCHECK):
	GOBIN=$(@D) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

.PHONY: e2e
# Two local clusters of three real nodes at once: the one most tests share
# and TestZones' own (it drains and loses nodes).
e2e: deps testbin image ## The end-to-end tests: injected pods on two local clusters of three real nodes, at once
	KUBEBUILDER_ASSETS=$(TESTBIN) $(GO) test $(GO_TEST_FLAGS) -v ./test/e2e

# The walkthrough runs on a local cluster of one real node (test/cluster);
# NODES=3 ZONES=z1,z1,z2 makes it three, each in the zone named in order.
# With MANIFEST and RELEASES (and OPS) the demo runs that deployment
# instead, in a sandbox (test/sandbox). KEEP=1 leaves either up for kubectl
# until `make demo-down`.
# VARS ("name=value …") and VARS_FILE (files) give variables as bosh's -v
# and -l do; STEMCELL_IMAGE is the stemcell image the releases are built on
# (default: `make stemcell-image`'s); STAND_INS ("package=dir …") stand in
# for vendored packages of release directories; SANDBOX=name keeps a sandbox of that
# name beside others (`make demo-down SANDBOX=name` stops it).
SANDBOX_ARGS = $(if $(MANIFEST),--manifest $(abspath $(MANIFEST)) $(foreach r,$(RELEASES),--release $(abspath $(r))) \
	$(foreach o,$(OPS),--ops-file $(abspath $(o))) $(foreach v,$(VARS),--var $(v)) $(foreach f,$(VARS_FILE),--vars-file $(abspath $(f))) \
	$(foreach s,$(STAND_INS),--stand-in $(firstword $(subst =, ,$(s)))=$(abspath $(lastword $(subst =, ,$(s))))) --stemcell-image $(or $(STEMCELL_IMAGE),$(DEFAULT_STEMCELL_IMAGE))) $(if $(filter 1 yes true,$(KEEP)),--keep) $(if $(SANDBOX),--sandbox $(SANDBOX)) \
	$(if $(NODES),--nodes $(NODES)) $(if $(ZONES),--zones $(ZONES))

.PHONY: demo demo-down
demo: deps testbin image build $(if $(MANIFEST),$(if $(STEMCELL_IMAGE),,stemcell-image)) ## The walkthrough on a local one-node cluster [KEEP=1]; or your deployment: make demo MANIFEST=m.yml RELEASES="a.tgz dir" [OPS=o.yml] [VARS="k=v"] [VARS_FILE=f.yml] [STEMCELL_IMAGE=img] [NODES=3 ZONES=z1,z1,z2] [KEEP=1 [SANDBOX=name]]
	KUBEBUILDER_ASSETS=$(TESTBIN) $(GO) run ./test/demo --binary $(BIN_DIR)/bosh-injector $(SANDBOX_ARGS)

demo-down: ## Stop the cluster or sandbox `make demo … KEEP=1` left up [SANDBOX=name]
	KUBEBUILDER_ASSETS=$(TESTBIN) $(GO) run ./test/demo --down $(if $(SANDBOX),--sandbox $(SANDBOX))

# Outside CI (it needs checkouts CI cannot fetch): cf-deployment's routing
# slice (nats, gorouter, route_registrar, bosh-dns-aliases) built from the
# release directories and deployed in a sandbox; with the four logging
# releases (all or none), its logging layer beside it (doppler, log-api,
# log-cache, scheduler, the agents on every group); see
# test/acceptance/cf-slice/run.sh.
.PHONY: acceptance-cf
acceptance-cf: deps testbin image build stemcell-image ## Outside CI: cf-deployment's routing slice from checkouts, with its logging layer given the four logging releases: make acceptance-cf CF_DEPLOYMENT=dir NATS_RELEASE=dir ROUTING_RELEASE=dir DNS_ALIASES_RELEASE=dir [HEALTHCHECKER_RELEASE=dir] [LOGGREGATOR_RELEASE=dir LOGGREGATOR_AGENT_RELEASE=dir LOG_CACHE_RELEASE=dir STATSD_INJECTOR_RELEASE=dir]
	KUBEBUILDER_ASSETS=$(TESTBIN) STEMCELL_IMAGE=$(or $(STEMCELL_IMAGE),$(DEFAULT_STEMCELL_IMAGE)) BINARY=$(abspath $(BIN_DIR)/bosh-injector) \
		CF_DEPLOYMENT=$(abspath $(CF_DEPLOYMENT)) NATS_RELEASE=$(abspath $(NATS_RELEASE)) ROUTING_RELEASE=$(abspath $(ROUTING_RELEASE)) \
		DNS_ALIASES_RELEASE=$(abspath $(DNS_ALIASES_RELEASE)) HEALTHCHECKER_RELEASE=$(if $(HEALTHCHECKER_RELEASE),$(abspath $(HEALTHCHECKER_RELEASE))) \
		LOGGREGATOR_RELEASE=$(if $(LOGGREGATOR_RELEASE),$(abspath $(LOGGREGATOR_RELEASE))) \
		LOGGREGATOR_AGENT_RELEASE=$(if $(LOGGREGATOR_AGENT_RELEASE),$(abspath $(LOGGREGATOR_AGENT_RELEASE))) \
		LOG_CACHE_RELEASE=$(if $(LOG_CACHE_RELEASE),$(abspath $(LOG_CACHE_RELEASE))) \
		STATSD_INJECTOR_RELEASE=$(if $(STATSD_INJECTOR_RELEASE),$(abspath $(STATSD_INJECTOR_RELEASE))) \
		test/acceptance/cf-slice/run.sh

# The same walkthrough on a real cluster that has cert-manager: the images
# are pushed to $(REGISTRY), which the cluster must be able to pull from.
.PHONY: demo-cluster
demo-cluster: deps testbin image ## The walkthrough on a real cluster: make demo-cluster REGISTRY=registry.example.com/me [KUBECONFIG=…]
	@if [ -z "$(REGISTRY)" ]; then echo "set REGISTRY to a registry prefix the cluster pulls from"; exit 2; fi
	KUBEBUILDER_ASSETS=$(TESTBIN) $(GO) run ./test/demo --kubeconfig $${KUBECONFIG:-$$HOME/.kube/config} --registry $(REGISTRY) $(DEMO_FLAGS)

# The README's example deployment (test/fixtures/deployments/shop.yml) as a
# user builds it: its releases' source tarballs, for `release-image`.
EXAMPLE_DIR ?= example
.PHONY: example-releases
example-releases: ## Write the example deployment's release tarballs (bus, store, shop) into $(EXAMPLE_DIR)/
	$(GO) run ./test/fixtures/tarballs $(EXAMPLE_DIR) bus store shop

.PHONY: lint
lint: $(STATICCHECK) ## gofmt, go vet and staticcheck
	@unformatted=$$(gofmt -l .); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	# BOSH error texts are reproduced verbatim, capitals included (ST1005).
	$(STATICCHECK) -checks inherit,-ST1005 ./...

.PHONY: bench
# With CF_DEPLOYMENT and the logging slice's release checkouts (as
# acceptance-cf takes them), BenchmarkGenerate also gathers cf-deployment.
BENCH_CF = CF_DEPLOYMENT NATS_RELEASE ROUTING_RELEASE DNS_ALIASES_RELEASE LOGGREGATOR_RELEASE LOGGREGATOR_AGENT_RELEASE LOG_CACHE_RELEASE STATSD_INJECTOR_RELEASE
bench: deps testbin image ## Run every Go benchmark once, each printing its comparison [CF_DEPLOYMENT=dir NATS_RELEASE=dir … as acceptance-cf]
	$(foreach v,$(BENCH_CF),$(if $($(v)),$(v)=$(abspath $($(v))))) $(GO) test -run '^$$' -bench . -benchtime 1x ./...

.PHONY: help
help: ## List the targets
	@awk -F':.*## ' '/^[a-z-]+:.*## / { printf "  %-14s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

IMAGE ?= localhost/bosh-injector:dev
# The tests, the demo and the sandbox run the operator image IMAGE names
# (also the default of the webhook command's --operator-image).
export BOSH_INJECTOR_OPERATOR_IMAGE := $(IMAGE)
.PHONY: image
# The binary `make build` built here, with the Go build cache the tests
# share, copied onto the Dockerfile's runtime stage (its prebuilt target),
# as kind and ko do; podman's layer cache keeps the image as it is when
# neither changed. `podman build .` alone builds the binary in the image.
# (SSL_CERT_FILE, an argument of the build stage the target skips, is set
# empty: podman warns of it otherwise.)
image: base-image build ## Build the operator image with podman: bin/bosh-injector on the Dockerfile's runtime stage
	@build_image() { podman build -q --network=host --build-arg BASE_IMAGE=$(BASE_IMAGE) --build-arg SSL_CERT_FILE= --target prebuilt -t $(IMAGE) . >/dev/null; }; \
		$(call step,building the operator image $(IMAGE)) build_image
