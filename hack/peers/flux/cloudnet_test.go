package flux_test

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// cloudNet is the network the clouds' stand-ins answer on: one TLS
// listener whose certificate names whatever host a client asks for
// (signed by a CA of its own), and an HTTP proxy that tunnels every
// CONNECT to it, whatever host it names.
//
// Flux's providers hard-code the clouds' public endpoints and take no
// HTTP client, only a proxy (auth.WithProxyURL) on a clone of
// http.DefaultTransport: through the proxy, sts.us-east-1.amazonaws.com
// or login.microsoftonline.com is the stand-in, and trustCloudCA makes
// http.DefaultTransport trust its CA. Our providers are given the
// listener's URL, as their options allow.
type cloudNet struct {
	caPEM []byte
	ca    *x509.Certificate
	key   *ecdsa.PrivateKey

	srv      *http.Server // the stand-ins', on tls
	tls      net.Listener
	proxy    net.Listener // the CONNECT proxy
	metadata *http.Server // GKE's metadata server, on meta: not on GKE
	meta     net.Listener

	mu    sync.Mutex // guards certs and hosts
	certs map[string]*tls.Certificate
	hosts []string // the hosts of the CONNECTs, in order

	serving sync.WaitGroup
}

// openCloudNet serves h on a new listener and proxy on 127.0.0.1.
func openCloudNet(h http.Handler) (*cloudNet, error) {
	n := &cloudNet{certs: map[string]*tls.Certificate{}}
	var err error
	if n.key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "clouds' stand-in CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &n.key.PublicKey, n.key)
	if err != nil {
		return nil, err
	}
	if n.ca, err = x509.ParseCertificate(der); err != nil {
		return nil, err
	}
	n.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if n.tls, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		return nil, err
	}
	if n.proxy, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		n.tls.Close()
		return nil, err
	}
	if n.meta, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		n.tls.Close()
		n.proxy.Close()
		return nil, err
	}
	n.srv = &http.Server{Handler: h, TLSConfig: &tls.Config{GetCertificate: n.certificate}, ReadHeaderTimeout: 10 * time.Second}
	n.metadata = &http.Server{Handler: http.NotFoundHandler(), ReadHeaderTimeout: 10 * time.Second}
	n.serving.Go(func() { _ = n.srv.ServeTLS(n.tls, "", "") })
	n.serving.Go(func() { _ = n.metadata.Serve(n.meta) })
	n.serving.Go(n.tunnel)
	return n, nil
}

// URL is the stand-ins' own address, for our providers' options.
func (n *cloudNet) URL() string { return "https://" + n.tls.Addr().String() }

// ProxyURL is the proxy's, for Flux's auth.WithProxyURL.
func (n *cloudNet) ProxyURL() url.URL { return url.URL{Scheme: "http", Host: n.proxy.Addr().String()} }

// MetadataHost is the host:port of a GKE metadata server that knows
// nothing (404 to every path), for GCE_METADATA_HOST: Flux asks it for
// the pool of a ServiceAccount with no workload identity provider.
func (n *cloudNet) MetadataHost() string { return n.meta.Addr().String() }

// Close stops the servers, their connections and the proxy, and waits
// for their loops.
func (n *cloudNet) Close() {
	n.srv.Close()
	n.metadata.Close()
	n.proxy.Close()
	n.serving.Wait()
}

// certificate is a certificate for the host the client asked for (its
// SNI), or for 127.0.0.1 when it named an address.
func (n *cloudNet) certificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	host := hello.ServerName
	n.mu.Lock()
	defer n.mu.Unlock()
	if c, ok := n.certs[host]; ok {
		return c, nil
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(int64(len(n.certs) + 2)), Subject: pkix.Name{CommonName: "stand-in " + host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	if host != "" {
		leaf.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, n.ca, &n.key.PublicKey, n.key)
	if err != nil {
		return nil, err
	}
	c := &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: n.key}
	n.certs[host] = c
	return c, nil
}

// tunnel answers each CONNECT with a tunnel to the TLS listener.
func (n *cloudNet) tunnel() {
	var conns sync.WaitGroup
	defer conns.Wait()
	for {
		in, err := n.proxy.Accept()
		if err != nil {
			return
		}
		conns.Go(func() {
			defer in.Close()
			req, err := http.ReadRequest(bufio.NewReader(in))
			if err != nil || req.Method != http.MethodConnect {
				_, _ = io.WriteString(in, "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
				return
			}
			n.mu.Lock()
			n.hosts = append(n.hosts, req.Host)
			n.mu.Unlock()
			out, err := net.Dial("tcp", n.tls.Addr().String())
			if err != nil {
				_, _ = io.WriteString(in, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
				return
			}
			defer out.Close()
			if _, err := io.WriteString(in, "HTTP/1.1 200 Connection Established\r\n\r\n"); err != nil {
				return
			}
			pipe(in, out)
		})
	}
}

// pipe copies both ways until either side ends.
func pipe(a, b net.Conn) {
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(a, b); done <- struct{}{} }()
	go func() { _, _ = io.Copy(b, a); done <- struct{}{} }()
	<-done
	a.Close()
	b.Close()
	<-done
}

// trustCloudCA makes http.DefaultTransport, which Flux's providers clone
// and our gke provider uses, trust caPEM beside the system's roots. It
// must run before anything uses the transport (TestMain).
func trustCloudCA(caPEM []byte) error {
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(caPEM) {
		return errors.New("the clouds' CA is no PEM certificate")
	}
	http.DefaultTransport.(*http.Transport).TLSClientConfig = &tls.Config{RootCAs: pool}
	return nil
}
