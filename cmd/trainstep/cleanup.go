package main

import (
	"encoding/json"
	"fmt"

	"github.com/go-logr/zapr"
	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"github.com/trainstep/trainstep/executor"
	"github.com/trainstep/trainstep/pkg/result"
)

type cleanupFlags struct {
	cfg        executor.CleanupConfig
	kubeconfig string
	context    string
	logFormat  string
}

func newCleanupCommand() *cobra.Command {
	f := &cleanupFlags{}
	cmd := &cobra.Command{
		Use:   "cleanup --workflow-uid UID",
		Short: "Delete the replicas a workflow's training steps left running (the templates' exit handler)",
		Long: `Delete every replica pod still running of the jobs a workflow ran, when the workflow
ends: the shipped templates' exit handler runs it, so that no replica outlives its
workflow, whatever became of its step (OOM-killed, its node lost, its retries used up).

It deletes only pods labelled trainstep.dev/job-name whose controller is the workflow
--workflow-uid, and proves that workflow from the pod its ServiceAccount token is bound
to, as 'trainstep run' proves a step's identity. Finished pods and the jobs' other
objects go with the workflow, through the garbage collector. Prints the deleted pods as
one JSON line. Exit codes: 0 done, 11 Invalid, 12 Transient.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return f.run(cmd) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.cfg.WorkflowUID, "workflow-uid", "", "UID of the workflow ({{workflow.uid}})")
	fl.StringVar(&f.cfg.OwnerPod, "owner-pod", "", "the pod the cleanup runs in (downward API metadata.name)")
	fl.StringVar(&f.cfg.OwnerUID, "owner-uid", "", "UID of that pod (downward API metadata.uid)")
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, else ~/.kube/config, else the in-cluster config)")
	fl.StringVar(&f.context, "context", "", "kubeconfig context to use")
	fl.DurationVar(&f.cfg.APITimeout, "api-timeout", executor.DefaultAPITimeout, "how long an unreachable API server is retried before the cleanup ends Transient (exit 12)")
	fl.StringVar(&f.logFormat, "log-format", "", "log format on stderr: json or console (default: console on a terminal, else json)")
	return cmd
}

func (f *cleanupFlags) run(cmd *cobra.Command) error {
	logger, err := newLogger(f.logFormat)
	if err != nil {
		return result.Invalid(result.ReasonInvalidArguments, err)
	}
	defer func() { _ = logger.Sync() }()
	klog.SetLogger(zapr.NewLogger(logger.Named("klog")))
	cfg := f.cfg
	cfg.Kubeconfig, cfg.KubeconfigPaths, cfg.KubeContext = f.kubeconfig, kubeconfigPaths(), f.context
	cfg.PodNamespace, cfg.Logger = podNamespace(), logger
	res, err := executor.Cleanup(cmd.Context(), cfg)
	if res.Deleted == nil {
		res.Deleted = []string{}
	}
	line, jerr := json.Marshal(res)
	if jerr == nil {
		fmt.Fprintln(cmd.OutOrStdout(), string(line))
	}
	return err
}
