package gathering

import (
	"context"
	"fmt"
	"os"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/names"
)

// Events is a Progress recording each stage as an Event on the manifest
// Secret, written at once: the gathering process ends right after its work,
// before a buffering recorder would flush. A failed write loses only that
// Event, never the gathering.
func Events(ctx context.Context, c client.Client, log logr.Logger) Progress {
	host, _ := os.Hostname()
	return func(manifest *corev1.Secret, eventType, reason, message string) {
		now := metav1.NowMicro()
		ev := &eventsv1.Event{
			// Named as client-go's recorders name Events (a generated name
			// would end in the '.' that names may not end in).
			ObjectMeta:          metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", manifest.Name, now.UnixNano()), Namespace: manifest.Namespace},
			EventTime:           now,
			ReportingController: names.Prefix + "gather",
			ReportingInstance:   host,
			Action:              "Gather",
			Reason:              reason,
			Note:                message,
			Type:                eventType,
			Regarding: corev1.ObjectReference{APIVersion: "v1", Kind: "Secret", Namespace: manifest.Namespace,
				Name: manifest.Name, UID: manifest.UID, ResourceVersion: manifest.ResourceVersion},
		}
		log.Info("gathering stage", "reason", reason, "message", message)
		if err := c.Create(ctx, ev); err != nil {
			log.Info("recording a progress Event failed", "reason", reason, "error", err.Error())
		}
	}
}
