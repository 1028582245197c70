// Package names holds the names of bosh-injector's contract with the cluster:
// label and annotation keys, and the Kubernetes object names derived from BOSH
// names. Gather writes objects under these names and the webhook reads them,
// so both sides take them from here.
package names

import (
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
)

// Prefix is the label and annotation prefix of every key bosh-injector owns.
const Prefix = "bosh-injector.io/"

// Labels set by users on pod templates and manifest Secrets, and by
// bosh-injector on the objects it creates.
const (
	LabelDeployment    = Prefix + "deployment"
	LabelInstanceGroup = Prefix + "instance-group"
	LabelAZIndex       = Prefix + "az-index"
	LabelInstanceIndex = Prefix + "instance-index"
	// LabelAZ is the instance's AZ, set by the webhook, which the AZ
	// Services of link(x).address(azs: [...]) select.
	LabelAZ         = Prefix + "az"
	LabelSecretKind = Prefix + "secret-kind"
	LabelVersion    = Prefix + "version"
	// LabelResolvedVersion on a BPM info Secret is the version of the
	// resolved properties it names, so pruning keeps the BPM versions of a
	// pinned resolved version without decoding them.
	LabelResolvedVersion = Prefix + "resolved-version"
	// LabelState on a manifest Secret is the state of its last gathering,
	// for `kubectl get secret -L bosh-injector.io/state`.
	LabelState = Prefix + "state"
	// LabelDeployState and LabelDeployStep on a manifest Secret are the
	// phase of its deploy (Deploying, Deployed, Failed) and the step it is
	// at ("api.canary.1-of-3"), for `kubectl get secret -L …`.
	LabelDeployState = Prefix + "deploy-state"
	LabelDeployStep  = Prefix + "deploy-step"
	// LabelAliasPrefix starts the label keys the webhook puts on the pods
	// of every target group of a BOSH DNS alias over several groups; the
	// alias's Service selects them (value "true").
	LabelAliasPrefix = "alias." + Prefix
)

// LabelManagedBy marks objects bosh-injector creates and may delete again.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "bosh-injector"
)

// Annotations.
const (
	// AnnotationInjected records what the webhook added to a pod, so a second
	// pass can strip it and inject again.
	AnnotationInjected = Prefix + "injected"
	// AnnotationResolvedVersion in a pod template makes Kubernetes roll the
	// pods when an instance group's resolved content gets a new version, and
	// pins the pods of that template revision to it: the webhook injects
	// the accepted version of that resolved content, pruning keeps it.
	AnnotationResolvedVersion = Prefix + "resolved-version"
	// AnnotationDeploymentName and AnnotationInstanceGroupName keep the
	// original BOSH names of objects whose names were sanitized.
	AnnotationDeploymentName    = Prefix + "deployment-name"
	AnnotationInstanceGroupName = Prefix + "instance-group-name"
	// AnnotationAlias on the Service of a BOSH DNS alias over several
	// groups is the alias's domain.
	AnnotationAlias = Prefix + "alias"
	// AnnotationStatus on a manifest Secret reports the last gathering.
	AnnotationStatus = Prefix + "status"
	// AnnotationDeploy on a manifest Secret is the deploy's progress
	// (JSON), which the deploy controller resumes from.
	AnnotationDeploy = Prefix + "deploy"
	// AnnotationRedeploy on a manifest Secret, set to a new value, gathers
	// the deployment again as a deploy of an unchanged manifest
	// (`bosh deploy` again): with a config server, at the current values.
	AnnotationRedeploy = Prefix + "redeploy"
	// AnnotationRetryDeploy on a manifest Secret, set to a new value,
	// retries a deploy that stopped at a failed instance.
	AnnotationRetryDeploy = Prefix + "retry-deploy"
	// AnnotationVariable keeps a variable Secret's original variable name.
	AnnotationVariable = Prefix + "variable"
	// AnnotationPlaceholderContainer in a pod template names the container
	// that stands in for the instance's process containers, whose names
	// depend on bpm.yml: the webhook completes it when a process container
	// has its name and removes it otherwise.
	AnnotationPlaceholderContainer = Prefix + "placeholder-container"
	// AnnotationReleaseJobs in a pod template overrides the operator's
	// releaseJobs for its pods: image or copy.
	AnnotationReleaseJobs = Prefix + "release-jobs"
)

// Secret kinds, the values of LabelSecretKind.
const (
	KindResolved = "ig-resolved"
	KindBPM      = "bpm"
	// KindLink is a link a deployment shares with the others of its
	// namespace; the Secret's instance-group label holds the link's name.
	KindLink = "link"
	// KindVariable is a variable Secret gathering generated.
	KindVariable = "variable"
	// KindVariableSet is a deployment's variable set on a config server:
	// the id of each credential version a gathering used, by full name,
	// as the director records them per deploy. Its series' instance-group
	// label is VariableSetSeries: "<deployment>.variables.set-vN".
	KindVariableSet = "variables"
	// VariableSetSeries is the instance-group label of KindVariableSet.
	VariableSetSeries = "set"
)

// VariableSetKey is the key of a variable set Secret: JSON, full name to
// id.
const VariableSetKey = "variables.json"

