package executor

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/trainstep/trainstep/pkg/render"
)

// The other-owner check reads from kube-apiserver's watch cache, except a
// Secret's absence, which readOwnSecret then trusts without asking again.
func TestTheForeignCheckReadsFromTheWatchCacheButNotASecretsAbsence(t *testing.T) {
	var mu sync.Mutex
	versions := map[string]string{} // path (and verb) -> resourceVersion sent
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		versions[r.URL.Path] = r.URL.Query().Get("resourceVersion")
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if !strings.HasSuffix(r.URL.Path, "/pods") && !strings.HasSuffix(r.URL.Path, "/services") { // a read by name: none there
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure, Reason: metav1.StatusReasonNotFound, Code: http.StatusNotFound})
			return
		}
		_ = json.NewEncoder(w).Encode(metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{Kind: "PartialObjectMetadataList", APIVersion: "meta.k8s.io/v1"}})
	}))
	defer srv.Close()
	md, err := metadata.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	conn := &connection{metadata: md, namespace: "ns"}
	named := []namedObject{
		{kind: "configmap", gvr: corev1.SchemeGroupVersion.WithResource("configmaps"), name: "tf-cm"},
		{kind: "secret", gvr: corev1.SchemeGroupVersion.WithResource("secrets"), name: "tf-keys"},
		{kind: "networkpolicy", gvr: networkingv1.SchemeGroupVersion.WithResource("networkpolicies"), name: "tf"},
	}
	id := render.Identity{JobName: "tf", Namespace: "ns", OwnerID: "abc"}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := checkNoForeignObjects(ctx, conn, id, named, time.Second); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"/api/v1/namespaces/ns/pods":                                  "0",
		"/api/v1/namespaces/ns/services":                              "0",
		"/api/v1/namespaces/ns/configmaps/tf-cm":                      "0",
		"/apis/networking.k8s.io/v1/namespaces/ns/networkpolicies/tf": "0",
		"/api/v1/namespaces/ns/secrets/tf-keys":                       "",
	}
	for path, rv := range want {
		got, ok := versions[path]
		if !ok {
			t.Errorf("the check never read %s (read: %v)", path, versions)
			continue
		}
		if got != rv {
			t.Errorf("%s was read at resourceVersion %q, want %q", path, got, rv)
		}
	}
	if !conn.absentSecrets["tf-keys"] {
		t.Error("the Secret found absent was not kept as absent")
	}
}
