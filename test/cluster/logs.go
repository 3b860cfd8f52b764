package cluster

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Container logs: kwok serves `kubectl logs` from files named by kwok.x-k8s.io/v1alpha1
// Logs objects (one per pod, named like it). Files are in the CRI log format kubelets write,
// which kwok parses line by line.

var (
	crdResource  = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	logsResource = schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: "logs"}
)

// noOutputLog is the empty log file of every container SetLogs was not called for: like a
// container that printed nothing, `kubectl logs` returns no lines rather than an error.
func (c *Cluster) noOutputLog() string {
	return filepath.Join(c.Dir, "container-logs", "no-output.log")
}

// clusterLogsYAML is the kwok configuration that serves noOutputLog for every container of
// every pod that has no Logs object of its own.
func clusterLogsYAML(noOutputLog string) []byte {
	return []byte(fmt.Sprintf(`---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterLogs
metadata:
  name: no-output
spec:
  logs:
  - logsFile: %q
`, noOutputLog))
}

// installLogsCRD registers the Logs kind kwok watches (--enable-crds=Logs). The schema
// accepts any object: kwok itself interprets spec.logs.
func (c *Cluster) installLogsCRD(ctx context.Context) error {
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": logsResource.Resource + "." + logsResource.Group},
		"spec": map[string]any{
			"group": logsResource.Group,
			"scope": "Namespaced",
			"names": map[string]any{"kind": "Logs", "listKind": "LogsList", "plural": "logs", "singular": "logs"},
			"versions": []any{map[string]any{
				"name": logsResource.Version, "served": true, "storage": true,
				"subresources": map[string]any{"status": map[string]any{}},
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object", "x-kubernetes-preserve-unknown-fields": true,
				}},
			}},
		},
	}}
	if _, err := c.dynamic.Resource(crdResource).Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the kwok Logs CRD: %w", err)
	}
	servable := func(ctx context.Context) (bool, error) {
		_, err := c.dynamic.Resource(logsResource).Namespace(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, err
	}
	return waitFor(ctx, "the kwok Logs CRD", c.components, servable)
}

// SetLogs makes `kubectl logs` (and client-go GetLogs through kube-apiserver) of container
// in pod ns/name return text, one log line per line of text. The pod need not exist yet.
// It returns once kwok serves the logs.
func (c *Cluster) SetLogs(t testing.TB, ns, pod, container, text string) {
	t.Helper()
	c.writeLogs(t, ns, pod, container, text, os.O_TRUNC)
}

// AppendLogs adds lines to what SetLogs set; a following reader (GetLogs with Follow) sees
// them arrive. Unlike a kubelet's, kwok's follow stream does not end when the container
// exits: the reader has to stop on its own (for example when the pod finishes).
func (c *Cluster) AppendLogs(t testing.TB, ns, pod, container, text string) {
	t.Helper()
	c.writeLogs(t, ns, pod, container, text, os.O_APPEND)
}

func (c *Cluster) writeLogs(t testing.TB, ns, pod, container, text string, mode int) {
	t.Helper()
	path := filepath.Join(c.Dir, "container-logs", ns+"_"+pod+"_"+container+".log")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|mode, 0o644)
	if err != nil {
		t.Fatalf("opening log file of %s/%s/%s: %v", ns, pod, container, err)
	}
	_, err = f.WriteString(criLogLines(time.Now(), text))
	if closeErr := f.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		t.Fatalf("writing log file of %s/%s/%s: %v", ns, pod, container, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.pointLogsAt(ctx, ns, pod, container, path); err != nil {
		t.Fatalf("configuring logs of %s/%s/%s: %v", ns, pod, container, err)
	}
	logURL := c.kubeletURL + "/containerLogs/" + url.PathEscape(ns) + "/" + url.PathEscape(pod) + "/" + url.PathEscape(container)
	if err := waitFor(ctx, "kwok to serve the logs", c.components, httpOK(c.kubeletHTTP, logURL)); err != nil {
		t.Fatalf("configuring logs of %s/%s/%s: %v", ns, pod, container, err)
	}
}

// criLogLines formats text as CRI log lines: "<RFC3339Nano time> stdout F <line>".
func criLogLines(now time.Time, text string) string {
	if text == "" {
		return ""
	}
	stamp := now.UTC().Format(time.RFC3339Nano)
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		b.WriteString(stamp + " stdout F " + line + "\n")
	}
	return b.String()
}

// pointLogsAt makes the pod's Logs object name path for container.
func (c *Cluster) pointLogsAt(ctx context.Context, ns, pod, container, path string) error {
	c.logsMu.Lock()
	defer c.logsMu.Unlock()
	client := c.dynamic.Resource(logsResource).Namespace(ns)
	entry := map[string]any{"containers": []any{container}, "logsFile": path, "follow": true}
	existing, err := client.Get(ctx, pod, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		// A Logs object hides ClusterLogs for its pod: its other containers keep the
		// empty log through an entry without container names (kwok's default entry).
		noOutput := map[string]any{"logsFile": c.noOutputLog(), "follow": true}
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": logsResource.GroupVersion().String(),
			"kind":       "Logs",
			"metadata":   map[string]any{"name": pod, "namespace": ns},
			"spec":       map[string]any{"logs": []any{entry, noOutput}},
		}}
		_, err = client.Create(ctx, obj, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	entries, _, _ := unstructured.NestedSlice(existing.Object, "spec", "logs")
	for _, e := range entries {
		if m, ok := e.(map[string]any); ok && fmt.Sprint(m["containers"]) == fmt.Sprint([]any{container}) {
			if m["logsFile"] == path {
				return nil
			}
		}
	}
	entries = append(entries, entry)
	if err := unstructured.SetNestedSlice(existing.Object, entries, "spec", "logs"); err != nil {
		return err
	}
	_, err = client.Update(ctx, existing, metav1.UpdateOptions{})
	return err
}
