package integration

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/vault"
)

var _ = Describe("An authenticator outage", func() {
	It("gives callers a LoginError by their deadline, writes nothing twice, and serves within 2 s of its end", func(ctx SpecContext) {
		const outage, deadline = 20 * time.Second, 2 * time.Second
		ns := newNamespace("outage")
		v := vault.New(vault.Options{NoFallback: true})
		DeferCleanup(v.Close)
		v.OnLogin(func(context.Context) (*login.ConnectionInfo, error) {
			info := cluster.Token(cluster.Issuer.Issue(0))
			return &info, nil
		}, login.ID("issuer"), login.Backoff(250*time.Millisecond, time.Second))
		cfg, err := v.RESTConfig(ctx)
		Expect(err).NotTo(HaveOccurred())
		cfg.QPS = -1
		cs, err := kubernetes.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())

		var created, loginErrors, unauthorized, timedOut, late atomic.Int64
		var mu sync.Mutex
		var unexpected []error
		create := func(name string) error {
			callCtx, cancel := context.WithTimeout(ctx, deadline)
			defer cancel()
			start := time.Now()
			_, err := cs.CoreV1().ConfigMaps(ns).Create(callCtx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
			if time.Since(start) > deadline+time.Second {
				late.Add(1)
			}
			var le *vault.LoginError
			switch {
			case err == nil:
				created.Add(1)
			case errors.As(err, &le):
				loginErrors.Add(1)
			case apierrors.IsUnauthorized(err):
				unauthorized.Add(1)
			case errors.Is(err, context.DeadlineExceeded):
				// The API server retries a failing webhook for seconds
				// before it answers: the caller's deadline comes first.
				timedOut.Add(1)
			default:
				mu.Lock()
				unexpected = append(unexpected, err)
				mu.Unlock()
			}
			return err
		}
		Expect(create("before")).To(Succeed())

		cluster.Issuer.SetOutage(true)
		outageCtx, stop := context.WithTimeout(ctx, outage)
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				for i := 0; outageCtx.Err() == nil; i++ {
					_ = create(fmt.Sprintf("w%d-%d", w, i))
					time.Sleep(50 * time.Millisecond) // a request rate, not a check
				}
			})
		}
		wg.Wait()
		stop()
		cluster.Issuer.SetOutage(false)
		back := time.Now()
		for i := 0; create(fmt.Sprintf("after-%d", i)) != nil; i++ {
			Expect(time.Since(back)).To(BeNumerically("<", 10*time.Second), "the vault did not recover")
			time.Sleep(50 * time.Millisecond)
		}
		recovery := time.Since(back)

		list, err := admin.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		report("outage of %v: %d LoginErrors, %d 401s, %d calls ended by their deadline while the API server retried its webhook, %d writes, %d answers later than their deadline, served again %v after the end",
			outage, loginErrors.Load(), unauthorized.Load(), timedOut.Load(), created.Load(), late.Load(), recovery)
		Expect(unexpected).To(BeEmpty())
		Expect(late.Load()).To(BeZero(), "every call returned by its deadline")
		Expect(loginErrors.Load()).To(BeNumerically(">", 0))
		Expect(int64(len(list.Items))).To(Equal(created.Load()), "every write that succeeded is there once, and no other")
		Expect(recovery).To(BeNumerically("<", 2*time.Second))
	}, NodeTimeout(2*time.Minute))
})
