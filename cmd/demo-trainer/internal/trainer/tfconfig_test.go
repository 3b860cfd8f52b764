package trainer

import (
	"strings"
	"testing"
)

func TestParseTFConfig(t *testing.T) {
	// The shape the Kubeflow Training Operator writes (kubeflow/training-operator,
	// pkg/controller.v1/tensorflow/tensorflow.go: genTFConfigJSONStr, which
	// leaves the evaluator out of the cluster).
	const cluster = `"cluster":{"chief":["j-chief-0:2222"],"ps":["j-ps-0:2222","j-ps-1:2222"],"worker":["j-worker-0:2222","j-worker-1:2222"]}`
	cases := []struct {
		name        string
		raw         string
		wantErr     string
		wantRank    int
		wantWorld   int
		wantTrains  bool
		wantDecider bool
	}{
		{name: "chief decides", raw: `{` + cluster + `,"task":{"type":"chief","index":0},"environment":"cloud"}`,
			wantRank: 0, wantWorld: 3, wantTrains: true, wantDecider: true},
		{name: "worker after the chief", raw: `{` + cluster + `,"task":{"type":"worker","index":1},"environment":"cloud"}`,
			wantRank: 2, wantWorld: 3, wantTrains: true},
		{name: "ps does not train", raw: `{` + cluster + `,"task":{"type":"ps","index":1}}`, wantWorld: 3},
		{name: "worker 0 decides without a chief", raw: `{"cluster":{"ps":["p:1"],"worker":["w0:1","w1:1"]},"task":{"type":"worker","index":0}}`,
			wantRank: 0, wantWorld: 2, wantTrains: true, wantDecider: true},
		{name: "TensorFlow 1 master decides", raw: `{"cluster":{"master":["m:1"],"ps":["p:1"],"worker":["w0:1"]},"task":{"type":"master","index":0}}`,
			wantRank: 0, wantWorld: 2, wantTrains: true, wantDecider: true},
		{name: "not JSON", raw: `cluster`, wantErr: "parsing TF_CONFIG"},
		{name: "no ps", raw: `{"cluster":{"worker":["w0:1"]},"task":{"type":"worker","index":0}}`, wantErr: "no ps tasks"},
		{name: "no training task", raw: `{"cluster":{"ps":["p:1"]},"task":{"type":"ps","index":0}}`, wantErr: "no chief or worker"},
		{name: "evaluator is not in the cluster", raw: `{` + cluster + `,"task":{"type":"evaluator","index":0}}`, wantWorld: 3},
		{name: "unknown task type", raw: `{` + cluster + `,"task":{"type":"trainer","index":0}}`, wantErr: `task.type "trainer"`},
		{name: "index out of range", raw: `{` + cluster + `,"task":{"type":"worker","index":2}}`, wantErr: "task.index 2"},
		{name: "ps address without port", raw: `{"cluster":{"ps":["p"],"worker":["w:1"]},"task":{"type":"worker","index":0}}`, wantErr: `ps address "p"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := ParseTFConfig(tc.raw)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			rank, world, trains := cfg.trainingRank()
			if trains != tc.wantTrains || world != tc.wantWorld || (trains && rank != tc.wantRank) {
				t.Errorf("trainingRank() = %d, %d, %v; want %d, %d, %v", rank, world, trains, tc.wantRank, tc.wantWorld, tc.wantTrains)
			}
			if got := cfg.isDecider(); got != tc.wantDecider {
				t.Errorf("isDecider() = %v, want %v", got, tc.wantDecider)
			}
		})
	}
}

func TestShardRangesCoverEveryFeatureOnce(t *testing.T) {
	for _, tc := range []struct{ features, shards int }{{12, 1}, {12, 2}, {13, 3}, {3, 5}} {
		next := 0
		for i := range tc.shards {
			start, end := shardRange(tc.features, tc.shards, i)
			if start != next || end < start {
				t.Errorf("%d features over %d shards: shard %d is [%d, %d), expected it to start at %d", tc.features, tc.shards, i, start, end, next)
			}
			next = end
		}
		if next != tc.features {
			t.Errorf("%d features over %d shards: the shards end at %d", tc.features, tc.shards, next)
		}
	}
}
