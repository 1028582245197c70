// Package status is the operator's contract with the webhook, the client
// commands and the tests: what its controllers write on a deployment's
// manifest Secret (the job runner's gathering status, the deploy
// controller's deploy status), their Event reasons, the gather container's
// exit codes, and the one test of which Secret is a manifest. It holds no
// controller, so reading a status never imports one.
package status

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"reflect"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bosh-injector/bosh-injector/gather/model/update"
	"github.com/bosh-injector/bosh-injector/gather/names"
)

// Event reasons, also the states of the status annotation.
const (
	ReasonInvalidManifest = "InvalidManifest"
	ReasonGatherStarted   = "GatherStarted"
	ReasonGathered        = "Gathered"
	ReasonGatherFailed    = "GatherFailed"
	// ReasonNotAccepted: a gathering succeeded but did not report the
	// versions it wrote, so none is accepted (see package trust).
	ReasonNotAccepted = "VersionsNotAccepted"
	// ReasonRegenerating: a generated variable Secret was deleted.
	ReasonRegenerating = "RegeneratingVariables"
	// ReasonForeignJob: a Job of a gathering's name that the runner did
	// not create; it is deleted and the runner creates its own.
	ReasonForeignJob = "ForeignGatherJob"
)

// Exit codes of the gather container: bad input fails the Job at once, as
// retrying cannot help; an API error is retried up to the backoff limit.
const (
	ExitInvalidInput = 1
	ExitTransient    = 3
)

// JobsDir is where the gathering Job's copy init containers put the releases'
// jobs, and where gather reads them.
const JobsDir = "/var/vcap/all-releases/jobs-src"

// LabelComponent marks the objects the runner creates for a deployment.
const (
	LabelComponent  = "app.kubernetes.io/component"
	ComponentGather = "gather"
)

// Gathering is the JSON of the manifest Secret's status annotation, which
// the job runner writes.
type Gathering struct {
	State   string `json:"state"`
	Digest  string `json:"digest,omitempty"`
	Job     string `json:"job,omitempty"`
	Message string `json:"message,omitempty"`
	// Versions is the resolved version of each instance group (by its
	// label value) after a successful gathering: what the deploy
	// controller (package rollout) rolls out, following Plan.
	Versions map[string]int `json:"versions,omitempty"`
	// BPM is each group's BPM info version beside Versions: a new one
	// alone (rebuilt release images) is rolled out too.
	BPM  map[string]int `json:"bpm,omitempty"`
	Plan update.Plan    `json:"plan,omitempty"`
	// Regenerations counts the gatherings started because a generated
	// variable Secret was deleted after a successful gathering; it is part
	// of the digest, so the same inputs gather again and regenerate it.
	Regenerations int `json:"regenerations,omitempty"`
	// VariableSet is the accepted variable set Secret, with a config
	// server: the ids `variables` lists.
	VariableSet string `json:"variableSet,omitempty"`
	// LastChange is when any other field last changed (RFC 3339).
	LastChange string `json:"lastChange,omitempty"`
}

// states are the values of the manifest Secret's state label, by the
// reason the status annotation records.
var states = map[string]string{
	ReasonGatherStarted:   "Gathering",
	ReasonGathered:        "Gathered",
	ReasonGatherFailed:    "Failed",
	ReasonInvalidManifest: "Invalid",
}

// Same is whether a and b differ in nothing but LastChange.
func (a Gathering) Same(b Gathering) bool {
	return a.State == b.State && a.Digest == b.Digest && a.Job == b.Job && a.Message == b.Message && maps.Equal(a.Versions, b.Versions) && maps.Equal(a.BPM, b.BPM) && reflect.DeepEqual(a.Plan, b.Plan) && a.Regenerations == b.Regenerations && a.VariableSet == b.VariableSet
}

// IsManifest is true of a deployment's manifest Secret, the one test of it:
// labelled with a deployment, of no Secret kind (the versioned Secrets
// gathering writes carry one), holding the manifest.
func IsManifest(o client.Object) bool {
	s, ok := o.(*corev1.Secret)
	if !ok || s.Labels[names.LabelDeployment] == "" {
		return false
	}
	_, kind := s.Labels[names.LabelSecretKind]
	return !kind && s.Data[names.ManifestKey] != nil
}

// ManifestCandidates selects a namespace's Secrets that may be manifests:
// labelled with a deployment, of no Secret kind (the versioned Secrets, most
// of a deployment's and the largest, are left out by the selector).
var ManifestCandidates = labels.NewSelector().Add(
	must(labels.NewRequirement(names.LabelDeployment, selection.Exists, nil)),
	must(labels.NewRequirement(names.LabelSecretKind, selection.DoesNotExist, nil)))

func must(r *labels.Requirement, err error) labels.Requirement {
	if err != nil {
		panic(err)
	}
	return *r
}

// ManifestSecrets are the manifest Secrets of a deployment in namespace,
// read through c with opts (a cache's reader may pass
// client.UnsafeDisableDeepCopy). Users label objects with BOSH names as they
// are, so labels are compared after sanitizing.
func ManifestSecrets(ctx context.Context, c client.Reader, namespace, deployment string, opts ...client.ListOption) ([]*corev1.Secret, error) {
	var list corev1.SecretList
	opts = append([]client.ListOption{client.InNamespace(namespace), client.MatchingLabelsSelector{Selector: ManifestCandidates}}, opts...)
	if err := c.List(ctx, &list, opts...); err != nil {
		return nil, err
	}
	var out []*corev1.Secret
	for i := range list.Items {
		s := &list.Items[i]
		if IsManifest(s) && names.LabelValue(s.Labels[names.LabelDeployment]) == names.LabelValue(deployment) {
			out = append(out, s)
		}
	}
	return out, nil
}

