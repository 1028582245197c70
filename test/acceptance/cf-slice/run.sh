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
# and, for cf-deployment's logging layer beside it (issue 46), all four or none:
#   LOGGREGATOR_RELEASE        a loggregator-release checkout
#   LOGGREGATOR_AGENT_RELEASE  a loggregator-agent-release checkout
#   LOG_CACHE_RELEASE          a log-cache-release checkout
#   STATSD_INJECTOR_RELEASE    a statsd-injector-release checkout
# It builds the release images from the directories (cold, then warm),
# renders the slice offline with `bosh-injector template`, deploys it in a
# kept sandbox (`make demo`) and checks that every gorouter serves the
# route route_registrar registers for NATS's monitoring port with 200, that
# NATS's clients are connected over TLS, that no container restarted and
# that the deploy is Deployed; then stops the sandbox. It prints the times.
# UNTIL=template stops before deploying.
#
# With the four logging releases it deploys logging.yml instead of
# slice.yml: the routing slice plus doppler, log-api, log-cache, a trimmed
# scheduler and the loggregator agents on every group, and checks besides
# the above (issue 46's checks 2-6):
# - every gorouter routes doppler.<system domain> to the traffic controller
#   (401, WWW-Authenticate: Basic) and log-stream.<system domain> to the RLP
#   gateway (404 not_found), never with gorouter's own error;
# - log-cache's gateway answers its version inside its instance (kubectl
#   exec), its /api/v1/meta lists the components' own sources and doppler's
#   ingress counter is above 0 (agents -> doppler);
# - a dropsonde LogMessage sent over UDP to loggr-udp-forwarder on each
#   router instance is read back from log-cache by its app id;
# - a statsd gauge sent to statsd_injector on each scheduler instance
#   answers log-cache's PromQL;
# - a rolling change of one logging property (roll.yml, a further ops file
#   in the manifest Secret: doppler's ingress buffer) keeps these true while
#   doppler rolls, and ends Deployed with no container restarted;
# - the gathering is Gathered; the deployment's Warning Events are printed.
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
# The logging layer: all four releases, or none (the routing slice alone).
logging=""
given=0
for v in LOGGREGATOR_RELEASE LOGGREGATOR_AGENT_RELEASE LOG_CACHE_RELEASE STATSD_INJECTOR_RELEASE; do
	[ -z "${!v:-}" ] || given=$((given + 1))
done
case $given in
0) ;;
4) logging=1 ;;
*)
	echo "give all of LOGGREGATOR_RELEASE, LOGGREGATOR_AGENT_RELEASE, LOG_CACHE_RELEASE and STATSD_INJECTOR_RELEASE, or none" >&2
	exit 2
	;;
esac
for d in "$CF_DEPLOYMENT" "$NATS_RELEASE" "$ROUTING_RELEASE" "$DNS_ALIASES_RELEASE" ${HEALTHCHECKER_RELEASE:+"$HEALTHCHECKER_RELEASE"} \
	${logging:+"$LOGGREGATOR_RELEASE" "$LOGGREGATOR_AGENT_RELEASE" "$LOG_CACHE_RELEASE" "$STATSD_INJECTOR_RELEASE"}; do
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
# building needs, and the compile.env golang-release's packages ship. With
# the logging layer (15 more Go binaries) the build cache is on the compile
# containers' kept /var/vcap/data, as golang-release's compile.env and the
# fixture's golang package have it: the standard library and the vendored
# modules the releases share compile once.
mkdir -p "$work/golang"
goroot=$(go env GOROOT)
tools=pkg/tool/$(go env GOOS)_$(go env GOARCH)
tar -C "$goroot" --exclude=testdata --exclude=src/cmd --exclude='*_test.go' -czf "$work/golang/go.tar.gz" \
	bin/go VERSION go.env pkg/include "$tools/compile" "$tools/link" "$tools/asm" "$tools/cgo" src
