package local

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/policy"
)

// Locally every replica is 127.0.0.1 on a port of its own, whichever
// Service layout names it on a cluster: "<pod>" or "<pod>.<ns>.svc" per
// replica, "<pod>.<job>" per job.
func TestBothServiceLayoutsRunTheSameLocally(t *testing.T) {
	for _, layout := range []v1alpha1.ServiceLayout{v1alpha1.ServiceLayoutPerJob, v1alpha1.ServiceLayoutPerReplica} {
		t.Run(string(layout), func(t *testing.T) {
			torch := loadJob(t, strings.ReplaceAll(pytorchJob, "[train", "[sh"))
			torch.Spec.ServiceLayout = layout
			b, _ := planned(t, torch)
			for _, id := range []policy.ReplicaID{master0, worker0, worker1} {
				if got := envOf(t, b, id)["MASTER_ADDR"]; got != "127.0.0.1" {
					t.Errorf("%s: MASTER_ADDR = %q, want 127.0.0.1", id, got)
				}
			}

			tf := loadJob(t, shellJob("tf", "", shellReplicas{"PS", 1, "Never", "true", ""}, shellReplicas{"Worker", 2, "Never", "true", ""}))
			tf.Spec.ServiceLayout = layout
			b, _ = planned(t, tf)
			var cfg struct{ Cluster map[string][]string }
			if err := json.Unmarshal([]byte(envOf(t, b, worker1)["TF_CONFIG"]), &cfg); err != nil {
				t.Fatal(err)
			}
			for task, addrs := range cfg.Cluster {
				for _, addr := range addrs {
					if !strings.HasPrefix(addr, "127.0.0.1:") {
						t.Errorf("TF_CONFIG %s address %q, want 127.0.0.1:<port>", task, addr)
					}
				}
			}
		})
	}
}
