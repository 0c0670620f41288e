package redistier_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/accelkit/accelkit/progcache/cachetest"
	"github.com/accelkit/accelkit/progcache/redistier"
	"github.com/accelkit/accelkit/progcache/redistier/redistest"
	"github.com/redis/go-redis/v9"
)

// TestTLS runs the conformance suite and a lease through a TLS client on
// a server that takes TLS (the deployment the README draws: its own CA,
// a server certificate for the address), and checks that a client that
// does not trust the server's certificate gets nothing through: a miss
// and an ErrUnavailable put.
func TestTLS(t *testing.T) {
	dir := t.TempDir()
	ca, caKey := newCert(t, nil, nil, "accelkit test CA")
	srvCert, srvKey := newCert(t, ca, caKey, "127.0.0.1")
	writePEM(t, filepath.Join(dir, "ca.crt"), "CERTIFICATE", ca.Raw)
	writePEM(t, filepath.Join(dir, "server.crt"), "CERTIFICATE", srvCert.Raw)
	keyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, filepath.Join(dir, "server.key"), "EC PRIVATE KEY", keyDER)

	tlsPort, err := redistest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	redistest.Start(t, "--tls-port", strconv.Itoa(tlsPort),
		"--tls-cert-file", filepath.Join(dir, "server.crt"),
		"--tls-key-file", filepath.Join(dir, "server.key"),
		"--tls-ca-cert-file", filepath.Join(dir, "ca.crt"),
		"--tls-auth-clients", "no")
	tlsAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(tlsPort))

	roots := x509.NewCertPool()
	roots.AddCert(ca)
	client := redis.NewClient(&redis.Options{Addr: tlsAddr, ContextTimeoutEnabled: true,
		TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots}})
	t.Cleanup(func() { client.Close() })

	t.Run("conformance", func(t *testing.T) {
		cachetest.Run(t, conformanceBackend(client, 100))
	})
	t.Run("lease", func(t *testing.T) {
		c := openCache(t, client, redistier.Options{})
		l, err := c.AcquireLease(bg, cachetest.KeyN(1))
		if l == nil || err != nil {
			t.Fatalf("AcquireLease over TLS = %v, %v", l, err)
		}
		if err := l.Release(bg); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("untrusted server", func(t *testing.T) {
		// The system roots do not hold the test CA: the handshake fails.
		stranger := redis.NewClient(&redis.Options{Addr: tlsAddr, ContextTimeoutEnabled: true,
			TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12}})
		t.Cleanup(func() { stranger.Close() })
		c := openCache(t, stranger, redistier.Options{})
		if _, ok, err := c.Get(bg, cachetest.KeyN(1)); ok || err != nil {
			t.Errorf("Get through a client that does not trust the server = %v, %v; want a miss", ok, err)
		}
		// go-redis retries the failed handshake until the call's
		// deadline, logging the certificate error: the Put sees a timeout.
		if err := c.Put(bg, cachetest.KeyN(1), cachetest.ObjectN(1, 10)); !errors.Is(err, redistier.ErrUnavailable) {
			t.Errorf("Put through a client that does not trust the server = %v; want ErrUnavailable", err)
		}
		if n, err := client.Exists(bg, entryKey(c.Namespace(), cachetest.KeyN(1))).Result(); n != 0 || err != nil {
			t.Errorf("the refused Put's entry exists: %d, %v", n, err)
		}
	})
}

// newCert makes an ECDSA P-256 certificate for name (an IP address gets
// an IP SAN), signed by parent (self-signed, as a CA, when parent is nil).
func newCert(t *testing.T, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, name string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
	}
	signer, signerKey := tmpl, key
	if parent == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage = x509.KeyUsageCertSign
	} else {
		signer, signerKey = parent, parentKey
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		if ip := net.ParseIP(name); ip != nil {
			tmpl.IPAddresses = []net.IP{ip}
		} else {
			tmpl.DNSNames = []string{name}
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

func writePEM(t *testing.T, path, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
