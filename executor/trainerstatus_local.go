package executor

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/backend/local"
	"github.com/trainstep/trainstep/pkg/trainerstatus"
)

// startLocalTrainerStatus serves the job's progress endpoint on 127.0.0.1
// for a local run, with a CA and token of its own in a private directory,
// and returns the variables every process gets, the same a replica gets in
// a cluster (both names of each, before the template's own). close stops
// serving and removes the directory.
func startLocalTrainerStatus(cfg *Config, job *v1alpha1.TrainJob, log *zap.Logger) (e *statusEndpoint, env []corev1.EnvVar, close func(), err error) {
	if !cfg.TrainerStatus {
		return nil, nil, func() {}, nil
	}
	namespace := job.Namespace
	if namespace == "" {
		namespace = local.DefaultNamespace
	}
	material, err := trainerstatus.NewMaterial([]string{"127.0.0.1", "localhost"}, time.Now())
	if err != nil {
		return nil, nil, nil, fmt.Errorf("making the progress endpoint's certificate: %w", err)
	}
	dir, err := os.MkdirTemp("", "trainstep-status-")
	if err != nil {
		return nil, nil, nil, fmt.Errorf("creating the progress endpoint's directory: %w", err)
	}
	caFile, tokenFile := filepath.Join(dir, trainerstatus.CAKey), filepath.Join(dir, trainerstatus.TokenKey)
	if err := writeFiles(map[string][]byte{caFile: material.CACert, tokenFile: material.Token}); err != nil {
		_ = os.RemoveAll(dir)
		return nil, nil, nil, fmt.Errorf("writing the progress endpoint's CA and token: %w", err)
	}
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, nil, nil, fmt.Errorf("listening for the progress endpoint: %w", err)
	}
	e = newStatusEndpoint(cfg, job, namespace, material, log)
	e.listener = listener
	if err := e.server.Serve(listener); err != nil {
		_ = listener.Close()
		_ = os.RemoveAll(dir)
		return nil, nil, nil, err
	}
	url := "https://" + listener.Addr().String() + trainerstatus.Path(namespace, job.Name)
	log.Info("serving the progress endpoint", zap.String("url", url))
	for _, v := range trainerstatus.Environment(url, caFile, tokenFile) {
		env = append(env, corev1.EnvVar{Name: v.Name, Value: v.Value})
	}
	return e, env, func() { e.shutdown(); _ = os.RemoveAll(dir) }, nil
}

func writeFiles(files map[string][]byte) error {
	for path, content := range files {
		if err := os.WriteFile(path, content, 0o600); err != nil {
			return err
		}
	}
	return nil
}
