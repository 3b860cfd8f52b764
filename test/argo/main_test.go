// Package argo_test proves trainstep's Argo integration with Argo's own code:
// every manifest under templates/, workflows/ and deploy/ parses strictly;
// every Workflow, WorkflowTemplate, ClusterWorkflowTemplate and CronWorkflow
// passes Argo's validator (the one `argo lint` runs), with templateRefs
// resolved to templates/; the `train` template's job name and retry
// expression behave as Argo evaluates them; and, on the test cluster, the
// executor run exactly as the template calls it, as the ServiceAccount
// deploy/ creates, succeeds and writes every output parameter file.
//
// The tests read the repository's files and must not modify them.
package argo_test

import (
	"testing"

	"github.com/trainstep/trainstep/test/cluster"
)

// TestMain starts the test cluster for the end-to-end test; the other tests
// need none and run (the cluster tests skip) without the cluster binaries.
func TestMain(m *testing.M) { cluster.Main(m) }
