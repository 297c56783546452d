package shard

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
)

// The group's Leases: labelled with the group, each holding its replica's
// identity and, in an annotation, the view its share is computed over.
// The exported ones are those the fleet's tests read and write.
const (
	GroupLabel = "fleet.authvault.dev/group"
	// ReplicaLabel and ClustersLabel are for a person, not the protocol:
	// the replica's identity (when it is a valid label value) and how many
	// clusters it owns, as of its last write, so that kubectl get leases
	// -L shows who owns how much (the Lease's name is a hash).
	ReplicaLabel   = "fleet.authvault.dev/replica"
	ClustersLabel  = "fleet.authvault.dev/clusters"
	ViewAnnotation = "fleet.authvault.dev/view"
	// ReleasedAnnotation marks the Lease of a replica that holds nothing:
	// it stopped cleanly, or stands by. Its peers take its clusters at once.
	ReleasedAnnotation = "fleet.authvault.dev/released"
	// incarnationAnnotation tells one process's writes from another's of
	// the same identity.
	incarnationAnnotation = "fleet.authvault.dev/incarnation"
	// rulesAnnotation is the version of the placement rules the view is
	// computed by (coreRules); none means 1.
	rulesAnnotation = "fleet.authvault.dev/rules"
	// durationAnnotation is the holder's LeaseDuration, exactly (the
	// spec's leaseDurationSeconds rounds it up to a second): its peers
	// expire the Lease on it.
	durationAnnotation = "fleet.authvault.dev/lease-duration"
	// leaseFinalizer keeps a replica's Lease on the hub while it may
	// claim a cluster: a delete only marks it (see core).
	leaseFinalizer = "fleet.authvault.dev/shard"
)

// LeaseName is the name of identity's Lease in group: the same across the
// replica's restarts, a valid name whatever the identity holds. (Exported
// for the fleet's tests, as OwnerOf, CloseWait and HookWait are.)
func LeaseName(group, identity string) string {
	sum := sha256.Sum256([]byte(identity))
	return group + "-" + hex.EncodeToString(sum[:8])
}

// inGroup tells whether a Lease of this name is one of group's: the group,
// a dash and sixteen hex digits. The group's Leases are found by name,
// not by their label: a person who relabels one (kubectl label, an apply
// that prunes labels) must not hide a replica that holds clusters.
func inGroup(group, name string) bool {
	rest, ok := strings.CutPrefix(name, group+"-")
	if !ok || len(rest) != 16 {
		return false
	}
	_, err := hex.DecodeString(rest)
	return err == nil && strings.ToLower(rest) == rest
}

// record decodes a peer's Lease as the core reads it; false for this
// replica's own Lease and for a Lease not of the group. A Lease of the
// group's name without its view annotation (a person's edit) is
// unreadable: it may claim any cluster.
func (s *Driver) record(l *coordinationv1.Lease) (leaseRecord, bool) {
	if l.Name == s.lease || !inGroup(s.cfg.Group, l.Name) || !s.marksOf(l) {
		return leaseRecord{}, false
	}
	encoded, annotated := l.Annotations[ViewAnnotation]
	if !annotated {
		encoded = "not annotated" // unreadable
	}
	r := leaseRecord{name: l.Name, holder: ptr.Deref(l.Spec.HolderIdentity, ""), rv: l.ResourceVersion,
		released: l.Annotations[ReleasedAnnotation] == "true", rules: 1,
		guarded: slices.Contains(l.Finalizers, leaseFinalizer), marked: l.DeletionTimestamp != nil}
	r.readable = json.Unmarshal([]byte(encoded), &r.view) == nil
	if v, ok := l.Annotations[rulesAnnotation]; ok {
		n, err := strconv.Atoi(v)
		r.rules = n
		r.readable = r.readable && err == nil && n > 0
	}
	if d, err := time.ParseDuration(l.Annotations[durationAnnotation]); err == nil && d > 0 {
		r.duration = d
	} else if sec := ptr.Deref(l.Spec.LeaseDurationSeconds, 0); sec > 0 {
		r.duration = time.Duration(sec) * time.Second
	}
	return r, true
}

// marksOf tells whether a replica of this package wrote l: it carries
// the finalizer, the group's label or one of the package's annotations. A
// Lease of a group's name with none of them is another tool's: neither
// counted nor ever deleted.
func (s *Driver) marksOf(l *coordinationv1.Lease) bool {
	if slices.Contains(l.Finalizers, leaseFinalizer) || l.Labels[GroupLabel] == s.cfg.Group {
		return true
	}
	for k := range l.Annotations {
		if strings.HasPrefix(k, "fleet.authvault.dev/") {
			return true
		}
	}
	return false
}

