package main

import (
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
)

// TestContainerdNameIsWhatTheKubeletAsksFor: an archive imported with `ctr images import`
// is found by a pod only under the name the kubelet normalizes the pod's image to.
func TestContainerdNameIsWhatTheKubeletAsksFor(t *testing.T) {
	for _, tc := range []struct{ tag, want string }{
		{"ghcr.io/trainstep/trainstep:latest", "ghcr.io/trainstep/trainstep:latest"},
		{"registry.example.com:5000/ml/trainstep:v0.3.0", "registry.example.com:5000/ml/trainstep:v0.3.0"},
		{"docker.io/local/trainstep:e2e", "docker.io/local/trainstep:e2e"},
		{"index.docker.io/local/trainstep:e2e", "docker.io/local/trainstep:e2e"},
		{"someone/trainstep:v1", "docker.io/someone/trainstep:v1"},
		{"trainstep:v1", "docker.io/library/trainstep:v1"},
	} {
		ref, err := name.NewTag(tc.tag)
		if err != nil {
			t.Fatal(err)
		}
		if got := containerdName(ref); got != tc.want {
			t.Errorf("containerdName(%s) = %s, want %s", tc.tag, got, tc.want)
		}
	}
}
