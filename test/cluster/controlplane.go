package cluster

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"
)

// The control plane's own faults, for tests of what a run makes of them:
// kube-apiserver killed (every connection and watch broken at once) and
// started again, and etcd compacted under the watches that are open.

// apiserverComponent is the running kube-apiserver.
func (c *Cluster) apiserverComponent() *component {
	c.componentsMu.Lock()
	defer c.componentsMu.Unlock()
	for _, comp := range slices.Backward(c.components) {
		if comp.name == "kube-apiserver" {
			return comp
		}
	}
	return nil
}

// KillAPIServer kills kube-apiserver (SIGKILL: no graceful shutdown, every
// connection and watch ends at once) and waits until it is gone. Call
// StartAPIServer to bring it back; the test's end does, if the test did
// not.
func (c *Cluster) KillAPIServer(t testing.TB) {
	t.Helper()
	comp := c.apiserverComponent()
	if comp == nil || !comp.running() {
		t.Fatal("kube-apiserver is not running")
	}
	if err := syscall.Kill(-comp.pgid, syscall.SIGKILL); err != nil {
		t.Fatalf("killing kube-apiserver: %v", err)
	}
	select {
	case <-comp.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("kube-apiserver did not exit within 30s of SIGKILL")
	}
	t.Cleanup(func() {
		if comp := c.apiserverComponent(); comp != nil && !comp.running() {
			c.StartAPIServer(t)
		}
	})
}

// StartAPIServer starts kube-apiserver again, with the flags it had, and
// waits until it is ready.
func (c *Cluster) StartAPIServer(t testing.TB) {
	t.Helper()
	comp, err := startComponent(c.BinDir, filepath.Join(c.Dir, "logs"), "kube-apiserver", "kube-apiserver", false, c.apiserverArgs...)
	if err != nil {
		t.Fatal(err)
	}
	c.componentsMu.Lock()
	c.components = slices.DeleteFunc(c.components, func(old *component) bool { return old.name == "kube-apiserver" && !old.running() })
	c.components = append(c.components, comp)
	c.componentsMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	readyz := func(ctx context.Context) (bool, error) {
		body, err := c.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(body) == "ok", err
	}
	if err := waitFor(ctx, "kube-apiserver /readyz after its restart", []*component{comp}, readyz); err != nil {
		t.Fatal(err)
	}
}

// RestartAPIServer kills kube-apiserver, keeps it away for down, and starts
// it again; it returns once it is ready.
func (c *Cluster) RestartAPIServer(t testing.TB, down time.Duration) {
	t.Helper()
	c.KillAPIServer(t)
	time.Sleep(down)
	c.StartAPIServer(t)
}

// CompactEtcd writes a key of its own (so that the revision moves past
// every watch's), then compacts etcd's history up to the current revision,
// physically: a watch that must start again from an earlier revision meets
// "required revision has been compacted", which kube-apiserver answers 410
// Gone. It returns the revision compacted to.
func (c *Cluster) CompactEtcd(t testing.TB) int64 {
	t.Helper()
	key := base64.StdEncoding.EncodeToString([]byte("/trainstep-test/compaction"))
	var put struct {
		Header struct {
			Revision string `json:"revision"`
		} `json:"header"`
	}
	value := base64.StdEncoding.EncodeToString([]byte(time.Now().String()))
	c.etcdPost(t, "/v3/kv/put", map[string]any{"key": key, "value": value}, &put)
	var rev int64
	if _, err := fmt.Sscan(put.Header.Revision, &rev); err != nil || rev <= 0 {
		t.Fatalf("etcd's revision after a put: %q (%v)", put.Header.Revision, err)
	}
	c.etcdPost(t, "/v3/kv/compaction", map[string]any{"revision": fmt.Sprint(rev), "physical": true}, nil)
	return rev
}

// etcdPost calls etcd's JSON gateway.
func (c *Cluster) etcdPost(t testing.TB, path string, body, out any) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	resp, err := hc.Post(c.etcdURL+path, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatalf("etcd %s: %v", path, err)
	}
	defer resp.Body.Close()
	var raw bytes.Buffer
	_, _ = raw.ReadFrom(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("etcd %s: %s: %s", path, resp.Status, raw.String())
	}
	if out != nil {
		if err := json.Unmarshal(raw.Bytes(), out); err != nil {
			t.Fatalf("etcd %s: %v: %s", path, err, raw.String())
		}
	}
}
