// Package sshkey generates the SSH key pair MPI replicas log in to each
// other with. It is kept out of pkg/render, which must stay pure: the
// executor generates a key once per job and passes it to the renderer.
package sshkey

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"

	"golang.org/x/crypto/ssh"
)

// Generate returns a new ECDSA P-521 key pair (the kind MPI Operator v2
// generates): the private key as an "EC PRIVATE KEY" PEM block and the
// public key in authorized_keys format.
func Generate() (private, public []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating an SSH key: %w", err)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding the SSH private key: %w", err)
	}
	pub, err := ssh.NewPublicKey(&key.PublicKey)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding the SSH public key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), ssh.MarshalAuthorizedKey(pub), nil
}
