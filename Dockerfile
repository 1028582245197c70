# bosh-injector's image: the operator and webhook, and the gather and render
# steps that run in pods (they need Ruby for ERB).
#
# GO_IMAGE is any image with Go >= the go.mod version on Debian bookworm
# (`make go-image` makes one locally when no registry is reachable). `make
# image` builds the binary on the host instead (the prebuilt stage).
ARG GO_IMAGE=docker.io/library/golang:1.26-bookworm
ARG BASE_IMAGE=docker.io/library/debian:bookworm-slim

FROM ${GO_IMAGE} AS build
# Optional CA bundle for fetching modules behind a TLS-intercepting proxy.
ARG SSL_CERT_FILE
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS=-mod=readonly
COPY go.mod go.sum ./
COPY cmd cmd
COPY gather gather
COPY inject inject
COPY webhook webhook
ARG VERSION=dev
# The build context has no .git, so the commit comes in as an argument.
ARG COMMIT=unknown
RUN go build -trimpath -ldflags "-s -w -X github.com/bosh-injector/bosh-injector/cmd/bosh-injector/app.version=${VERSION} \
      -X github.com/bosh-injector/bosh-injector/cmd/bosh-injector/app.commit=${COMMIT}" \
      -o /out/bosh-injector ./cmd/bosh-injector

# The runtime, the same whichever stage gives the binary.
FROM ${BASE_IMAGE} AS runtime
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ruby \
 && rm -rf /var/lib/apt/lists/*
# A fixed non-root user; the webhook sets the user of the containers it
# injects itself. (COPY writes files as root whatever the USER.)
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/bosh-injector"]

# `make image`: the binary `make build` built on the host, with its Go
# build cache, copied in as kind and ko do (`--target prebuilt`; podman and
# BuildKit skip the stages the target does not need).
FROM runtime AS prebuilt
COPY bin/bosh-injector /usr/local/bin/bosh-injector

# The default (`podman build .`, `docker build .`): the binary built above.
FROM runtime
COPY --from=build /out/bosh-injector /usr/local/bin/bosh-injector
