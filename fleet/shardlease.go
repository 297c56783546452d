package fleet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
)

// The group's Leases: labelled with the group, each holding its replica's
// identity and, in an annotation, the view its share is computed over.
const (
	groupLabel     = "fleet.authvault.dev/group"
	viewAnnotation = "fleet.authvault.dev/view"
	// releasedAnnotation marks the Lease of a replica that stopped
	// cleanly: its peers take its clusters at once.
	releasedAnnotation = "fleet.authvault.dev/released"
	// incarnationAnnotation tells one process's writes from another's of
	// the same identity.
	incarnationAnnotation = "fleet.authvault.dev/incarnation"
)

// leaseName is the name of identity's Lease in group: the same across the
// replica's restarts, a valid name whatever the identity holds.
func leaseName(group, identity string) string {
	sum := sha256.Sum256([]byte(identity))
	return group + "-" + hex.EncodeToString(sum[:8])
}

// peer is another replica's Lease, as this one has seen it.
type peer struct {
	identity string
	version  string    // the Lease's resourceVersion
	seen     time.Time // when this replica first saw that version: the peer was alive then
	released bool      // the peer stopped cleanly and holds nothing
	// view is what the peer's share is computed over: it holds no cluster
	// of which it is not the owner in view. everything is set when the view
	// cannot be read: the peer may hold any cluster.
	view       []string
	everything bool
}

// observe records the group's Leases as listed now: a Lease seen at a new
// version is a peer alive now. A Lease missing from the list counts as one
// that has not changed: its replica is gone LeaseDuration after its last
// change was seen, not at once (it may have been deleted by someone else
// while its replica still holds its clusters). A Lease without this
// package's view annotation is no replica's, and is left alone. It returns
// the Leases unchanged for twice LeaseDuration, to delete, by name, with
// their versions.
func (s *sharding) observe(leases []coordinationv1.Lease, now time.Time) map[string]string {
	listed := make(map[string]bool, len(leases))
	stale := map[string]string{}
	for i := range leases {
		l := &leases[i]
		encoded, ours := l.Annotations[viewAnnotation]
		if l.Name == s.lease || !ours {
			continue
		}
		listed[l.Name] = true
		p := s.peers[l.Name]
		if p == nil || p.version != l.ResourceVersion {
			q := &peer{version: l.ResourceVersion, seen: now, identity: ptr.Deref(l.Spec.HolderIdentity, ""),
				released: l.Annotations[releasedAnnotation] == "true"}
			if err := json.Unmarshal([]byte(encoded), &q.view); err != nil {
				q.everything = true
				if p == nil || !p.everything {
					s.log.Error(err, "a peer's Lease holds a view that cannot be read: the peer may hold any cluster, and none is taken from it", "lease", l.Name, "replica", q.identity)
				}
			}
			p = q
			s.peers[l.Name] = p
		}
		if now.Sub(p.seen) >= 2*s.cfg.LeaseDuration {
			stale[l.Name] = p.version
		}
	}
	for name, p := range s.peers {
		if !listed[name] && now.Sub(p.seen) >= s.cfg.LeaseDuration {
			delete(s.peers, name)
		}
	}
	return stale
}

// live returns the peers seen alive within LeaseDuration, by identity.
func (s *sharding) live(now time.Time) map[string]*peer {
	live := map[string]*peer{}
	for _, p := range s.peers {
		if p.identity != "" && p.identity != s.cfg.Identity && !p.released && now.Sub(p.seen) < s.cfg.LeaseDuration {
			live[p.identity] = p
		}
	}
	return live
}

// list lists the group's Leases from the hub, not from a cache: a quorum
// read, which sees every write that ended before it began.
func (s *sharding) list(ctx context.Context) ([]coordinationv1.Lease, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RenewDeadline-s.cfg.RetryPeriod)
	defer cancel()
	list, err := s.leases.List(ctx, metav1.ListOptions{LabelSelector: groupLabel + "=" + s.cfg.Group})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// write renews this replica's Lease with view, within deadline.
