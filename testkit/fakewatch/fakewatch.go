// Package fakewatch tells when an informer's watch of a fake client has
// begun. A fake's watch misses what is written between the informer's list
// and its watch (it keeps no history to resume from), so a test or an
// example that writes before then may lose the event: under load, a test
// waiting for it failed, and an example hung.
package fakewatch

import (
	"errors"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/watch"
	clienttesting "k8s.io/client-go/testing"
)

// Begun makes fake's watches go to tracker, as its own reactor does, and
// returns a function that waits, up to 10 s, until the first has begun.
func Begun(fake *clienttesting.Fake, tracker clienttesting.ObjectTracker) (wait func() error) {
	begun := make(chan struct{})
	var once sync.Once
	fake.PrependWatchReactor("*", func(action clienttesting.Action) (bool, watch.Interface, error) {
		w, err := tracker.Watch(action.GetResource(), action.GetNamespace())
		once.Do(func() { close(begun) })
		return true, w, err
	})
	return func() error {
		select {
		case <-begun:
			return nil
		case <-time.After(10 * time.Second):
			return errors.New("fakewatch: no watch began within 10 s")
		}
	}
}