packaging=$(cat <<'SCRIPT'
set -eu
tar xzf go.tar.gz -C "${BOSH_INSTALL_TARGET}"
mkdir -p "${BOSH_INSTALL_TARGET}/bosh"
cat > "${BOSH_INSTALL_TARGET}/bosh/compile.env" <<ENV
export GOROOT=${BOSH_INSTALL_TARGET}
export PATH=\${GOROOT}/bin:\${PATH}
export GOCACHE=@GOCACHE@
export GOPATH=\${BOSH_COMPILE_TARGET}/.go
export GOTOOLCHAIN=local
export GOFLAGS=-mod=vendor
export CGO_ENABLED=0
ENV
cp "${BOSH_INSTALL_TARGET}/bosh/compile.env" "${BOSH_INSTALL_TARGET}/bosh/runtime.env"
SCRIPT
)
if [ -n "$logging" ]; then
	gocache=/var/vcap/data/golang/cache
else
	gocache='\${BOSH_COMPILE_TARGET}/.cache/go-build'
fi
printf '%s\n' "${packaging//@GOCACHE@/$gocache}" > "$work/golang/packaging"

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
template_releases=(--release nats="$NATS_RELEASE" --release routing="$work/routing-release" --release bosh-dns-aliases="$DNS_ALIASES_RELEASE")
if [ -n "$logging" ]; then
	# No blobs, no submodules: the checkouts are used as they are. Their
	# golang packages are all golang-1.22-linux, one stand-in.
	releases+=("$LOGGREGATOR_RELEASE" "$LOGGREGATOR_AGENT_RELEASE" "$LOG_CACHE_RELEASE" "$STATSD_INJECTOR_RELEASE")
	stand_ins+=(golang-1.22-linux="$work/golang")
	ops=("$here/logging.yml" "$here/local.yml")
	template_releases+=(--release loggregator="$LOGGREGATOR_RELEASE" --release loggregator-agent="$LOGGREGATOR_AGENT_RELEASE"
		--release log-cache="$LOG_CACHE_RELEASE" --release statsd-injector="$STATSD_INJECTOR_RELEASE")
fi
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
	--vars-store "$work/vars.yml" "${template_releases[@]}" --output "$work/template" >/dev/null
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
if [ -n "$logging" ]; then
	# Six groups in manifest order (router serial) take longer than the
	# sandbox waits for its instances: the deploy is waited for here.
	echo "== the deploy of the routing + logging slice ends"
	phase=""
	for _ in $(seq 1 360); do
		phase=$("$kubectl" get secrets -n "$ns" -l bosh-injector.io/deploy-state -o jsonpath='{.items[*].metadata.labels.bosh-injector\.io/deploy-state}')
		[ "$phase" = Deployed ] || [ "$phase" = Failed ] && break
		sleep 5
	done
	echo "deploy: ${phase:-none} after $(took "$t")"
	if [ "$phase" != Deployed ]; then
		"$kubectl" get pods -n "$ns"
		"$kubectl" get secrets -n "$ns" -l bosh-injector.io/deploy-state -o jsonpath='{.items[*].metadata.annotations.bosh-injector\.io/deploy}'
		echo
		echo "FAILED: the deploy is ${phase:-not started}"
		exit 1
	fi
fi

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
# A loaded node may answer late: a minute's tries.
connz=""
for _ in $(seq 30); do
	connz=$(curl -s -m 5 "http://$nats_ip:8222/connz" || true)
	[ -z "$connz" ] || break
	sleep 2
done
total=$(jq '.connections | length' <<<"$connz")
tls=$(jq '[.connections[] | select(.tls_version != null and .tls_version != "")] | length' <<<"$connz")
echo "nats $nats_ip: $tls of $total connections over TLS"
[ "$total" -gt 0 ] && [ "$tls" = "$total" ] || { echo "FAILED: connections without TLS"; exit 1; }

