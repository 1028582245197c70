# bosh-injector's image: the operator and webhook, and the gather and render
# steps that run in pods (they need Ruby for ERB).
#
# GO_IMAGE is any image with Go >= the go.mod version on Debian bookworm; the
# Makefile's `image` target makes one locally when no registry is reachable.
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

FROM ${BASE_IMAGE}
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ruby \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/bosh-injector /usr/local/bin/bosh-injector
# A fixed non-root user; the webhook sets the user of the containers it
# injects itself.
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/bosh-injector"]
