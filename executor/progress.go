package executor

import (
	"go.uber.org/zap"

	"github.com/trainstep/trainstep/pkg/outputs"
	"github.com/trainstep/trainstep/pkg/reconcile"
)

// progressReporter logs the progress line and writes Argo's "N/M" progress
// file whenever the replica counts change.
func progressReporter(cfg *Config, log *zap.Logger) func(reconcile.Progress) {
	return func(p reconcile.Progress) {
		log.Info(p.String(), zap.Int("active", p.Active), zap.Int("total", p.Total), zap.Int32("restarts", p.Restarts))
		if err := outputs.WriteProgress(cfg.ProgressFile, p.Active, p.Total); err != nil {
			log.Warn("writing the progress file", zap.String("path", cfg.ProgressFile), zap.Error(err))
		}
	}
}
