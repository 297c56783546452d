package eks

import (
	"context"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// maxSharedConfigs bounds the configurations a Native keeps: one per
// profile and region its kubeconfigs name, which a Secret's writer chooses
// (the region); beyond it, a login loads its own, as Login does.
const maxSharedConfigs = 64

// sharedConfigs are the SDK configurations of one Native's logins, by
// profile and region, loaded at the first login that needs one: every
// cluster in a region then shares one credential cache (one web identity
// exchange, one IMDS or Pod Identity call per credential lifetime, not one
// per cluster) and one HTTP client.
type sharedConfigs struct {
	mu      sync.Mutex
	configs map[sharedKey]loaded
}

type sharedKey struct{ region, profile string }

type loaded struct {
	cfg    *aws.Config
	source string
}

// load is loadDefault's configuration for region and profile, loaded once.
// A configuration that does not load is not kept: the next login tries
// again. Loading reads files and the environment only (credentials come at
// the first Retrieve), so it runs under mu.
func (s *sharedConfigs) load(ctx context.Context, region, profile string) (*aws.Config, string, error) {
	key := sharedKey{region, profile}
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, ok := s.configs[key]; ok {
		return l.cfg, l.source, nil
	}
	cfg, source, err := loadDefault(ctx, region, profile)
	if err != nil {
		return nil, source, err
	}
	if len(s.configs) < maxSharedConfigs {
		if s.configs == nil {
			s.configs = map[sharedKey]loaded{}
		}
		s.configs[key] = loaded{cfg, source}
	}
	return cfg, source, nil
}

// size is how many configurations s keeps.
func (s *sharedConfigs) size() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.configs)
}
