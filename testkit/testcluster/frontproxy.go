package testcluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"
)

// FrontProxyClientName is the common name of the API server's front-proxy
// client certificate, the one name --requestheader-allowed-names allows.
const FrontProxyClientName = "front-proxy-client"

// frontProxyFlags makes a front-proxy CA and the API server's client
// certificate from it in dir, and returns the flags that make the API
// server's aggregation layer send them: the requestheader settings it
// then publishes in ConfigMap kube-system/extension-apiserver-authentication,
// and the certificate it presents to an APIService's backend.
func frontProxyFlags(dir string) (map[string]string, []byte, error) {
	certFile, keyFile, caFile := filepath.Join(dir, "front-proxy-client.crt"), filepath.Join(dir, "front-proxy-client.key"), filepath.Join(dir, "front-proxy-ca.crt")
	caPEM, err := WriteCertificate(FrontProxyClientName, x509.ExtKeyUsageClientAuth, certFile, keyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("testcluster: the front-proxy PKI: %w", err)
	}
	if err := os.WriteFile(caFile, caPEM, 0o600); err != nil {
		return nil, nil, fmt.Errorf("testcluster: the front-proxy PKI: %w", err)
	}
	return map[string]string{
		"requestheader-client-ca-file":       caFile,
		"requestheader-allowed-names":        FrontProxyClientName,
		"requestheader-username-headers":     "X-Remote-User",
		"requestheader-uid-headers":          "X-Remote-Uid",
		"requestheader-group-headers":        "X-Remote-Group",
		"requestheader-extra-headers-prefix": "X-Remote-Extra-",
		"proxy-client-cert-file":             certFile,
		"proxy-client-key-file":              keyFile,
	}, caPEM, nil
}

// WriteCertificate makes a CA of its own and a certificate of it for cn,
// valid for a week, for usage (a server's is also for the DNS name cn),
// writes the certificate and its key as PEM to certFile and keyFile, and
// returns the CA's certificate (PEM): what a client of the server, or a
// server of the client, trusts.
func WriteCertificate(cn string, usage x509.ExtKeyUsage, certFile, keyFile string) ([]byte, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "authvault CA for " + cn},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(7 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(7 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
	}
	if usage == x509.ExtKeyUsageServerAuth {
		tmpl.DNSNames = []string{cn}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	for file, block := range map[string]*pem.Block{certFile: {Type: "CERTIFICATE", Bytes: der}, keyFile: {Type: "PRIVATE KEY", Bytes: keyDER}} {
		if err := os.WriteFile(file, pem.EncodeToMemory(block), 0o600); err != nil {
			return nil, err
		}
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), nil
}
