package testworld

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// CA is a test certificate authority: the world's HTTPS servers present
// certificates it signs, and clients trust its PEM (SSL_CERT_FILE,
// NODE_EXTRA_CA_CERTS, curl --cacert, tls.Config.RootCAs).
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// PEM is the CA certificate, PEM-encoded.
	PEM []byte
}

// NewCA makes a CA valid for a day.
func NewCA() (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "devbox testworld CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// Pool is a cert pool holding the CA alone.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// Certificate issues a server certificate for names.
func (ca *CA) Certificate(names ...string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: names[0]},
		DNSNames:     names,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der, ca.cert.Raw}, PrivateKey: key}, nil
}

// CertificatePEM issues a server certificate for names, as PEM files a
// server in another process loads (tls.X509KeyPair): the certificate with
// the CA's after it, and the private key.
func (ca *CA) CertificatePEM(names ...string) (certPEM, keyPEM []byte, err error) {
	cert, err := ca.Certificate(names...)
	if err != nil {
		return nil, nil, err
	}
	for _, der := range cert.Certificate {
		certPEM = append(certPEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	der, err := x509.MarshalECPrivateKey(cert.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		return nil, nil, err
	}
	return certPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

// Web is an HTTP(S) server of the world that records every connection it
// accepts and every TLS server name it was asked for, before any byte of
// the response: a connection the fence stopped never appears here.
type Web struct {
	mu    sync.Mutex
	conns []Conn
	names []string
	srvs  []*http.Server
}

// Conns returns the connections accepted so far.
func (w *Web) Conns() []Conn {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Conn(nil), w.conns...)
}

// ServerNames returns the SNI of every ClientHello received so far.
func (w *Web) ServerNames() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.names...)
}

// Seen counts connections accepted on local address a (any port if 0).
func (w *Web) Seen(a netip.Addr, port uint16) int { return countTo(w.Conns(), a, port) }

type recordingListener struct {
	net.Listener
	w     *Web
	proto string
}

func (l recordingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		lo, _ := netip.ParseAddrPort(c.LocalAddr().String())
		rm, _ := netip.ParseAddrPort(c.RemoteAddr().String())
		l.w.mu.Lock()
		l.w.conns = append(l.w.conns, Conn{l.proto, netip.AddrPortFrom(lo.Addr().Unmap(), lo.Port()), netip.AddrPortFrom(rm.Addr().Unmap(), rm.Port())})
		l.w.mu.Unlock()
	}
	return c, err
}

// Serve serves h on l, over TLS with a certificate for names when ca is
// set, until Close.
func (w *Web) Serve(l net.Listener, h http.Handler, ca *CA, names ...string) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	proto := "tcp"
	if ca != nil {
		cert, err := ca.Certificate(names...)
		if err != nil {
			return err
		}
		srv.TLSConfig = &tls.Config{
			Certificates: []tls.Certificate{cert},
			GetConfigForClient: func(hi *tls.ClientHelloInfo) (*tls.Config, error) {
				w.mu.Lock()
				w.names = append(w.names, hi.ServerName)
				w.mu.Unlock()
				return nil, nil
			},
		}
		l = tls.NewListener(recordingListener{l, w, "tcp"}, srv.TLSConfig)
	} else {
		l = recordingListener{l, w, proto}
	}
	w.mu.Lock()
	w.srvs = append(w.srvs, srv)
	w.mu.Unlock()
	go srv.Serve(l)
	return nil
}

// Close stops every server.
func (w *Web) Close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.srvs {
		s.Close()
	}
}

// Hello answers every request with "hello NAME" where NAME is the request's
// Host (without port) and, over TLS, the SNI it came with.
var Hello = http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	sni := ""
	if r.TLS != nil {
		sni = " sni=" + r.TLS.ServerName
	}
	fmt.Fprintf(rw, "hello %s%s\n", strings.ToLower(host), sni)
})
