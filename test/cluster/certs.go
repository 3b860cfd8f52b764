package cluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// certificateLifetime outlives any test run and any `make cluster-up` session a person keeps.
const certificateLifetime = 365 * 24 * time.Hour

// authority is the cluster's single certificate authority: it signs the serving certificates
// of kube-apiserver and kwok's kubelet endpoint and every component's client certificate.
type authority struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
	// servingIPs are added to every serving certificate's 127.0.0.1 (the real node's link).
	servingIPs []net.IP
}

// keyPair is a PEM-encoded certificate and key, also written to disk for the components.
type keyPair struct {
	CertPEM, KeyPEM   []byte
	CertFile, KeyFile string
}

func newAuthority() (*authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating CA key: %w", err)
	}
	template := &x509.Certificate{
		SerialNumber:          randomSerial(),
		Subject:               pkix.Name{CommonName: "trainstep-test-cluster-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(certificateLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("signing CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing CA certificate: %w", err)
	}
	return &authority{cert: cert, key: key, certPEM: pemBlock("CERTIFICATE", der)}, nil
}

// issue signs a leaf certificate. Serving certificates name 127.0.0.1 and localhost (plus
// extra DNS names); client certificates carry the user name and groups that RBAC sees.
func (ca *authority) issue(dir, name string, subject pkix.Name, serving bool, dnsNames ...string) (keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return keyPair{}, fmt.Errorf("generating key for %s: %w", name, err)
	}
	template := &x509.Certificate{
		SerialNumber: randomSerial(),
		Subject:      subject,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(certificateLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if serving {
		template.ExtKeyUsage = append(template.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
		template.IPAddresses = append([]net.IP{net.IPv4(127, 0, 0, 1), net.ParseIP(serviceClusterIP)}, ca.servingIPs...)
		template.DNSNames = append([]string{"localhost"}, dnsNames...)
	}
	der, err := x509.CreateCertificate(rand.Reader, template, ca.cert, key.Public(), ca.key)
	if err != nil {
		return keyPair{}, fmt.Errorf("signing certificate for %s: %w", name, err)
	}
	keyPEM, err := privateKeyPEM(key)
	if err != nil {
		return keyPair{}, fmt.Errorf("encoding key for %s: %w", name, err)
	}
	pair := keyPair{
		CertPEM:  pemBlock("CERTIFICATE", der),
		KeyPEM:   keyPEM,
		CertFile: filepath.Join(dir, name+".crt"),
		KeyFile:  filepath.Join(dir, name+".key"),
	}
	if err := writeFiles(map[string][]byte{pair.CertFile: pair.CertPEM, pair.KeyFile: pair.KeyPEM}); err != nil {
		return keyPair{}, err
	}
	return pair, nil
}

// writeServiceAccountKey writes the key that kube-apiserver signs service-account tokens
// with and kube-controller-manager signs legacy tokens with; its public half verifies them.
func writeServiceAccountKey(dir string) (privateFile, publicFile string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", fmt.Errorf("generating service-account key: %w", err)
	}
	keyPEM, err := privateKeyPEM(key)
	if err != nil {
		return "", "", fmt.Errorf("encoding service-account key: %w", err)
	}
	publicDER, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return "", "", fmt.Errorf("encoding service-account public key: %w", err)
	}
	privateFile = filepath.Join(dir, "service-account.key")
	publicFile = filepath.Join(dir, "service-account.pub")
	err = writeFiles(map[string][]byte{privateFile: keyPEM, publicFile: pemBlock("PUBLIC KEY", publicDER)})
	return privateFile, publicFile, err
}

func privateKeyPEM(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pemBlock("EC PRIVATE KEY", der), nil
}

func pemBlock(kind string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
}

func randomSerial() *big.Int {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		// crypto/rand does not fail on Linux; a fixed serial would still produce a valid chain.
		return big.NewInt(time.Now().UnixNano())
	}
	return serial
}

func writeFiles(files map[string][]byte) error {
	for path, data := range files {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return fmt.Errorf("writing %s: %w", filepath.Base(path), err)
		}
	}
	return nil
}
