package replicapolicy

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/render"
)

// The ConfigMap's keys fill every setting; lists split at commas and
// newlines; unknown keys are warned about and ignored; a bad value is an
// error naming the key.
func TestParseSettings(t *testing.T) {
	got, warnings, err := ParseSettings(map[string]string{
		"allowPrivileged":                "true",
		"allowedServiceAccounts":         "reader",
		"allowedSecrets":                 "hf-token, wandb-*\nregistry\n",
		"allowedConfigMaps":              "settings",
		"allowedPVCs":                    "datasets-*",
		"allowedCSIDrivers":              "secrets-store.csi.k8s.io",
		"allowedVolumeTypes":             "nfs",
		"allowedPriorityClasses":         "team-high",
		"allowedRuntimeClasses":          "kata",
		"allowedSchedulers":              "my-scheduler",
		"podSecurity":                    "restricted",
		"maxRenderedSize":                "128Mi",
		"networkPolicy":                  "true",
		"networkPolicyIngressNamespaces": "monitoring",
		"networkPolicyIngressPorts":      "9090, metrics",
		"allowedSecret":                  "typo",
	}, "the file")
	if err != nil {
		t.Fatal(err)
	}
	want := Policy{
		AllowPrivileged: true, ServiceAccounts: []string{"reader"}, Secrets: []string{"hf-token", "wandb-*", "registry"},
		ConfigMaps: []string{"settings"}, PVCs: []string{"datasets-*"}, CSIDrivers: []string{"secrets-store.csi.k8s.io"},
		VolumeTypes: []string{"nfs"}, PriorityClasses: []string{"team-high"}, RuntimeClasses: []string{"kata"},
		Schedulers: []string{"my-scheduler"}, PodSecurity: LevelRestricted, MaxRenderedBytes: 128 << 20,
		NetworkPolicy: NetworkPolicySettings{Ingress: render.IngressAllowance{
			Namespaces: []string{"monitoring"}, Ports: []intstr.IntOrString{intstr.FromInt32(9090), intstr.FromString("metrics")}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("settings (-want +got):\n%s", diff)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], `the file: unknown setting "allowedSecret"`) {
		t.Errorf("warnings %q, want one about allowedSecret", warnings)
	}

	for key, value := range map[string]string{
		"allowPrivileged": "yes please", "podSecurity": "privileged", "maxRenderedSize": "-1", "networkPolicyIngressPorts": "70000",
	} {
		if _, _, err := ParseSettings(map[string]string{key: value}, "the file"); err == nil || !strings.HasPrefix(err.Error(), "the file: "+key+": ") {
			t.Errorf("%s: %q: error %v, want one naming the file and the key", key, value, err)
		}
	}
	if off, _, err := ParseSettings(map[string]string{"networkPolicy": "false"}, "f"); err != nil || !off.NetworkPolicy.Disabled {
		t.Errorf("networkPolicy false: %+v, %v", off.NetworkPolicy, err)
	}
}

// Flags add to the ConfigMap's lists and turn switches on; a flag's level
// and size win; ports without a namespace, or namespaces with no
// NetworkPolicy, are refused.
func TestMergeAndValidate(t *testing.T) {
	file := Policy{Secrets: []string{"hf-token"}, PodSecurity: LevelRestricted, MaxRenderedBytes: 1 << 20,
		NetworkPolicy: NetworkPolicySettings{Ingress: render.IngressAllowance{Namespaces: []string{"monitoring"}}}}
	flags := Policy{Secrets: []string{"hf-token", "wandb-key"}, AllowPrivileged: true, MaxRenderedBytes: 2 << 20}
	got := file.Merge(flags)
	want := Policy{Secrets: []string{"hf-token", "wandb-key"}, AllowPrivileged: true, PodSecurity: LevelRestricted, MaxRenderedBytes: 2 << 20,
		NetworkPolicy: NetworkPolicySettings{Ingress: render.IngressAllowance{Namespaces: []string{"monitoring"}}}}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("merged (-want +got):\n%s", diff)
	}
	if err := got.Validate(); err != nil {
		t.Errorf("valid settings refused: %v", err)
	}
	portsOnly := Policy{NetworkPolicy: NetworkPolicySettings{Ingress: render.IngressAllowance{Ports: []intstr.IntOrString{intstr.FromInt32(9090)}}}}
	if err := portsOnly.Validate(); err == nil || !strings.Contains(err.Error(), "--network-policy-ingress-ports") {
		t.Errorf("ports without a namespace: %v", err)
	}
	noPolicy := got
	noPolicy.NetworkPolicy.Disabled = true
	if err := noPolicy.Validate(); err == nil || !strings.Contains(err.Error(), "--network-policy=false") {
		t.Errorf("namespaces without a NetworkPolicy: %v", err)
	}
}

// validate says what trainstep adds that a template seems not to expect:
// no token for a named ServiceAccount, and a NetworkPolicy closed to
// Prometheus unless the template author admits a namespace.
func TestNotes(t *testing.T) {
	scraped := jobWithWorker(corev1.PodSpec{ServiceAccountName: "reader", Containers: []corev1.Container{{Name: "jax", Image: "example.com/jax:1",
		Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9090}}}}})
	notes := Notes(scraped, Policy{})
	if len(notes) != 2 || !strings.Contains(notes[0], "serviceAccountName reader alone gives the replica no credentials") ||
		!strings.Contains(notes[1], "container jax serves metrics on port 9090") || !strings.Contains(notes[1], "--network-policy-ingress-namespaces") {
		t.Errorf("notes %q", notes)
	}
	admitted := Policy{NetworkPolicy: NetworkPolicySettings{Ingress: render.IngressAllowance{Namespaces: []string{"monitoring"}}}}
	scraped.Spec.ReplicaSpecs[v1alpha1.ReplicaTypeWorker].Template.Spec.AutomountServiceAccountToken = new(bool)
	if notes := Notes(scraped, admitted); len(notes) != 0 {
		t.Errorf("notes %q for a token asked about and a monitoring namespace admitted", notes)
	}
}
