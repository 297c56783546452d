package testcluster

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// serviceAccountKeys are the API server's ServiceAccount keys once a test
// has rotated them: every public key it verifies with, the private key it
// signs with, and one published but not yet signing.
type serviceAccountKeys struct {
	verify  []string // public key files
	signing string   // private key file
	next    string   // published, not yet signing; "" for none
}

// PublishServiceAccountKey restarts the API server, after down, with a
// new ServiceAccount key published beside those it verifies with: its
// issuer discovery serves it, and tokens go on being signed with the
// current one. The first step of a rotation that fails no member: a
// member that fetches the keys from then on trusts the new one before it
// signs.
func (c *Cluster) PublishServiceAccountKey(down time.Duration) error {
	if err := c.keepServiceAccountKey(); err != nil {
		return err
	}
	if err := c.newServiceAccountKey(); err != nil {
		return err
	}
	c.setServiceAccountKeys()
	return c.RestartAPIServer(down)
}

// SwitchServiceAccountKey restarts the API server, after down, signing
// with the key PublishServiceAccountKey published, or with a new one at
// once when none was (an abrupt switch). Every earlier key still verifies
// tokens on the API server itself: those signed before stay good there.
func (c *Cluster) SwitchServiceAccountKey(down time.Duration) error {
	if err := c.keepServiceAccountKey(); err != nil {
		return err
	}
	if c.saKeys.next == "" {
		if err := c.newServiceAccountKey(); err != nil {
			return err
		}
	}
	c.saKeys.signing, c.saKeys.next = c.saKeys.next, ""
	c.setServiceAccountKeys()
	return c.RestartAPIServer(down)
}

// newServiceAccountKey writes a new RSA key pair and publishes it as
// next.
func (c *Cluster) newServiceAccountKey() error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	base := filepath.Join(c.dir, "service-account", "key-"+strconv.Itoa(len(c.saKeys.verify)))
	if err := os.WriteFile(base+".key", pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		return fmt.Errorf("testcluster: a new service-account key: %w", err)
	}
	if err := os.WriteFile(base+".pub", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o600); err != nil {
		return fmt.Errorf("testcluster: a new service-account key: %w", err)
	}
	c.saKeys.verify = append(c.saKeys.verify, base+".pub")
	c.saKeys.next = base + ".key"
	return nil
}

func (c *Cluster) setServiceAccountKeys() {
	api := c.Env.ControlPlane.GetAPIServer()
	api.Configure().Set("service-account-key-file", c.saKeys.verify...)
	api.Configure().Set("service-account-signing-key-file", c.saKeys.signing)
}