func (s *sharding) write(ctx context.Context, view []string, deadline time.Time) error {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	encoded, err := json.Marshal(view)
	if err != nil {
		return err
	}
	now := metav1.NowMicro()
	if s.mine == nil {
		got, err := s.leases.Get(ctx, s.lease, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err) && s.foreign != nil && time.Since(s.foreign.since) < s.cfg.LeaseDuration:
			// Another process of this identity wrote it a moment ago, and
			// may still hold its clusters: deleted under it, it is
			// written again by that process, or expires.
			return fmt.Errorf("fleet: the Lease %s/%s of identity %q, renewed by another process, is gone: waiting LeaseDuration before writing it", s.cfg.Namespace, s.lease, s.cfg.Identity)
		case apierrors.IsNotFound(err):
			s.foreign = nil
			l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: s.lease, Namespace: s.cfg.Namespace}}
			s.fill(l, encoded, now)
			l.Spec.AcquireTime = &now
			created, err := s.leases.Create(ctx, l, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			s.mine = created
			return nil
		case err != nil:
			return err
		}
		if err := s.another(got); err != nil {
			return err
		}
		s.mine = got
	}
	l := s.mine.DeepCopy()
	s.fill(l, encoded, now)
	updated, err := s.leases.Update(ctx, l, metav1.UpdateOptions{})
	if err != nil {
		s.mine = nil // read it again at the next attempt: a conflict, or deleted as expired
		return err
	}
	s.mine = updated
	return nil
}

// another returns an error while got, this identity's Lease, is renewed by
// another process: a duplicate of this identity, or this replica before a
// restart (killed: its Lease stops changing). This process writes it only
// once it has seen it unchanged for LeaseDuration, or released: two
// processes of one identity would both own its clusters.
func (s *sharding) another(got *coordinationv1.Lease) error {
	inc := got.Annotations[incarnationAnnotation]
	if inc == "" || inc == s.incarnation || got.Annotations[releasedAnnotation] == "true" {
		s.foreign = nil
		return nil
	}
	now := time.Now()
	if s.foreign == nil || s.foreign.version != got.ResourceVersion {
		s.foreign = &foreignLease{version: got.ResourceVersion, since: now}
	}
	if now.Sub(s.foreign.since) >= s.cfg.LeaseDuration {
		s.foreign = nil
		return nil
	}
	return fmt.Errorf("fleet: the Lease %s/%s of identity %q is renewed by another process: waiting until it has not changed for LeaseDuration (Shards.Identity must be unique in the group)", s.cfg.Namespace, s.lease, s.cfg.Identity)
}

// fill writes this replica's identity, view and renewal into l.
func (s *sharding) fill(l *coordinationv1.Lease, view []byte, now metav1.MicroTime) {
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	l.Labels[groupLabel] = s.cfg.Group
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[viewAnnotation] = string(view)
	l.Annotations[incarnationAnnotation] = s.incarnation
	delete(l.Annotations, releasedAnnotation)
	l.Spec.HolderIdentity = ptr.To(s.cfg.Identity)
	l.Spec.LeaseDurationSeconds = ptr.To(int32((s.cfg.LeaseDuration + time.Second - 1) / time.Second))
	l.Spec.RenewTime = &now
}

// remove deletes the Lease name if it is still at version (a Lease that
// has changed since is alive again, or another's).
func (s *sharding) remove(ctx context.Context, name, version string) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RetryPeriod)
	defer cancel()
	err := s.leases.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &version}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// watchLeases wakes the loop when a peer's Lease appears, goes, or
// changes its view, identity or release, so that a replica that joins or
// stops cleanly is seen at once, not at the next tick; a renewal alone
// wakes nothing. The loop lists the Leases itself: the watch only wakes
// it.
func (s *sharding) watchLeases(ctx context.Context) {
	known := map[string]string{}
	for ctx.Err() == nil {
		w, err := s.leases.Watch(ctx, metav1.ListOptions{LabelSelector: groupLabel + "=" + s.cfg.Group})
		if err == nil {
			for ev := range w.ResultChan() {
				l, ok := ev.Object.(*coordinationv1.Lease)
				if !ok || l.Name == s.lease {
					continue
				}
				what := ptr.Deref(l.Spec.HolderIdentity, "") + "\x00" + l.Annotations[viewAnnotation] + "\x00" + l.Annotations[releasedAnnotation]
				if ev.Type == watch.Deleted {
					delete(known, l.Name)
					s.wake()
				} else if known[l.Name] != what {
					known[l.Name] = what
					s.wake()
				}
			}
			w.Stop()
		}
		select {
		case <-ctx.Done():
		case <-time.After(s.cfg.RetryPeriod):
		}
	}
}

// sameView tells whether two views hold the same replicas.
func sameView(a, b []string) bool { return slices.Equal(a, b) }

// release marks this replica's Lease released, with an empty view: its
// peers take its clusters at once, and delete the Lease once it has not
// changed for twice LeaseDuration.
func (s *sharding) release(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RetryPeriod)
	defer cancel()
	l := s.mine
	if l == nil {
		got, err := s.leases.Get(ctx, s.lease, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if got.Annotations[incarnationAnnotation] != s.incarnation {
			return nil // another process's: not this one's to release
		}
		l = got
	}
	l = l.DeepCopy()
	s.fill(l, []byte("[]"), metav1.NowMicro())
	l.Annotations[releasedAnnotation] = "true"
	_, err := s.leases.Update(ctx, l, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
