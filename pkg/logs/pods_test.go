package logs

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/trainstep/trainstep/internal/testutil"
)

const (
	testNamespace = "team-a"
	testPod       = "mnist-worker-0"
	testContainer = "tensorflow"
)

// replicaPod is a replica pod with a main container and a sidecar whose
// main container has the given status.
func replicaPod(uid types.UID, status corev1.ContainerStatus) *corev1.Pod {
	status.Name = testContainer
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: testPod, Namespace: testNamespace, UID: uid},
		Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: testContainer, Image: "trainer"},
			{Name: "sidecar", Image: "proxy"},
		}},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
			{Name: "sidecar", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
			status,
		}},
	}
}

func running(restarts int32) corev1.ContainerStatus {
	return corev1.ContainerStatus{
		RestartCount: restarts,
		State:        corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
	}
}

func terminated(restarts, exitCode int32) corev1.ContainerStatus {
	return corev1.ContainerStatus{
		RestartCount: restarts,
		State:        corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exitCode}},
	}
}

func crashLooping(restarts int32) corev1.ContainerStatus {
	return corev1.ContainerStatus{
		RestartCount:         restarts,
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}},
	}
}

func creating() corev1.ContainerStatus {
	return corev1.ContainerStatus{
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}},
	}
}

type observation struct {
	uid    types.UID
	status corev1.ContainerStatus
}

// TestPodStreamerStartsOneStreamPerInstance drives the streamer with pod
// updates against client-go's fake clientset, whose log requests all answer
// "fake logs" (no timestamps, so nothing can be deduplicated: every request
// shows up once in the output). Each instance's stream follows its log
// while the container runs and, once it ended or Stop came, reads the rest
// to its end; an instance first seen ended is only read.
func TestPodStreamerStartsOneStreamPerInstance(t *testing.T) {
	cases := []struct {
		name         string
		observations []observation
		wantStreams  int
		// wantFollowed is how many of them may follow the log.
		wantFollowed int
	}{
		{
			name:         "container still being created is not streamed",
			observations: []observation{{"a", creating()}},
		},
		{
			name:         "running container is streamed once however often it is seen",
			observations: []observation{{"a", creating()}, {"a", running(0)}, {"a", running(0)}, {"a", running(0)}},
			wantStreams:  1, wantFollowed: 1,
		},
		{
			name:         "container restarted in place is streamed again",
			observations: []observation{{"a", running(0)}, {"a", running(1)}, {"a", running(1)}, {"a", running(2)}},
			wantStreams:  3, wantFollowed: 3,
		},
		{
			name:         "pod recreated under the same name is streamed again",
			observations: []observation{{"a", running(0)}, {"b", running(0)}, {"a", running(0)}},
			wantStreams:  2, wantFollowed: 2,
		},
		{
			name:         "container seen running then terminated keeps its one stream",
			observations: []observation{{"a", running(0)}, {"a", terminated(0, 0)}},
			wantStreams:  1, wantFollowed: 1,
		},
		{
			name:         "container first seen terminated is read once without follow",
			observations: []observation{{"a", terminated(0, 1)}, {"a", terminated(0, 1)}},
			wantStreams:  1,
		},
		{
			name:         "container that crashed before it was seen running shows its last run",
			observations: []observation{{"a", creating()}, {"a", crashLooping(1)}, {"a", running(1)}},
			wantStreams:  2, wantFollowed: 1,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset()
			var out testutil.SyncBuffer
			streamer := NewPodStreamer(client.CoreV1(), testNamespace, NewPrefixer(&out), zap.NewNop())
			for _, o := range tc.observations {
				streamer.Observe(replicaPod(o.uid, o.status), "worker-0", testContainer)
			}
			stopWithin(t, streamer, 5*time.Second)

			if n := len(streamer.instances); n != tc.wantStreams {
				t.Errorf("%d streams, want %d", n, tc.wantStreams)
			}
			requests := logRequests(t, client)
			follow := 0
			for _, r := range requests {
				if r.Container != testContainer || !r.Timestamps {
					t.Errorf("log request %+v, want container %q with timestamps", r, testContainer)
				}
				if r.Follow {
					follow++
				}
			}
			// A stream follows at most once and reads the rest at most once;
			// every stream makes one request at least.
			if follow > tc.wantFollowed || len(requests)-follow > tc.wantStreams || len(requests) < tc.wantStreams {
				t.Errorf("log requests: %d follow, %d without; want at most %d and %d, and %d in all at least",
					follow, len(requests)-follow, tc.wantFollowed, tc.wantStreams, tc.wantStreams)
			}
			// Every stream prints its log; a request that Stop cancelled
			// before it was answered prints nothing. The fake's lines have no
			// timestamps, so a follow and the read of its rest both print.
			const line = "[worker-0] fake logs\n"
			got := out.String()
			if printed := strings.Count(got, line); got != strings.Repeat(line, printed) || printed < tc.wantStreams || printed > len(requests) {
				t.Errorf("output = %q, want the fake's line once per stream at least (%d) and once per request at most (%d)", got, tc.wantStreams, len(requests))
			}
		})
	}
}

