# bosh-injector build, test and tooling targets. `make help` lists them.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := build

GO ?= go
BIN_DIR := bin

# Test control plane binaries are built from pinned Go modules under
# test/tools and cached outside the repository, keyed by their versions, so a
# fresh clone on the same machine reuses them.
modver = $(shell awk '$$1 == "$(2)" && $$2 != "=>" { print $$2; exit } $$1 == "require" && $$2 == "$(2)" { print $$3; exit }' test/tools/$(1)/go.mod 2>/dev/null)
KUBE_VERSION := $(call modver,kube,k8s.io/kubernetes)
ETCD_VERSION := $(call modver,etcd,go.etcd.io/etcd/server/v3)
HELM_VERSION := $(call modver,helm,helm.sh/helm/v3)
CERT_MANAGER_VERSION := $(call modver,certmanager,github.com/cert-manager/cert-manager)
TESTBIN_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/bosh-injector/testbin
TESTBIN := $(TESTBIN_CACHE)/k8s-$(KUBE_VERSION)_etcd-$(ETCD_VERSION)_helm-$(HELM_VERSION)_cert-manager-$(CERT_MANAGER_VERSION)
TESTBIN_TOOLS := etcd kube-apiserver kube-controller-manager kubectl helm cert-manager-controller cert-manager-cainjector cert-manager-crds

kube_minor = $(word 2,$(subst ., ,$(KUBE_VERSION)))
KUBE_LDFLAGS := -s -w \
	-X k8s.io/component-base/version.gitVersion=$(KUBE_VERSION) \
	-X k8s.io/component-base/version.gitMajor=1 \
	-X k8s.io/component-base/version.gitMinor=$(kube_minor) \
	-X k8s.io/component-base/version.gitTreeState=clean \
	-X k8s.io/client-go/pkg/version.gitVersion=$(KUBE_VERSION) \
	-X k8s.io/client-go/pkg/version.gitMajor=1 \
	-X k8s.io/client-go/pkg/version.gitMinor=$(kube_minor)

.PHONY: testbin print-testbin
testbin: $(addprefix $(TESTBIN)/,$(TESTBIN_TOOLS)) ## Build the test control plane (cached outside the repo)

print-testbin: ## Print the directory holding the test control plane binaries
	@echo $(TESTBIN)

$(TESTBIN)/etcd: test/tools/etcd/go.mod test/tools/etcd/main.go
	@mkdir -p $(@D)
	cd test/tools/etcd && $(GO) build -ldflags '-s -w' -o $@ .

$(TESTBIN)/kube-%: test/tools/kube/go.mod
	@mkdir -p $(@D)
	cd test/tools/kube && $(GO) build -ldflags '$(KUBE_LDFLAGS)' -o $@ k8s.io/kubernetes/cmd/kube-$*

$(TESTBIN)/kubectl: test/tools/kube/go.mod
	@mkdir -p $(@D)
	cd test/tools/kube && $(GO) build -ldflags '$(KUBE_LDFLAGS)' -o $@ k8s.io/kubernetes/cmd/kubectl

HELM_K8S_VERSION = $(shell cd test/tools/helm && $(GO) list -m -f '{{.Version}}' k8s.io/client-go)
$(TESTBIN)/helm: test/tools/helm/go.mod
	@mkdir -p $(@D)
	cd test/tools/helm && minor=$$(echo $(HELM_K8S_VERSION) | cut -d. -f2) && \
	$(GO) build -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION) \
		-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$$minor \
		-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$$minor" \
		-o $@ helm.sh/helm/v3/cmd/helm

# cert-manager's CRDs are plain YAML in its module.
$(TESTBIN)/cert-manager-crds: test/tools/certmanager/go.mod
	@mkdir -p $@
	cp $$(cd test/tools/certmanager && $(GO) list -m -f '{{.Dir}}' github.com/cert-manager/cert-manager)/deploy/crds/*.yaml $@/
	chmod 0644 $@/*.yaml

$(TESTBIN)/cert-manager-%: test/tools/certmanager/go.mod test/tools/certmanager/%/main.go
	@mkdir -p $(@D)
	cd test/tools/certmanager && $(GO) build -ldflags '-s -w' -o $@ ./$*

# Debian packages the tests need; installed only when missing.
DEBIAN_PACKAGES := ruby
.PHONY: deps
deps: ## Install the Debian packages the tests need (ruby), when missing
	@missing=$$(for p in $(DEBIAN_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages: $$missing"; \
		if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X github.com/bosh-injector/bosh-injector/cmd/bosh-injector/app.version=$(VERSION)

.PHONY: build
build: ## Build bin/bosh-injector (static)
	CGO_ENABLED=0 $(GO) build -ldflags '$(LDFLAGS)' -o $(BIN_DIR)/bosh-injector ./cmd/bosh-injector

# The README's test command: installs what is missing, then runs unit and
# integration suites against the real control plane.
GO_TEST_FLAGS ?= -count=1 -timeout 20m
.PHONY: test
test: deps testbin ## Build what is missing, then run every test suite
	KUBEBUILDER_ASSETS=$(TESTBIN) $(GO) test $(GO_TEST_FLAGS) ./...

STATICCHECK_VERSION := v0.8.2
STATICCHECK := $(TESTBIN_CACHE)/staticcheck-$(STATICCHECK_VERSION)/staticcheck
$(STATICCHECK):
	GOBIN=$(@D) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

.PHONY: lint
lint: $(STATICCHECK) ## gofmt, go vet and staticcheck
	@unformatted=$$(gofmt -l .); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(STATICCHECK) ./...

.PHONY: bench
bench: deps ## Run every Go benchmark once, each printing its comparison
	$(GO) test -run '^$$' -bench . -benchtime 1x ./...

.PHONY: help
help: ## List the targets
	@awk -F':.*## ' '/^[a-z-]+:.*## / { printf "  %-14s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)
