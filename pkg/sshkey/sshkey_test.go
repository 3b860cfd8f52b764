package sshkey

import (
	"bytes"
	"testing"

	"golang.org/x/crypto/ssh"
)

func TestGenerateGivesAMatchingUsablePair(t *testing.T) {
	private, public, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.ParsePrivateKey(private)
	if err != nil {
		t.Fatalf("the private key does not parse: %v", err)
	}
	pub, _, _, _, err := ssh.ParseAuthorizedKey(public)
	if err != nil {
		t.Fatalf("the public key is not in authorized_keys format: %v", err)
	}
	if !bytes.Equal(signer.PublicKey().Marshal(), pub.Marshal()) {
		t.Fatal("the public key does not belong to the private key")
	}
	if _, again, _ := Generate(); bytes.Equal(again, public) {
		t.Fatal("two calls returned the same key")
	}
}