if [ -n "$logging" ]; then
	# Issue 46's checks 2-6, on the logging layer.
	pod_names_of() { "$kubectl" get pods -n "$ns" -l "bosh-injector.io/instance-group=$1" -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}'; }
	# A process container of the job (<job>-<process>, as the webhook names
	# it): the stemcell's curl, nc and bash are there.
	in_job() {
		local pod=$1 container=$2
		shift 2
		"$kubectl" exec -n "$ns" "$pod" -c "$container" -- "$@"
	}
	# log-cache's gateway inside its instance: HTTPS on localhost:8081 with
	# log_cache_proxy_tls (CN localhost), signed by the CA it has as ca.crt.
	lc() {
		local path=$1
		shift
		in_job "$(pod_names_of log-cache | head -1)" log-cache-gateway-log-cache-gateway \
			curl -s -m 10 --cacert /var/vcap/jobs/log-cache-gateway/config/certs/ca.crt \
			--resolve localhost:8081:127.0.0.1 "$@" "https://localhost:8081$path"
	}
	promql() { lc /api/v1/query -G --data-urlencode "query=$1" 2>/dev/null || true; }

	# dropsonde v1 (sonde-go events): Envelope{origin=1, eventType=2
	# (LogMessage=5), timestamp=6, logMessage=8}, LogMessage{message=1,
	# message_type=2 (OUT=1), timestamp=3, app_id=4}, as \xHH escapes.
	pb_varint() {
		local n=$1 out=""
		while [ "$n" -ge 128 ]; do
			out+=$(printf '\\x%02x' $(((n & 127) | 128)))
			n=$((n >> 7))
		done
		printf '%s\\x%02x' "$out" "$n"
	}
	pb_bytes() { printf '\\x%02x%s%s' "$1" "$(pb_varint "$(printf '%s' "$2" | wc -c)")" "$(printf '%s' "$2" | od -An -v -tx1 | tr -d ' \n' | sed 's/../\\x&/g')"; }
	pb_len() { printf '\\x%02x%s%s' "$1" "$(pb_varint $(($(printf '%b' "$2" | wc -c))))" "$2"; }
	log_message() {
		local app=$1 text=$2 ns_now
		ns_now=$(date +%s%N)
		local msg
		msg=$(pb_bytes 0x0a "$text")'\x10\x01'"\\x18$(pb_varint "$ns_now")"$(pb_bytes 0x22 "$app")
		printf '%s' "$(pb_bytes 0x0a cf-slice-acceptance)"'\x10\x05'"\\x30$(pb_varint "$ns_now")$(pb_len 0x42 "$msg")"
	}
	udp_send() {
		local pod=$1 container=$2 port=$3 payload=$4
		in_job "$pod" "$container" bash -c 'printf "%b" "$1" | timeout 5 nc -u -w1 127.0.0.1 "$2"' _ "$payload" "$port" >/dev/null 2>&1 || true
	}
	# A log line sent as an app would, to loggr-udp-forwarder on a router
	# instance, read back from log-cache by its app id within $2 seconds.
	log_round_trip() {
		local pod=$1 deadline=$(($(now) + $2)) app text read
		app=$(cat /proc/sys/kernel/random/uuid)
		text="cf-slice acceptance $(date +%s%N) via $pod"
		while [ "$(now)" -lt "$deadline" ]; do
			udp_send "$pod" loggr-udp-forwarder-loggr-udp-forwarder 3457 "$(log_message "$app" "$text")"
			sleep 2
			read=$(lc "/api/v1/read/$app?envelope_types=LOG" 2>/dev/null || true)
			if jq -e --arg t "$text" '[.envelopes.batch[]?.log.payload // empty | @base64d | select(contains($t))] | length > 0' <<<"$read" >/dev/null 2>&1; then
				echo "log line from $pod read back from log-cache as source $app"
				return 0
			fi
		done
		echo "log line from $pod not read back: $read"
		return 1
	}
	# A statsd gauge to statsd_injector (localhost:8125) on a scheduler
	# instance, answered by log-cache's PromQL within $2 seconds.
	gauge_round_trip() {
		local pod=$1 deadline=$(($(now) + $2)) value=$((RANDOM % 100000 + 1)) answer
		while [ "$(now)" -lt "$deadline" ]; do
			udp_send "$pod" statsd-injector-statsd-injector 8125 "cf-slice-acceptance.acceptance_gauge:$value|g"
			sleep 2
			answer=$(promql 'acceptance_gauge{source_id="cf-slice-acceptance"}')
			if jq -e --arg v "$value" '[.data.result[]?.value[1] | tonumber | select(. == ($v | tonumber))] | length > 0' <<<"$answer" >/dev/null 2>&1; then
				echo "gauge $value from $pod answered by log-cache's PromQL"
				return 0
			fi
		done
		echo "gauge $value from $pod not answered: $answer"
		return 1
	}
	sources=(doppler traffic_controller reverse_log_proxy log-cache forwarder_agent syslog_agent udp_forwarder)
	# log-cache's meta lists the components' own sources (prom_scraper
	# scrapes every 60s) and doppler's ingress counter is above 0.
	meta_and_ingress() {
		local deadline=$(($(now) + $1)) meta missing ingress
		while :; do
			meta=$(lc /api/v1/meta 2>/dev/null || true)
			[ -n "$meta" ] || meta='{}'
			missing=$(jq -r --args '(.meta // {}) as $m | [$ARGS.positional[] | select($m[.] == null)] | join(" ")' "${sources[@]}" <<<"$meta" 2>/dev/null || echo "${sources[*]}")
			ingress=$(promql 'ingress{source_id="doppler"}' | jq -r '[.data.result[]?.value[1] | tonumber] | max // 0' 2>/dev/null || echo 0)
			if [ -z "$missing" ] && awk -v n="$ingress" 'BEGIN { exit !(n > 0) }'; then
				echo "log-cache's sources: $(jq -r '.meta | keys | join(" ")' <<<"$meta"); doppler ingress: $ingress"
				return 0
			fi
			if [ "$(now)" -ge "$deadline" ]; then
				echo "log-cache's sources lack: ${missing:-nothing}; doppler ingress: $ingress; meta: $meta"
				return 1
			fi
			sleep 5
		done
	}

	echo "== every gorouter routes doppler.$SYSTEM_DOMAIN to the traffic controller and log-stream.$SYSTEM_DOMAIN to the RLP gateway"
	for ip in $routers; do
		# host path status header body: what the backend answers unauthenticated.
		for want in "doppler /firehose/cf-slice-acceptance 401 ^www-authenticate:[[:space:]]*basic" "log-stream /v2/read?log 404 ^content-type:"; do
			read -r host path code_want header_want <<<"$want"
			code="" ok=""
			for _ in $(seq 1 180); do
				rm -f "$work/headers" "$work/body"
				code=$(curl -s -D "$work/headers" -o "$work/body" -w '%{http_code}' -m 5 -H "Host: $host.$SYSTEM_DOMAIN" "http://$ip$path" || true)
				if [ "$code" = "$code_want" ] && ! grep -qi '^x-cf-routererror:' "$work/headers" && grep -Eqi "$header_want" "$work/headers"; then
					if [ "$host" = doppler ] || jq -e '.error == "not_found"' "$work/body" >/dev/null 2>&1; then
						ok=1
						break
					fi
				fi
				sleep 1
			done
			echo "router $ip, $host.$SYSTEM_DOMAIN$path: $code $(grep -i '^x-cf-routererror:\|^www-authenticate:' "$work/headers" 2>/dev/null | tr -d '\r' | tr '\n' ' ')$(head -c 200 "$work/body" 2>/dev/null)"
			[ -n "$ok" ] || { echo "FAILED: router $ip answers $host.$SYSTEM_DOMAIN with $code, not the backend's $code_want"; exit 1; }
		done
	done

	echo "== log-cache answers its version inside its instance"
	version=""
	for _ in $(seq 1 60); do
		version=$(lc /api/v1/info 2>/dev/null | jq -r '.version // empty' 2>/dev/null || true)
		[ -z "$version" ] || break
		sleep 2
	done
	echo "log-cache version: ${version:-none}"
	[ -n "$version" ] || { echo "FAILED: log-cache's gateway does not answer /api/v1/info"; exit 1; }
	if [ -f "$LOG_CACHE_RELEASE/src/version" ] && [ "$version" != "$(cat "$LOG_CACHE_RELEASE/src/version")" ]; then
		echo "FAILED: log-cache answers version $version, the release is $(cat "$LOG_CACHE_RELEASE/src/version")"
		exit 1
	fi

	echo "== log-cache's meta lists the components' sources, doppler's ingress above 0"
	meta_and_ingress 300 || { echo "FAILED: agents -> doppler -> log-cache"; exit 1; }

	echo "== a log line sent as an app would (dropsonde over UDP to loggr-udp-forwarder) is read back from log-cache"
	first_log=""
	for pod in $(pod_names_of router); do
		log_round_trip "$pod" 180 || { echo "FAILED: UDP log line not in log-cache"; exit 1; }
		[ -n "$first_log" ] || first_log=$(took "$t")
	done
	echo "deploy to the first log line read back: $first_log"

	echo "== a statsd gauge sent to statsd_injector answers log-cache's PromQL"
	for pod in $(pod_names_of scheduler); do
		gauge_round_trip "$pod" 180 || { echo "FAILED: statsd gauge not in log-cache"; exit 1; }
	done

	echo "== a rolling change of one logging property (roll.yml: doppler's ingress buffer) keeps these true"
	manifest_secret=$("$kubectl" get secrets -n "$ns" -l bosh-injector.io/deploy-state -o jsonpath='{.items[0].metadata.name}')
	deploy_of() { "$kubectl" get secret -n "$ns" "$manifest_secret" -o jsonpath='{.metadata.annotations.bosh-injector\.io/deploy}'; }
	doppler_uids() { "$kubectl" get pods -n "$ns" -l bosh-injector.io/instance-group=doppler -o jsonpath='{range .items[*]}{.metadata.uid}{"\n"}{end}' | sort; }
	dopplers_before=$(doppler_uids)
	# A further ops file in the manifest Secret, after the sandbox's (keys
	# apply in name order): a deploy of a changed manifest.
	"$kubectl" patch secret -n "$ns" "$manifest_secret" --type merge \
		-p "$(jq -n --rawfile roll "$here/roll.yml" '{stringData: {"ops-99-roll.yaml": $roll}}')" >/dev/null
	roll_t=$(now)
	router_pod=$(pod_names_of router | head -1)
	rolled=""
	while [ "$(now)" -lt $((roll_t + 1200)) ]; do
		meta_and_ingress 60 >/dev/null || { echo "FAILED during the roll: $(meta_and_ingress 0)"; exit 1; }
		log_round_trip "$router_pod" 60 >/dev/null || { echo "FAILED during the roll: a log line was not read back"; exit 1; }
		gauge_round_trip "$(pod_names_of scheduler | head -1)" 60 >/dev/null || { echo "FAILED during the roll: a gauge was not answered"; exit 1; }
		d=$(deploy_of)
		gathering=$("$kubectl" get secret -n "$ns" "$manifest_secret" -o jsonpath='{.metadata.labels.bosh-injector\.io/state}')
		[ "$gathering" != Failed ] || { echo "FAILED: the changed manifest's gathering failed"; exit 1; }
		phase=$(jq -r .phase <<<"$d" 2>/dev/null || true)
		echo "$(took "$roll_t"): deploy $phase $(jq -r '.step // ""' <<<"$d" 2>/dev/null); checks 3-5 hold"
		[ "$phase" != Failed ] || { echo "FAILED: the rolling change's deploy failed: $(jq -r .message <<<"$d" 2>/dev/null)"; exit 1; }
		# Done when every doppler instance runs the change (its pod was
		# replaced) and the deploy says so: a deploy's target alone may
		# change before the changed manifest is gathered.
		if [ "$phase" = Deployed ] && [ -z "$(comm -12 <(echo "$dopplers_before") <(doppler_uids))" ]; then
			rolled=1
			break
		fi
	done
	[ -n "$rolled" ] || { echo "FAILED: the rolling change is not Deployed after $(took "$roll_t")"; exit 1; }
	roll_took=$(took "$roll_t")
	replaced=$(comm -13 <(echo "$dopplers_before") <(doppler_uids) | grep -c . || true)
	echo "rolling change Deployed in $roll_took, $replaced of $(grep -c . <<<"$dopplers_before") doppler pods replaced"
	[ "$replaced" -gt 0 ] || { echo "FAILED: the rolling change replaced no doppler pod"; exit 1; }
fi

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
if [ -n "$logging" ]; then
	echo "== the gathering is Gathered; the deployment's Warning Events"
	gathering=$("$kubectl" get secrets -n "$ns" -l bosh-injector.io/deploy-state -o jsonpath='{.items[*].metadata.labels.bosh-injector\.io/state}')
	echo "gathering: $gathering"
	"$kubectl" get events -n "$ns" --field-selector type=Warning -o go-template='{{range .items}}{{.reason}}: {{.message}}{{"\n"}}{{end}}' | sort | uniq -c || true
	[ "$gathering" = Gathered ] || { echo "FAILED: the gathering is $gathering"; exit 1; }
fi
echo "PASSED: release images cold $cold, warm $warm; deploy to the first 200 $first200${logging:+; deploy to the first log line read back $first_log; rolling change Deployed in $roll_took}"
