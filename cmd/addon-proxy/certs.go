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
	log               logr.Logger

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   string // the files' modification times and sizes
	checked time.Time
}

func (c *certReloader) tlsConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return c.load() }}
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
			c.log.Error(err, "reloading the serving certificate: keeping the previous one", "certFile", c.certFile)
			return c.cert, nil
		}
		// tls's errors name the files and what is wrong, not the key.
		return nil, fmt.Errorf("serving certificate: %w", err)
	}
	c.cert, c.stamp = &cert, stamp
	return c.cert, nil
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
