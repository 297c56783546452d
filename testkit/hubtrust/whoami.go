package hubtrust

import (
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/authvault/authvault/testkit/testwait"
)

// WhoAmI lists namespaces on the member with cfg, failing t when that
// fails, and returns whom the member's API server sees
// (SelfSubjectReview): the identity a cloud's token or the hub's speaks
// for.
func WhoAmI(t testing.TB, cfg *rest.Config) string {
	t.Helper()
	ctx := testwait.Context(t)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("listing namespaces on the member: %v", err)
	}
	review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return review.Status.UserInfo.Username
}