// LabelDeleteCredentials set to "true" on a manifest Secret asks that the
// deployment's generated variable Secrets be deleted with it; without it
// they outlive the manifest, as a director keeps credentials.
const LabelDeleteCredentials = Prefix + "delete-credentials"

// LinkKey is the key of a shared link Secret holding the link as JSON.
const LinkKey = "link.json"

// ManifestKey is the manifest Secret's key holding the deployment manifest.
const ManifestKey = "manifest.yaml"

// DNS1123Label turns a BOSH name into a DNS-1123 label as the rendering design
// of the quarks operator does: lowercase alphanumerics and '-', '_' becomes
// '-', other characters dropped, no leading or trailing '-'; a result over 63
// characters becomes its first 31 characters followed by the md5 hex of the
// whole name, so distinct long names stay distinct.
func DNS1123Label(name string) string {
	return trimTo(sanitize(name), 63)
}

// DNS1123LabelMax is DNS1123Label with a limit below 63, for a label that
// must also fit into a longer name (a Service address of at most 253
// characters); the md5 suffix makes a limit under 32 unreachable, so the
// result can be longer than max then.
func DNS1123LabelMax(name string, max int) string {
	return trimTo(sanitize(name), min(max, 63))
}

func sanitize(name string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-':
			b.WriteRune(r)
		case r == '_':
			b.WriteByte('-')
		}
	}
	return strings.Trim(b.String(), "-")
}

// trimTo applies the 31-characters-plus-md5 rule to a sanitized name longer
// than max.
func trimTo(s string, max int) string {
	if len(s) <= max {
		return s
	}
	sum := md5.Sum([]byte(s))
	keep := max - 2*md5.Size
	if keep > 31 {
		keep = 31
	}
	if keep < 0 {
		keep = 0
	}
	return strings.TrimRight(s[:keep], "-") + hex.EncodeToString(sum[:])
}

// LabelValue sanitizes a BOSH name for use as a label value; it is the same
// transformation as object names so labels and names always agree.
func LabelValue(name string) string { return DNS1123Label(name) }

// VersionedSecret is the name of version v of a deployment's per-instance-group
// Secret of the given kind: "<deployment>.<kind>.<ig>-v<N>".
func VersionedSecret(deployment, kind, instanceGroup string, version int) string {
	return SecretPrefix(deployment, kind, instanceGroup) + strconv.Itoa(version)
}

// SecretPrefix is the name of a versioned Secret without its version number.
func SecretPrefix(deployment, kind, instanceGroup string) string {
	return fmt.Sprintf("%s.%s.%s-v", DNS1123Label(deployment), kind, DNS1123Label(instanceGroup))
}

// VariableSecret is the name of the Secret holding variable name of a
// deployment: "<deployment>.var-<name>".
func VariableSecret(deployment, variable string) string {
	return DNS1123Label(deployment) + ".var-" + DNS1123Label(variable)
}

// ConfigServerClient is the Secret holding, for a deployment's gathering,
// the UAA client secret of an external config server:
// "<deployment>.config-server-client".
func ConfigServerClient(deployment string) string {
	return DNS1123Label(deployment) + ".config-server-client"
}

// ReleaseImage is the image a release is found in when the manifest gives
// it no `image` (the fissile convention):
// `<url>/<release>:<stemcell os>-<stemcell version>-<release version>`.
// release-image tags what it builds with the same name. A dev version's '+'
// ("56+dev.1"), which image tags do not allow, becomes '_'.
func ReleaseImage(url, release, stemcellOS, stemcellVersion, version string) string {
	return fmt.Sprintf("%s/%s:%s-%s-%s", url, release, stemcellOS, stemcellVersion, strings.ReplaceAll(version, "+", "_"))
}

// KindDNS labels a deployment's DNS records ConfigMaps ("<deployment>.dns-v<N>").
const KindDNS = "dns"

// DNSRecordsKey is the key of a DNS records ConfigMap holding the zone file
// (RFC 1035 master format, as CoreDNS's auto and file plugins read it), and
// DNSZoneKey the key holding the zone's origin.
const (
	DNSRecordsKey = "zone"
	DNSZoneKey    = "origin"
)

// DNSDomain is the domain under which bosh-injector's CoreDNS serves every
// deployment's BOSH names, one zone per deployment and namespace.
const DNSDomain = "bosh-injector.internal"

// DNSZone is the zone of a deployment's BOSH DNS names:
// "<deployment>.<namespace>.bosh-injector.internal". Injected pods get it as
// their first DNS search domain, so a BOSH name such as
// nats.service.cf.internal resolves in the pod's own deployment.
func DNSZone(deployment, namespace string) string {
	return DNS1123Label(deployment) + "." + namespace + "." + DNSDomain
}

// DNSConfigMap is the name of version v of a deployment's DNS records.
func DNSConfigMap(deployment string, version int) string {
	return DNSConfigMapPrefix(deployment) + strconv.Itoa(version)
}

// DNSConfigMapPrefix is DNSConfigMap without its version number.
func DNSConfigMapPrefix(deployment string) string {
	return DNS1123Label(deployment) + "." + KindDNS + "-v"
}
