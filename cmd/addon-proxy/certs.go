package main

import (
	"crypto/tls"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/go-logr/logr"
)

// certReloader serves the certificate in certFile and keyFile, and reads
// them again when either changes (cert-manager rotating the Secret under a
// mounted volume), checking at most once a second. A pair that does not
// load keeps the previous one in service.
type certReloader struct {
	certFile, keyFile string
	what              string // the certificate, for errors and logs; "" is the serving one
	log               logr.Logger

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   string // the files' modification times and sizes
	checked time.Time
}

// servingTLS is the callers' server's TLS: the certificate of
// --tls-cert-file and --tls-key-file, reloaded as they change, from
// --tls-min-version (TLS 1.2 by default) with --tls-cipher-suites.
func servingTLS(c config, log logr.Logger) (*tls.Config, error) {
	certs := &certReloader{certFile: c.certFile, keyFile: c.keyFile, log: log}
	if _, err := certs.load(); err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion:     max(c.tlsMinVersion, tls.VersionTLS12),
		CipherSuites:   c.tlsCiphers,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return certs.load() },
	}, nil
}

// load returns the current certificate, reading the files again when they
// changed since the last check.
func (c *certReloader) load() (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cert != nil && time.Since(c.checked) < time.Second {
		return c.cert, nil
	}
	c.checked = time.Now()
	stamp, err := c.stampOf()
	if err == nil && stamp == c.stamp && c.cert != nil {
		return c.cert, nil
	}
	cert, loadErr := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err == nil {
		err = loadErr
	}
	if err != nil {
		if c.cert != nil {
			c.log.Error(err, "reloading the "+c.name()+": keeping the previous one", "certFile", c.certFile)
			return c.cert, nil
		}
		// tls's errors name the files and what is wrong, not the key.
		return nil, fmt.Errorf("%s: %w", c.name(), err)
	}
	c.cert, c.stamp = &cert, stamp
	return c.cert, nil
}

func (c *certReloader) name() string {
	if c.what == "" {
		return "serving certificate"
	}
	return c.what
}

func (c *certReloader) stampOf() (string, error) {
	var s string
	for _, f := range []string{c.certFile, c.keyFile} {
		fi, err := os.Stat(f)
		if err != nil {
			return "", err
		}
		s += fmt.Sprintf("%d/%d;", fi.ModTime().UnixNano(), fi.Size())
	}
	return s, nil
}
