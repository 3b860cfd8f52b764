package executor

import (
	"fmt"

	"go.uber.org/zap"

	"github.com/trainstep/trainstep/pkg/outputs"
	"github.com/trainstep/trainstep/pkg/reconcile"
)

// progressReporter logs the progress line and writes Argo's "N/M" progress
// file whenever the replica counts change. Once the replicas reported a
// training percentage, the line carries it and the file is theirs
// ("<percent>/100", written as each status arrives).
func progressReporter(cfg *Config, log *zap.Logger) func(reconcile.Progress) {
	return func(p reconcile.Progress) {
		line := p.String()
		percent, reported := cfg.status.percentage()
		if reported {
			line += fmt.Sprintf(", training %d%%", percent)
		}
		log.Info(line, zap.Int("active", p.Active), zap.Int("total", p.Total), zap.Int32("restarts", p.Restarts))
		if reported {
			return
		}
		if err := outputs.WriteProgress(cfg.ProgressFile, p.Active, p.Total); err != nil {
			log.Warn("writing the progress file", zap.String("path", cfg.ProgressFile), zap.Error(err))
		}
	}
}
