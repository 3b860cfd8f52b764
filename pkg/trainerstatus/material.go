package trainerstatus

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// Keys of the job's two status Secrets: <job>-status holds CAKey and
// TokenKey, which the replicas mount; <job>-status-tls holds the serving
// pair, which only the step reads, so that no replica, even one that
// mounts its job's status Secret whole, can serve as the endpoint.
const (
	CAKey          = "ca.crt"
	TokenKey       = "token"
	ServingCertKey = "tls.crt"
	ServingKeyKey  = "tls.key"
)

// certificateLifetime outlives any training job; the CA's key is thrown
// away once the serving certificate is signed, so nothing else is ever
// signed by it.
const certificateLifetime = 5 * 365 * 24 * time.Hour

// Material is a job's endpoint identity: a CA made for the job alone, the
// serving certificate it signed, and the bearer token. It is kept in the
// job's Secret, so a retried step serves with the same ones.
type Material struct {
	CACert      []byte // PEM
	ServingCert []byte // PEM
	ServingKey  []byte // PEM
	Token       []byte // hex of 32 random bytes
}

// NewMaterial makes a CA and a serving certificate for hosts (DNS names or
// IP addresses), and a random token.
func NewMaterial(hosts []string, now time.Time) (Material, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Material{}, fmt.Errorf("generating the CA key: %w", err)
	}
	caTemplate := &x509.Certificate{
		SerialNumber:          randomSerial(),
		Subject:               pkix.Name{CommonName: "trainstep trainer status CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(certificateLifetime),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	if err != nil {
		return Material{}, fmt.Errorf("creating the CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return Material{}, fmt.Errorf("reading the CA certificate: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Material{}, fmt.Errorf("generating the serving key: %w", err)
	}
	serving := &x509.Certificate{
		SerialNumber: randomSerial(),
		Subject:      pkix.Name{CommonName: hosts[0]},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(certificateLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			serving.IPAddresses = append(serving.IPAddresses, ip)
		} else {
			serving.DNSNames = append(serving.DNSNames, h)
		}
	}
	servingDER, err := x509.CreateCertificate(rand.Reader, serving, ca, &key.PublicKey, caKey)
	if err != nil {
		return Material{}, fmt.Errorf("creating the serving certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Material{}, fmt.Errorf("encoding the serving key: %w", err)
	}
	token := make([]byte, 32)
	if _, err := rand.Read(token); err != nil {
		return Material{}, fmt.Errorf("generating the token: %w", err)
	}
	return Material{
		CACert:      pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		ServingCert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: servingDER}),
		ServingKey:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		Token:       []byte(hex.EncodeToString(token)),
	}, nil
}

func randomSerial() *big.Int {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		return big.NewInt(time.Now().UnixNano())
	}
	return serial
}

// FromSecretData reads Material back from the job's two Secrets (client:
// the CA and the token; serving: the pair); ok is false when a part is
// missing or the pair does not load, and a new Material is needed.
func FromSecretData(client, serving map[string][]byte) (Material, bool) {
	m := Material{CACert: client[CAKey], Token: client[TokenKey], ServingCert: serving[ServingCertKey], ServingKey: serving[ServingKeyKey]}
	if len(m.CACert) == 0 || len(m.Token) < 32 {
		return Material{}, false
	}
	if _, err := tls.X509KeyPair(m.ServingCert, m.ServingKey); err != nil {
		return Material{}, false
	}
	return m, true
}

// ClientData is what the <job>-status Secret holds: what a replica needs
// to trust the endpoint and be let in.
func (m Material) ClientData() map[string][]byte {
	return map[string][]byte{CAKey: m.CACert, TokenKey: m.Token}
}

// ServingData is what the <job>-status-tls Secret holds: the step's
// serving pair.
func (m Material) ServingData() map[string][]byte {
	return map[string][]byte{ServingCertKey: m.ServingCert, ServingKeyKey: m.ServingKey}
}

// tlsConfig serves the Material's certificate.
func (m Material) tlsConfig() (*tls.Config, error) {
	if len(m.Token) == 0 {
		return nil, errors.New("the trainer status material has no token")
	}
	pair, err := tls.X509KeyPair(m.ServingCert, m.ServingKey)
	if err != nil {
		return nil, fmt.Errorf("loading the serving certificate: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, nil
}
