package executor

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks/mpi"
	"github.com/trainstep/trainstep/pkg/render"
	"github.com/trainstep/trainstep/pkg/result"
)

// A Secret named like the job's SSH Secret that the job did not make is
// never used, nor even read (only its metadata is): its key would let its
// owner into the replicas, and its data is another owner's.
func TestRenderInputsRefusesAnSSHSecretNotTheJobs(t *testing.T) {
	job := &v1alpha1.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "github-deploy"}, Spec: v1alpha1.TrainJobSpec{Framework: v1alpha1.FrameworkMPI}}
	planted := []byte("-----BEGIN OPENSSH PRIVATE KEY-----\nplanted\n")
	for _, tc := range []struct {
		name    string
		labels  map[string]string
		wantErr bool
	}{
		{"unlabelled", nil, true},
		{"another job's", map[string]string{v1alpha1.LabelJobName: "other"}, true},
		{"the job's name, no identity", map[string]string{v1alpha1.LabelJobName: "github-deploy"}, true},
		{"the job's name, another workflow's identity", map[string]string{v1alpha1.LabelJobName: "github-deploy", v1alpha1.LabelIdentity: "0badc0de"}, true},
		{"the job's own, from an earlier attempt", map[string]string{v1alpha1.LabelJobName: "github-deploy", v1alpha1.LabelIdentity: "5eed"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: mpi.SSHSecretName(job.Name), Namespace: "team", Labels: tc.labels},
				Data: map[string][]byte{corev1.SSHAuthPrivateKey: planted}}
			core := fake.NewClientset(secret)
			conn := &connection{core: core.CoreV1(), metadata: metadataOf(t, secret), namespace: "team"}
			id := render.Identity{Namespace: "team", JobName: job.Name, OwnerID: "5eed"}
			in, err := renderInputs(context.Background(), conn, job, id, time.Second)
			var re *result.Error
			switch {
			case tc.wantErr && (!errors.As(err, &re) || re.Phase != result.PhaseInvalid || re.Reason != result.ReasonNotOwned):
				t.Fatalf("err %v, want Invalid %s", err, result.ReasonNotOwned)
			case tc.wantErr && !strings.Contains(err.Error(), "secret github-deploy-ssh"):
				t.Errorf("error %q does not name the secret", err)
			case !tc.wantErr && (err != nil || string(in.SSHPrivateKey) != string(planted)):
				t.Errorf("the job's own key not reused: %v", err)
			case tc.wantErr && in.SSHPrivateKey != nil:
				t.Error("a key came back with the error")
			case tc.wantErr && len(core.Actions()) > 0:
				t.Errorf("another owner's Secret was read: %v", core.Actions())
			}
		})
	}
}

// metadataOf is a metadata client that serves the metadata of objs.
func metadataOf(t *testing.T, objs ...*corev1.Secret) *metadatafake.FakeMetadataClient {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	var metas []runtime.Object
	for _, o := range objs {
		metas = append(metas, &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}, ObjectMeta: o.ObjectMeta})
	}
	return metadatafake.NewSimpleMetadataClient(scheme, metas...)
}
