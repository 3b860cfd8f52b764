package gang_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/executor"
	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/gang"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/test/cluster"
)

var crds = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// installCRD creates the CRD in testdata/file, waits until it is served,
// and deletes it when the test ends.
func installCRD(t *testing.T, c *cluster.Cluster, dyn dynamic.Interface, file string, gvr schema.GroupVersionResource) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(strings.TrimPrefix(strings.TrimSpace(stripComments(data)), "---")), &obj.Object); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	ctx := context.Background()
	if _, err := dyn.Resource(crds).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating CRD %s: %v", obj.GetName(), err)
	}
	t.Cleanup(func() { _ = dyn.Resource(crds).Delete(context.Background(), obj.GetName(), metav1.DeleteOptions{}) })
	testutil.Eventually(t, time.Minute, "CRD "+obj.GetName()+" served", func() bool {
		_, err := dyn.Resource(gvr).Namespace("default").List(ctx, metav1.ListOptions{})
		return err == nil
	})
}

func stripComments(data []byte) string {
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// ownerPod creates a pod standing for the step pod that owns the job.
func ownerPod(t *testing.T, c *cluster.Cluster, ns string) *corev1.Pod {
	t.Helper()
	pod, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "step"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "registry.example/trainstep:1"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

// A missing CRD must be caught before anything is created. This test runs
// before the one that installs the CRDs (and that one removes them).
func TestMissingPodGroupCRDIsInvalidAndCreatesNothing(t *testing.T) {
	c := cluster.Get(t)
	ns := c.Namespace(t)
	job := gpuJob("needs-volcano", "none", 2, &v1alpha1.SchedulingPolicy{Gang: v1alpha1.GangVolcano, Queue: "q"})
	res := startRun(t, c, ns, job).wait(t)
	if res.Phase != result.PhaseInvalid || res.Phase.ExitCode() != 11 || !strings.Contains(res.Message, "podgroups.scheduling.volcano.sh") {
		t.Fatalf("got %s (exit %d): %s; want Invalid naming podgroups.scheduling.volcano.sh", res.Phase, res.Phase.ExitCode(), res.Message)
	}
	t.Logf("message: %s", res.Message)
	if pods := jobPods(t, c, ns, "needs-volcano"); len(pods) != 0 {
		t.Errorf("created %d pods", len(pods))
	}
}

func TestPodGroupsAreCreatedOwnedAndRemoved(t *testing.T) {
	c := cluster.Get(t)
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	installCRD(t, c, dyn, "scheduler-plugins-podgroups.yaml", gang.SchedulerPluginsPodGroups)
	installCRD(t, c, dyn, "volcano-podgroups.yaml", gang.VolcanoPodGroups)
	addPool(t, c, "podgroup", 1, 4)
	priorityClass(t, c, "gang-test-podgroup", 500)

	cases := []struct {
		name          string
		sp            v1alpha1.SchedulingPolicy
		gvr           schema.GroupVersionResource
		schedulerName string
		spec          map[string]any
	}{
		{"scheduler-plugins", v1alpha1.SchedulingPolicy{Gang: v1alpha1.GangSchedulerPlugins, ScheduleTimeoutSeconds: ptr.To[int32](90)},
			gang.SchedulerPluginsPodGroups, "scheduler-plugins-scheduler",
			map[string]any{"minMember": int64(3), "scheduleTimeoutSeconds": int64(90),
				"minResources": map[string]any{"cpu": "300m", "nvidia.com/gpu": "3"}}},
		{"volcano", v1alpha1.SchedulingPolicy{Gang: v1alpha1.GangVolcano, Queue: "research", PriorityClass: "gang-test-podgroup", MinAvailable: ptr.To[int32](2)},
			gang.VolcanoPodGroups, "volcano",
			map[string]any{"minMember": int64(2), "queue": "research", "priorityClassName": "gang-test-podgroup",
				"minResources": map[string]any{"cpu": "200m", "nvidia.com/gpu": "2"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := c.Namespace(t)
			owner := ownerPod(t, c, ns)
			job := gpuJob("grouped", "podgroup", 3, &tc.sp)
			job.Spec.RunPolicy.CleanPodPolicy = ptr.To(v1alpha1.CleanPodPolicyAll)
			r := startRun(t, c, ns, job, func(cfg *executor.Config) { cfg.OwnerPod, cfg.OwnerUID = owner.Name, string(owner.UID) })

			pgs := dyn.Resource(tc.gvr).Namespace(ns)
			var pg *unstructured.Unstructured
			testutil.Eventually(t, time.Minute, "the PodGroup and 3 pods", func() bool {
				pg, err = pgs.Get(context.Background(), "grouped", metav1.GetOptions{})
				return err == nil && len(jobPods(t, c, ns, "grouped")) == 3
			})
			if got := pg.Object["spec"]; !equalJSON(got, tc.spec) {
				t.Errorf("PodGroup spec = %v, want %v", got, tc.spec)
			}
			refs := pg.GetOwnerReferences()
			if len(refs) != 1 || refs[0].UID != owner.UID || refs[0].Kind != "Pod" || refs[0].Controller == nil || !*refs[0].Controller {
				t.Errorf("PodGroup owners = %+v, want the step pod %s", refs, owner.UID)
			}
			// No such scheduler runs here: the test binds the pods itself, as it would.
			for _, p := range jobPods(t, c, ns, "grouped") {
				if p.Spec.SchedulerName != tc.schedulerName {
					t.Errorf("%s schedulerName = %q, want %q", p.Name, p.Spec.SchedulerName, tc.schedulerName)
				}
				if tc.sp.Gang == v1alpha1.GangSchedulerPlugins && p.Labels[gang.SchedulerPluginsLabel] != "grouped" ||
					tc.sp.Gang == v1alpha1.GangVolcano && p.Annotations[gang.VolcanoGroupAnnotation] != "grouped" {
					t.Errorf("%s does not point at its PodGroup: labels %v annotations %v", p.Name, p.Labels, p.Annotations)
				}
				err := c.Client.CoreV1().Pods(ns).Bind(context.Background(), &corev1.Binding{
					ObjectMeta: metav1.ObjectMeta{Name: p.Name, UID: p.UID},
					Target:     corev1.ObjectReference{Kind: "Node", Name: "podgroup-0"},
				}, metav1.CreateOptions{})
				if err != nil {
					t.Fatalf("binding %s: %v", p.Name, err)
				}
			}
			testutil.Eventually(t, time.Minute, "3 running pods", func() bool { return countPods(jobPods(t, c, ns, "grouped"), running) == 3 })
			exitAll(t, c, ns, "grouped")
			if res := r.wait(t); res.Phase != result.PhaseSucceeded {
				t.Fatalf("ended %s: %s", res.Phase, res.Message)
			}
			if _, err := pgs.Get(context.Background(), "grouped", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("the PodGroup is still there after the job (err %v)", err)
			}
		})
	}
}

// equalJSON compares decoded JSON values, numbers by value.
func equalJSON(a, b any) bool {
	ja, _ := yaml.Marshal(a)
	jb, _ := yaml.Marshal(b)
	return string(ja) == string(jb)
}
