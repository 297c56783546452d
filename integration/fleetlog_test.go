package integration

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/authvault/authvault/fleet"
	"github.com/authvault/authvault/testkit/testlog"
	"github.com/authvault/authvault/testkit/testwait"
)

// The API server sends a watch a Secret that no longer matches its label
// selector as deleted, with its labels of before (a fake clientset sends it
// modified): the fleet still tells an unlabelled Secret from a deleted one.
// The clusters are never used, so they never log in.
var _ = Describe("A fleet's log", func() {
	It("says whether a cluster's Secret was unlabelled or deleted", func(ctx SpecContext) {
		ns := newNamespace("fleet-log")
		var logs testlog.Buffer
		joined := make(chan context.Context, 2) // OnAdd's contexts
		f := fleet.New(fleet.Options{Logger: logs.Logger(0), OnAdd: func(ctx context.Context, _ *fleet.Member) { joined <- ctx }})
		DeferCleanup(f.Close)
		wctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- f.WatchSecrets(wctx, fleet.SecretsOptions{Client: admin, Namespace: ns}) }()
		DeferCleanup(func() { cancel(); Expect(<-done).To(Succeed()) })

		secrets := admin.CoreV1().Secrets(ns)
		labelled := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "wl-kubeconfig", Labels: map[string]string{fleet.ClusterNameLabel: "wl"}},
			Data:       map[string][]byte{"value": []byte("apiVersion: v1\nkind: Config\n")},
		}
		_, err := secrets.Create(ctx, labelled, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		var first context.Context
		Eventually(joined).WithTimeout(testwait.Hang).Should(Receive(&first))

		unlabelled, err := secrets.Get(ctx, labelled.Name, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		unlabelled.Labels = nil
		_, err = secrets.Update(ctx, unlabelled, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(first.Done()).WithTimeout(testwait.Hang).Should(BeClosed())
		Expect(context.Cause(first)).To(MatchError(ContainSubstring("its Secret " + ns + "/wl-kubeconfig no longer matches the label selector")))
		Eventually(logs.String).Should(ContainSubstring(`"msg"="cluster left the fleet" "cluster"="` + ns + `/wl"`))

		relabelled, err := secrets.Get(ctx, labelled.Name, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		relabelled.Labels = labelled.Labels
		_, err = secrets.Update(ctx, relabelled, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		var second context.Context
		Eventually(joined).WithTimeout(testwait.Hang).Should(Receive(&second))
		Expect(secrets.Delete(ctx, labelled.Name, metav1.DeleteOptions{})).To(Succeed())
		Eventually(second.Done()).WithTimeout(testwait.Hang).Should(BeClosed())
		Expect(context.Cause(second)).To(MatchError(ContainSubstring("its Secret " + ns + "/wl-kubeconfig was deleted")))
	}, NodeTimeout(time.Minute))
})
