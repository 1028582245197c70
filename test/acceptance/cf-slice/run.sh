#!/usr/bin/env bash
# The acceptance of cf-deployment's routing slice (`make acceptance-cf`),
# outside CI, which cannot fetch the checkouts it needs:
#   CF_DEPLOYMENT        a cf-deployment checkout
#   NATS_RELEASE         a nats-release checkout
#   ROUTING_RELEASE      a routing-release checkout with its submodules
#                        (gorouter, route-registrar, routing-api, multierror)
#   DNS_ALIASES_RELEASE  a bosh-dns-aliases-release checkout
#   HEALTHCHECKER_RELEASE (optional) a healthchecker-release checkout at the
#                        version routing-release vendors routing-healthchecker
#                        from; without it that package has no files
# It builds the release images from the directories (cold, then warm),
# renders the slice offline with `bosh-injector template`, deploys it in a
# kept sandbox (`make demo`) and checks that every gorouter serves the
# route route_registrar registers for NATS's monitoring port with 200, that
# NATS's clients are connected over TLS, that no container restarted and
# that the deploy is Deployed; then stops the sandbox. It prints the times.
# UNTIL=template stops before deploying.
#
# Stand-ins, as testbed.md describes them, for what no blobstore gives here:
# the vendored golang packages (this machine's Go toolchain, compile.env
# exporting GOROOT, GOTOOLCHAIN=local, GOFLAGS=-mod=vendor, CGO_ENABLED=0)
# and gorouter's jq blob (Debian's jq), in a hard-linked copy of
# routing-release (the checkouts are never changed). nats-release runs as it
# is: its bpm open_files (100000) above this machine's hard nofile limit is
# applied up to that limit, with a warning.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
: "${CF_DEPLOYMENT:?set CF_DEPLOYMENT to a cf-deployment checkout}"
: "${NATS_RELEASE:?set NATS_RELEASE to a nats-release checkout}"
: "${ROUTING_RELEASE:?set ROUTING_RELEASE to a routing-release checkout with its submodules}"
: "${DNS_ALIASES_RELEASE:?set DNS_ALIASES_RELEASE to a bosh-dns-aliases-release checkout}"
: "${STEMCELL_IMAGE:?set STEMCELL_IMAGE (make acceptance-cf does)}"
: "${KUBEBUILDER_ASSETS:?set KUBEBUILDER_ASSETS (make acceptance-cf does)}"
BINARY=${BINARY:-$repo/bin/bosh-injector}
# podman's settings for the compile containers, as make exports them.
export CONTAINERS_CONF=${CONTAINERS_CONF:-$repo/test/e2e/containers.conf}
SYSTEM_DOMAIN=${SYSTEM_DOMAIN:-cf-slice.test}
SANDBOX=${SANDBOX:-cf-slice}
for d in "$CF_DEPLOYMENT" "$NATS_RELEASE" "$ROUTING_RELEASE" "$DNS_ALIASES_RELEASE" ${HEALTHCHECKER_RELEASE:+"$HEALTHCHECKER_RELEASE"}; do
	[ -d "$d" ] || { echo "$d: not a directory" >&2; exit 2; }