// list lists the Leases of Namespace from the hub, not from a cache: a
// quorum read, which sees every write that ended before it began. The
// group's are those of its names (inGroup).
func (s *Driver) list(ctx context.Context, timeout time.Duration) ([]coordinationv1.Lease, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	list, err := s.leases.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// write writes content into this replica's Lease within timeout: an
// Update of the copy it last wrote, a Create at once when that Lease was
// deleted, or a Get and an Update when it has no copy (the first write, a
// conflict). It says what it found for the core.
func (s *Driver) write(ctx context.Context, content leaseContent, timeout time.Duration) (writeResult, error) {
	res := writeResult{start: s.clock.Now()}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	l, err := s.writeLease(ctx, content, &res)
	res.end = s.clock.Now()
	if err != nil {
		s.mine = nil // read it again at the next attempt
		return res, err
	}
	s.mine = l
	res.ok, res.uid, res.marked = true, string(l.UID), l.DeletionTimestamp != nil
	if res.marked {
		res.heldBy = slices.DeleteFunc(slices.Clone(l.Finalizers), func(f string) bool { return f == leaseFinalizer })
	}
	if content.free {
		// Gone, unless another finalizer holds it: then it stays marked.
		res.marked = l.DeletionTimestamp != nil && len(l.Finalizers) > 0
		if !res.marked {
			s.mine = nil // the next write creates one
		}
	}
	return res, nil
}

func (s *Driver) writeLease(ctx context.Context, content leaseContent, res *writeResult) (*coordinationv1.Lease, error) {
	now := metav1.NewMicroTime(s.clock.Now())
	if s.mine != nil {
		l := s.mine.DeepCopy()
		s.fill(l, content, now)
		updated, err := s.leases.Update(ctx, l, metav1.UpdateOptions{})
		switch {
		case apierrors.IsNotFound(err):
			res.gone = true // deleted under this replica: written again at once
		case apierrors.IsConflict(err):
			// Changed under it (marked for deletion, a finalizer taken
			// off): read it again and write it at once.
		default:
			return updated, err
		}
	}
	got, err := s.leases.Get(ctx, s.lease, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) && s.foreign != nil && s.clock.Since(s.foreign.since) < s.cfg.LeaseDuration:
		// Another process of this identity wrote it a moment ago, and
		// may still hold its clusters: deleted under it, it is written
		// again by that process, or expires.
		return nil, fmt.Errorf("fleet: the Lease %s/%s of identity %q, renewed by another process, is gone: waiting LeaseDuration before writing it", s.cfg.Namespace, s.lease, s.cfg.Identity)
	case apierrors.IsNotFound(err) && content.free:
		return &coordinationv1.Lease{}, nil // gone already
	case apierrors.IsNotFound(err):
		s.foreign = nil
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: s.lease, Namespace: s.cfg.Namespace}}
		s.fill(l, content, now)
		l.Spec.AcquireTime = &now
		return s.leases.Create(ctx, l, metav1.CreateOptions{})
	case err != nil:
		return nil, err
	}
	if err := s.another(got); err != nil {
		return nil, err
	}
	l := got.DeepCopy()
	s.fill(l, content, now)
	return s.leases.Update(ctx, l, metav1.UpdateOptions{})
}

// another returns an error while got, this identity's Lease, is renewed by
// another process: a duplicate of this identity, or this replica before a
// restart (killed: its Lease stops changing). This process writes it only
// once it has seen it unchanged for LeaseDuration, or released: two
// processes of one identity would both own its clusters.
func (s *Driver) another(got *coordinationv1.Lease) error {
	inc := got.Annotations[incarnationAnnotation]
	if inc == "" || inc == s.incarnation || got.Annotations[ReleasedAnnotation] == "true" {
		s.foreign = nil
		return nil
	}
	now := s.clock.Now()
	if s.foreign == nil || s.foreign.version != got.ResourceVersion {
		s.foreign = &foreignLease{version: got.ResourceVersion, since: now}
	}
	if now.Sub(s.foreign.since) >= s.cfg.LeaseDuration {
		s.foreign = nil
		return nil
	}
	return fmt.Errorf("fleet: the Lease %s/%s of identity %q is renewed by another process (this replica before a restart, or a duplicate: Shards.Identity must be unique in the group): waiting until it has not changed for LeaseDuration", s.cfg.Namespace, s.lease, s.cfg.Identity)
}

