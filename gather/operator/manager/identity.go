package manager

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// whoAmI is the user name the apiserver knows the operator by (its
// ServiceAccount's, in a cluster), as `kubectl auth whoami` asks: the
// webhook tells the operator's own StatefulSet updates from users' by it,
// whatever ServiceAccount the chart was given.
func whoAmI(ctx context.Context, cfg *rest.Config) (string, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("asking the apiserver who the operator is (SelfSubjectReview): %w", err)
	}
	return review.Status.UserInfo.Username, nil
}