done
command -v jq >/dev/null || { echo "jq is needed (the checks read NATS's /connz and the sandbox's state)" >&2; exit 2; }
if [ ! -e "$ROUTING_RELEASE/src/code.cloudfoundry.org/gorouter/main.go" ]; then
	echo "$ROUTING_RELEASE: its submodules are not checked out (git submodule update --init)" >&2
	exit 2
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/acceptance-cf-XXXXXX")
down() {
	make --no-print-directory -C "$repo" demo-down SANDBOX="$SANDBOX" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap down EXIT
now() { date +%s; }
took() { echo "$(( $(now) - $1 ))s"; }

# The golang stand-in: this machine's Go toolchain, trimmed to what
# building needs, and the compile.env golang-release's packages ship.
mkdir -p "$work/golang"
goroot=$(go env GOROOT)
tools=pkg/tool/$(go env GOOS)_$(go env GOARCH)
tar -C "$goroot" --exclude=testdata --exclude=src/cmd --exclude='*_test.go' -czf "$work/golang/go.tar.gz" \
	bin/go VERSION go.env pkg/include "$tools/compile" "$tools/link" "$tools/asm" "$tools/cgo" src
cat > "$work/golang/packaging" <<'SCRIPT'
set -eu
tar xzf go.tar.gz -C "${BOSH_INSTALL_TARGET}"
mkdir -p "${BOSH_INSTALL_TARGET}/bosh"
cat > "${BOSH_INSTALL_TARGET}/bosh/compile.env" <<ENV
export GOROOT=${BOSH_INSTALL_TARGET}
export PATH=\${GOROOT}/bin:\${PATH}
export GOCACHE=\${BOSH_COMPILE_TARGET}/.cache/go-build
export GOPATH=\${BOSH_COMPILE_TARGET}/.go
export GOTOOLCHAIN=local
export GOFLAGS=-mod=vendor
export CGO_ENABLED=0
ENV
cp "${BOSH_INSTALL_TARGET}/bosh/compile.env" "${BOSH_INSTALL_TARGET}/bosh/runtime.env"
SCRIPT

# A hard-linked copy of the release that gets a local stand-in; files
# added are new, never written through.
cp -al "$ROUTING_RELEASE" "$work/routing-release" 2>/dev/null || cp -a "$ROUTING_RELEASE" "$work/routing-release"
jq_blob=$(awk -F: '/^jq\/jq-.*-linux-amd64.tgz:/ { print $1 }' "$ROUTING_RELEASE/config/blobs.yml")
if [ -n "$jq_blob" ] && [ ! -e "$work/routing-release/blobs/$jq_blob" ]; then
	command -v jq >/dev/null || { echo "jq is needed for gorouter's jq blob stand-in" >&2; exit 2; }
	mkdir -p "$work/routing-release/blobs/$(dirname "$jq_blob")" "$work/jq"
	cp "$(command -v jq)" "$work/jq/jq"
	# Fixed times and owners: the same blob, hence gorouter's fingerprint
	# and its compiled package cache, on every run.
	tar -C "$work/jq" --mtime=@0 --owner=0 --group=0 --numeric-owner -cf - jq | gzip -n > "$work/routing-release/blobs/$jq_blob"
fi

releases=("$NATS_RELEASE" "$work/routing-release" "$DNS_ALIASES_RELEASE" ${HEALTHCHECKER_RELEASE:+"$HEALTHCHECKER_RELEASE"})
stand_ins=(golang-1.23-linux="$work/golang" routing-golang-1.23-linux="$work/golang")
manifest=$CF_DEPLOYMENT/cf-deployment.yml
ops=("$here/slice.yml" "$here/local.yml")
ri_args=(--manifest "$manifest" --ops-file "${ops[0]}" --ops-file "${ops[1]}" --repository localhost/cf-slice
	--stemcell-image "containers-storage:$STEMCELL_IMAGE")
for s in "${stand_ins[@]}"; do ri_args+=(--stand-in "$s"); done

echo "== release images from the directories, cold (an empty compiled package cache)"
t=$(now)
"$BINARY" release-image "${ri_args[@]}" --cache "$work/cache" "${releases[@]}" >/dev/null
cold=$(took "$t")
echo "== again, warm"
t=$(now)
"$BINARY" release-image "${ri_args[@]}" --cache "$work/cache" "${releases[@]}" >/dev/null
warm=$(took "$t")
echo "release images: cold $cold, warm $warm"

echo "== the slice rendered offline (bosh-injector template)"
t=$(now)
"$BINARY" template --manifest "$manifest" --ops-file "${ops[0]}" --ops-file "${ops[1]}" --var system_domain="$SYSTEM_DOMAIN" \
	--vars-store "$work/vars.yml" --release nats="$NATS_RELEASE" --release routing="$work/routing-release" \
	--release bosh-dns-aliases="$DNS_ALIASES_RELEASE" --output "$work/template" >/dev/null
echo "template: $(took "$t")"

if [ "${UNTIL:-}" = template ]; then
	echo "UNTIL=template: not deploying"
	exit 0
fi

echo "== the slice in a kept sandbox (make demo … KEEP=1 SANDBOX=$SANDBOX)"
t=$(now)
make --no-print-directory -C "$repo" demo MANIFEST="$manifest" OPS="${ops[*]}" RELEASES="${releases[*]}" \
	VARS="system_domain=$SYSTEM_DOMAIN" STAND_INS="${stand_ins[*]}" STEMCELL_IMAGE="$STEMCELL_IMAGE" KEEP=1 SANDBOX="$SANDBOX"
state=${TMPDIR:-/tmp}/bosh-injector-sandbox-$SANDBOX/state.json
KUBECONFIG=$(jq -r .Kubeconfig "$state")
export KUBECONFIG
ns=$(jq -r .Namespace "$state")
kubectl=$KUBEBUILDER_ASSETS/kubectl
pods_of() { "$kubectl" get pods -n "$ns" -l "bosh-injector.io/instance-group=$1" -o jsonpath='{range .items[*]}{.status.podIP}{"\n"}{end}'; }

echo "== every gorouter serves nats.$SYSTEM_DOMAIN with 200"
routers=$(pods_of router)
[ -n "$routers" ] || { echo "FAILED: no router pod"; exit 1; }
first200=""
for ip in $routers; do
	code=""
	for _ in $(seq 1 120); do
		code=$(curl -s -o /dev/null -w '%{http_code}' -m 5 -H "Host: nats.$SYSTEM_DOMAIN" "http://$ip/varz" || true)
		[ "$code" = 200 ] && break
		sleep 1
	done
	echo "router $ip: $code"
	[ "$code" = 200 ] || { echo "FAILED: router $ip answers $code"; exit 1; }
	[ -n "$first200" ] || first200=$(took "$t")
done
echo "deploy to the first 200: $first200"

echo "== NATS's clients are connected over TLS"
nats_ip=$(pods_of nats | head -1)
connz=$(curl -s -m 5 "http://$nats_ip:8222/connz")
total=$(jq '.connections | length' <<<"$connz")
tls=$(jq '[.connections[] | select(.tls_version != null and .tls_version != "")] | length' <<<"$connz")
echo "nats $nats_ip: $tls of $total connections over TLS"
[ "$total" -gt 0 ] && [ "$tls" = "$total" ] || { echo "FAILED: connections without TLS"; exit 1; }

echo "== no container restarted"
restarts=$("$kubectl" get pods -n "$ns" -o jsonpath='{range .items[*]}{range .status.initContainerStatuses[*]}{.restartCount}{"\n"}{end}{range .status.containerStatuses[*]}{.restartCount}{"\n"}{end}{end}' | awk '{ s += $1 } END { print s + 0 }')
echo "restarts: $restarts"
if [ "$restarts" != 0 ]; then
	"$kubectl" get pods -n "$ns"
	# Which containers, why, and what the kubelet said.
	"$kubectl" get pods -n "$ns" -o go-template='{{range .items}}{{$p := .metadata.name}}{{range .status.containerStatuses}}{{if .restartCount}}{{$p}}/{{.name}}: {{.restartCount}} restarts, last {{.lastState}}{{"\n"}}{{end}}{{end}}{{end}}'
	"$kubectl" get events -n "$ns" --sort-by=.lastTimestamp | grep -Ev ' (Scheduled|Pulling|Pulled|Created|Started|SuccessfulCreate) ' || true
	echo "FAILED: containers restarted"
	exit 1
fi

echo "== processes started again in their containers, and limits applied up to the node's"
for pc in $("$kubectl" get pods -n "$ns" -o go-template='{{range .items}}{{$p := .metadata.name}}{{range .spec.containers}}{{$p}}/{{.name}} {{end}}{{end}}'); do
	log=$("$kubectl" logs -n "$ns" "${pc%%/*}" -c "${pc#*/}" 2>/dev/null || true)
	n=$(grep -c "starting again on monit's next cycle" <<<"$log" || true)
	[ "$n" = 0 ] || echo "$pc: exited and started again in its container $n times"
	grep "bosh-injector: warning:" <<<"$log" | sort -u | sed "s|^|$pc: |" || true
done

echo "== the deploy is Deployed"
phase=$("$kubectl" get secrets -n "$ns" -l bosh-injector.io/deploy-state -o jsonpath='{.items[*].metadata.labels.bosh-injector\.io/deploy-state}')
echo "deploy: $phase"
[ "$phase" = Deployed ] || { echo "FAILED: the deploy is $phase"; exit 1; }
echo "PASSED: release images cold $cold, warm $warm; deploy to the first 200 $first200"
