package e2e_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// allReduceClaim is the PersistentVolumeClaim workflows/jobs/demo-allreduce.yaml keeps
// rank 0's checkpoints on.
const allReduceClaim = "demo-allreduce-checkpoints"

// checkpointClaim creates, in the test's namespace, the PersistentVolumeClaim claim bound
// to a PersistentVolume of its own: a directory of this machine, which is the real node,
// writable by every user (the replicas run as the images' users). A job's pods mount the
// claim, as the replica policy and PodSecurity `restricted` want, instead of a hostPath;
// the test reads the directory to see the checkpoints. Both go when the test ends. The
// namespace's settings allow the claim (allowedPVCs), as its admin would.
func (e *e2e) checkpointClaim(t *testing.T, claim string) string {
	t.Helper()
	e.allowInPolicy(t, "allowedPVCs", claim)
	dir := filepath.Join("/var/tmp", "trainstep-e2e-"+e.namespace+"-"+claim)
	if err := os.MkdirAll(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil { // past the umask
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	size := corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Mi")}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: e.namespace + "-" + claim},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      size,
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              "",
			ClaimRef:                      &corev1.ObjectReference{Namespace: e.namespace, Name: claim},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir}},
		},
	}
	if _, err := e.c.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating PersistentVolume %s: %v", pv.Name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = e.c.Client.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{})
	})
	noClass := ""
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: claim, Namespace: e.namespace},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: size},
			StorageClassName: &noClass,
			VolumeName:       pv.Name,
		},
	}
	if _, err := e.c.Client.CoreV1().PersistentVolumeClaims(e.namespace).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating PersistentVolumeClaim %s: %v", claim, err)
	}
	return dir
}