// ManifestRequests are reconcile requests for the manifest Secrets of a
// deployment in namespace.
func ManifestRequests(ctx context.Context, c client.Reader, namespace, deployment string) ([]reconcile.Request, error) {
	secrets, err := ManifestSecrets(ctx, c, namespace, deployment)
	var reqs []reconcile.Request
	for _, s := range secrets {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(s)})
	}
	return reqs, err
}

// JobCondition says whether job has condition t.
func JobCondition(job *batchv1.Job, t batchv1.JobConditionType) bool {
	return slices.ContainsFunc(job.Status.Conditions, func(c batchv1.JobCondition) bool {
		return c.Type == t && c.Status == corev1.ConditionTrue
	})
}

// GatheringOf reads a manifest Secret's status annotation; a Secret without
// one has the zero Status.
func GatheringOf(s *corev1.Secret) Gathering {
	var st Gathering
	_ = json.Unmarshal([]byte(s.Annotations[names.AnnotationStatus]), &st)
	return st
}

// StateOf is the manifest Secret's state label for the reason a gathering
// status records.
func StateOf(reason string) string { return states[reason] }

// Event reasons; the failure reasons are also the deploy's status message
// prefix.
const (
	// ReasonUpdating: a step of an instance group's update was released.
	ReasonUpdating = "UpdatingInstances"
	// ReasonDeployed: every instance group is on the accepted version.
	ReasonDeployed = "Deployed"
	// ReasonDeployFailed: an instance was not running after its update;
	// the deploy stopped there.
	ReasonDeployFailed = "DeployFailed"
)

// Phases of a deploy, the values of the manifest Secret's deploy-state
// label.
const (
	PhaseDeploying = "Deploying"
	PhaseDeployed  = "Deployed"
	PhaseFailed    = "Failed"
)

// Deploy is the JSON of the manifest Secret's deploy annotation, which the
// deploy controller writes.
type Deploy struct {
	// Target identifies the configuration version deployed: the resolved
	// versions and the update plan.
	Target string `json:"target"`
	// Retry is the retry annotation's value this attempt started with.
	Retry string `json:"retry,omitempty"`
	Phase string `json:"phase"`
	// Step says where the deploy is: group, canary or batch, instances.
	Step    string `json:"step,omitempty"`
	Updated int    `json:"updated"`
	Total   int    `json:"total"`
	Message string `json:"message,omitempty"`
	// Groups are the groups the deploy reached, by name.
	Groups  map[string]*Group `json:"groups,omitempty"`
	Started string            `json:"started,omitempty"`
	// Finished is when the deploy ended, deployed or failed.
	Finished string `json:"finished,omitempty"`
	// Instances is, per StatefulSet, how many of its instances (the
	// ordinals below) the deploys started: the webhook holds the pods of
	// the others with a scheduling gate until the deploy starts them. It
	// is carried from deploy to deploy.
	Instances map[string]int `json:"instances,omitempty"`
	// Unplaced are the instance groups with instances and a configuration
	// that no StatefulSet places when the deploy ends: nothing runs them,
	// where the director would have created their VMs.
	Unplaced []string `json:"unplaced,omitempty"`
}

// Group is an instance group's update in a deploy.
type Group struct {
	Phase string `json:"phase"`
	// Sets are the group's StatefulSets in AZ order, Replicas their sizes
	// when the update started. Of each, the update starts the new
	// instances from Started up, lowest first, then replaces the ones
	// below Updating through the partition, highest first; Steps are its
	// steps over them, as the director takes a group's new and changed
	// instances.
	Sets     []string      `json:"sets,omitempty"`
	Replicas []int         `json:"replicas,omitempty"`
	Updating []int         `json:"updating,omitempty"`
	Started  []int         `json:"started,omitempty"`
	Steps    []update.Step `json:"steps,omitempty"`
	// Step is the last released step, -1 before the first.
	Step int `json:"step"`
	// Released is when Step was released (RFC 3339, nanoseconds).
	Released string `json:"released,omitempty"`
}

// DeployOf reads a manifest Secret's deploy annotation.
func DeployOf(s *corev1.Secret) Deploy {
	var st Deploy
	_ = json.Unmarshal([]byte(s.Annotations[names.AnnotationDeploy]), &st)
	return st
}

// CurrentDeploy reads a manifest Secret's deploy annotation and says whether it is the
// deploy of the versions the runner accepted last.
func CurrentDeploy(s *corev1.Secret) (Deploy, bool) {
	st := DeployOf(s)
	return st, st.Target == Target(GatheringOf(s))
}

// Target identifies a configuration version: what the runner accepted.
func Target(st Gathering) string {
	data, _ := json.Marshal(struct {
		Versions map[string]int
		BPM      map[string]int `json:",omitempty"`
		Plan     update.Plan
	}{st.Versions, st.BPM, st.Plan})
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

// States are the manifest Secret's state label values, for metrics that
// count manifests by state.
func States() []string { return slices.Collect(maps.Values(states)) }
