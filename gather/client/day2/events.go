package day2

import (
	"context"
	"regexp"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/operator/status"
)

// Event is a Kubernetes Event of the deployment in the director's event
// vocabulary.
type Event struct {
	Time, User, Action, ObjectType, ObjectName, Instance, Context, Error string
}

// directorEvent is the director's action and object type of an Event's
// reason on an object kind; a reason not listed keeps its own name.
var directorEvent = map[string][2]string{
	"Pod/Scheduled":                {"create", "vm"},
	"Pod/Killing":                  {"delete", "vm"},
	"Pod/Started":                  {"start", "instance"},
	"Pod/BackOff":                  {"restart", "instance"},
	"Pod/Unhealthy":                {"update", "instance"},
	"StatefulSet/SuccessfulCreate": {"create", "instance"},
	"StatefulSet/SuccessfulDelete": {"delete", "instance"},
	"PersistentVolumeClaim/ProvisioningSucceeded": {"create", "disk"},
	"Secret/" + status.ReasonGatherStarted:        {"update", "deployment"},
	"Secret/" + status.ReasonGathered:             {"update", "deployment"},
	"Secret/" + status.ReasonGatherFailed:         {"update", "deployment"},
	"Secret/" + status.ReasonInvalidManifest:      {"update", "deployment"},
	"Secret/" + status.ReasonUpdating:             {"update", "deployment"},
	"Secret/" + status.ReasonDeployed:             {"update", "deployment"},
	"Secret/" + status.ReasonDeployFailed:         {"update", "deployment"},
}

// ordinal ends a StatefulSet pod's name.
var ordinal = regexp.MustCompile(`-[0-9]+$`)

// Events are the Events of the deployment's manifest Secret, StatefulSets,
// their pods and claims, oldest first.
func (d *Deployment) Events(ctx context.Context) ([]Event, error) {
	var sets appsv1.StatefulSetList
	if err := d.Client.List(ctx, &sets, client.InNamespace(d.Namespace)); err != nil {
		return nil, err
	}
	var owners []string
	for _, s := range sets.Items {
		if s.Spec.Template.Labels[names.LabelDeployment] == names.LabelValue(d.Name()) {
			owners = append(owners, s.Name)
		}
	}
	var pods corev1.PodList
	if err := d.Client.List(ctx, &pods, client.InNamespace(d.Namespace), d.selector()); err != nil {
		return nil, err
	}
	instances := map[string]string{}
	for _, in := range Instances(d.Manifest, pods.Items) {
		if in.Pod != nil {
			instances[in.Pod.Name] = in.Name()
		}
	}
	var list corev1.EventList
	if err := d.Client.List(ctx, &list, client.InNamespace(d.Namespace)); err != nil {
		return nil, err
	}
	slices.SortStableFunc(list.Items, func(a, b corev1.Event) int { return eventTime(a).Time.Compare(eventTime(b).Time) })
	var out []Event
	for _, e := range list.Items {
		obj := e.InvolvedObject
		if !d.owns(obj, owners) {
			continue
		}
		action, objType := strings.ToLower(e.Reason), strings.ToLower(obj.Kind)
		if m, ok := directorEvent[obj.Kind+"/"+e.Reason]; ok {
			action, objType = m[0], m[1]
		}
		ev := Event{Time: eventTime(e).UTC().Format("Mon Jan 2 15:04:05 UTC 2006"), User: source(e), Action: action, ObjectType: objType,
			ObjectName: obj.Name, Instance: instances[obj.Name]}
		if obj.Kind == "Secret" {
			ev.ObjectName = d.Name()
		}
		if e.Type == corev1.EventTypeWarning {
			ev.Error = e.Message
		} else {
			ev.Context = e.Message
		}
		out = append(out, ev)
	}
	return out, nil
}

// owns says whether an Event's object is the deployment's: its manifest
// Secret, one of its StatefulSets (owners), their pods or the pods'
// claims ("<claim template>-<pod>").
func (d *Deployment) owns(obj corev1.ObjectReference, owners []string) bool {
	switch obj.Kind {
	case "Secret":
		return obj.Name == d.Secret.Name
	case "StatefulSet":
		return slices.Contains(owners, obj.Name)
	case "Pod", "PersistentVolumeClaim":
		base := ordinal.ReplaceAllString(obj.Name, "")
		return slices.ContainsFunc(owners, func(o string) bool { return base == o || strings.HasSuffix(base, "-"+o) })
	}
	return false
}

func source(e corev1.Event) string {
	if e.ReportingController != "" {
		return e.ReportingController
	}
	return e.Source.Component
}

// EventsTable is `bosh events`' table; IDs number the Events oldest
// first.
func EventsTable(deployment string, events []Event) Table {
	t := Table{Content: "events", Header: []string{"ID", "Time", "User", "Action", "Object Type", "Object Name", "Task ID", "Deployment", "Instance", "Context", "Error"}}
	for i, e := range events {
		t.Sections = append(t.Sections, [][]string{{strconv.Itoa(i + 1), e.Time, e.User, e.Action, e.ObjectType, e.ObjectName, "", deployment, e.Instance, e.Context, e.Error}})
	}
	return t
}

// eventTime is when an Event last happened, as `kubectl events` sorts.
func eventTime(e corev1.Event) metav1.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp
	case !e.EventTime.IsZero():
		return metav1.Time{Time: e.EventTime.Time}
	}
	return e.CreationTimestamp
}