func TestPodStreamerDefaultsToThePodsFirstContainer(t *testing.T) {
	client := fake.NewClientset()
	var out testutil.SyncBuffer
	streamer := NewPodStreamer(client.CoreV1(), testNamespace, NewPrefixer(&out), zap.NewNop())
	streamer.Observe(replicaPod("a", running(0)), "launcher-0", "")
	stopWithin(t, streamer, 5*time.Second)
	requests := logRequests(t, client)
	if len(requests) == 0 {
		t.Fatalf("no log request, want those of container %q", testContainer)
	}
	for _, r := range requests {
		if r.Container != testContainer {
			t.Errorf("log request for container %q, want %q", r.Container, testContainer)
		}
	}
	if got, want := out.String(), strings.Repeat("[launcher-0] fake logs\n", len(requests)); got != want {
		t.Errorf("output = %q, want %q", got, want)
	}
}

func TestPodStreamerIgnoresPodsAfterStop(t *testing.T) {
	client := fake.NewClientset()
	var out testutil.SyncBuffer
	streamer := NewPodStreamer(client.CoreV1(), testNamespace, NewPrefixer(&out), zap.NewNop())
	stopWithin(t, streamer, time.Second)
	streamer.Observe(replicaPod("a", running(0)), "worker-0", testContainer)
	stopWithin(t, streamer, time.Second) // a second Stop is harmless
	if n := len(logRequests(t, client)); n != 0 {
		t.Errorf("%d log requests after Stop, want none", n)
	}
	if out.String() != "" {
		t.Errorf("output after Stop = %q, want nothing", out.String())
	}
}

// stopWithin calls Stop with a generous drain bound and fails if Stop does
// not return well within it.
func stopWithin(t *testing.T, streamer *PodStreamer, bound time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	returned := make(chan struct{})
	go func() {
		streamer.Stop(ctx)
		close(returned)
	}()
	select {
	case <-returned:
	case <-time.After(bound + 5*time.Second):
		t.Fatal("Stop did not return")
	}
}

// logRequests returns the options of every pod log request the fake
// clientset received, checking they were for the test pod.
func logRequests(t *testing.T, client *fake.Clientset) []corev1.PodLogOptions {
	t.Helper()
	var requests []corev1.PodLogOptions
	for _, action := range client.Actions() {
		if action.GetVerb() != "get" || action.GetSubresource() != "log" {
			continue
		}
		generic, ok := action.(k8stesting.GenericAction)
		if !ok {
			t.Fatalf("log action of type %T", action)
		}
		if action.GetNamespace() != testNamespace {
			t.Errorf("log request in namespace %q, want %q", action.GetNamespace(), testNamespace)
		}
		requests = append(requests, *generic.GetValue().(*corev1.PodLogOptions))
	}
	return requests
}