// fill writes this replica's identity, content and renewal into l.
func (s *Driver) fill(l *coordinationv1.Lease, content leaseContent, now metav1.MicroTime) {
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	l.Labels[GroupLabel] = s.cfg.Group
	if len(validation.IsValidLabelValue(s.cfg.Identity)) == 0 {
		l.Labels[ReplicaLabel] = s.cfg.Identity
	} else {
		delete(l.Labels, ReplicaLabel) // the holder says it
	}
	l.Labels[ClustersLabel] = strconv.Itoa(s.ownedCount())
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	view, _ := json.Marshal(content.view) // a list of strings always encodes
	if content.view == nil {
		view = []byte("[]")
	}
	l.Annotations[ViewAnnotation] = string(view)
	l.Annotations[incarnationAnnotation] = s.incarnation
	l.Annotations[rulesAnnotation] = strconv.Itoa(coreRules)
	l.Annotations[durationAnnotation] = s.cfg.LeaseDuration.String()
	if content.standby {
		l.Annotations[ReleasedAnnotation] = "true"
	} else {
		delete(l.Annotations, ReleasedAnnotation)
	}
	switch {
	case content.free:
		l.Finalizers = slices.DeleteFunc(l.Finalizers, func(f string) bool { return f == leaseFinalizer })
	case l.DeletionTimestamp == nil && !slices.Contains(l.Finalizers, leaseFinalizer):
		// Never added to a Lease marked for deletion: the API server
		// refuses it, and the holder lets that one go.
		l.Finalizers = append(l.Finalizers, leaseFinalizer)
	}
	l.Spec.HolderIdentity = ptr.To(s.cfg.Identity)
	l.Spec.LeaseDurationSeconds = ptr.To(int32((s.cfg.LeaseDuration + time.Second - 1) / time.Second))
	l.Spec.RenewTime = &now
}

// remove takes the finalizer off a peer's Lease and deletes it, if it is
// still at version (a Lease that has changed since is alive again, or
// another's).
func (s *Driver) remove(ctx context.Context, name, version string) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RetryPeriod)
	defer cancel()
	s.listedMu.Lock()
	l := s.listed[name]
	s.listedMu.Unlock()
	if l == nil || l.ResourceVersion != version {
		return nil
	}
	return s.letGoOf(ctx, l)
}

// letGoOf takes the finalizer off l and deletes it, both at the version
// l is at: a write meanwhile (its holder alive again) stops both.
func (s *Driver) letGoOf(ctx context.Context, l *coordinationv1.Lease) error {
	if slices.Contains(l.Finalizers, leaseFinalizer) {
		l = l.DeepCopy()
		l.Finalizers = slices.DeleteFunc(l.Finalizers, func(f string) bool { return f == leaseFinalizer })
		// This version claims nothing: a list before the Delete, or a
		// Delete that never lands, must not show its holder alive again.
		if l.Annotations == nil {
			l.Annotations = map[string]string{}
		}
		l.Annotations[ReleasedAnnotation] = "true"
		updated, err := s.leases.Update(ctx, l, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if updated.DeletionTimestamp != nil && len(updated.Finalizers) == 0 {
			return nil // the API server deleted it with the update
		}
		l = updated
	}
	version := l.ResourceVersion
	err := s.leases.Delete(ctx, l.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &version}})
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
func (s *Driver) watchLeases(ctx context.Context) {
	known := map[string]string{}
	for ctx.Err() == nil {
		// The group's label narrows the watch to its Leases (a namespace
		// may hold many others'): the watch only wakes the loop, whose
		// lists find the group's Leases by name, a relabelled one too (it
		// leaves the watch as a deletion, which wakes the loop).
		w, err := s.leases.Watch(ctx, metav1.ListOptions{LabelSelector: GroupLabel + "=" + s.cfg.Group})
		if err == nil {
			for ev := range w.ResultChan() {
				l, ok := ev.Object.(*coordinationv1.Lease)
				if !ok || l.Name == s.lease || !inGroup(s.cfg.Group, l.Name) {
					continue
				}
				what := ptr.Deref(l.Spec.HolderIdentity, "") + "\x00" + l.Annotations[ViewAnnotation] + "\x00" + l.Annotations[ReleasedAnnotation]
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
		case <-s.clock.After(s.cfg.RetryPeriod):
		}
	}
}

// release marks this replica's Lease released, with an empty view, takes
// its finalizer off and deletes it: its peers take its clusters at once.
func (s *Driver) release(ctx context.Context) error {
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
	s.fill(l, leaseContent{standby: true, free: true}, metav1.NewMicroTime(s.clock.Now()))
	updated, err := s.leases.Update(ctx, l, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) { // changed since (marked): read it again
		got, gerr := s.leases.Get(ctx, s.lease, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(gerr):
			return nil
		case gerr != nil:
			return gerr
		case got.Annotations[incarnationAnnotation] != s.incarnation:
			return nil
		}
		l = got.DeepCopy()
		s.fill(l, leaseContent{standby: true, free: true}, metav1.NewMicroTime(s.clock.Now()))
		updated, err = s.leases.Update(ctx, l, metav1.UpdateOptions{})
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	case updated.DeletionTimestamp != nil:
		return nil // deleted with the update
	}
	return s.letGoOf(ctx, updated)
}

// ownedCount is how many of the fleet's clusters this replica owns now
// (has a member for), for ClustersLabel.
func (s *Driver) ownedCount() int {
	s.host.Lock()
	defer s.host.Unlock()
	return s.host.OwnedLocked()
}
