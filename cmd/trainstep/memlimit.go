package main

import (
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/trainstep/trainstep/pkg/result"
)

// envMemoryLimit carries the container's memory limit in bytes: the
// templates fill it through the downward API (resourceFieldRef
// limits.memory), which cannot scale the value to a share of it.
const envMemoryLimit = "TRAINSTEP_MEMORY_LIMIT"

// goMemoryLimit returns the soft memory limit to give the Go runtime (what
// GOMEMLIMIT sets) from getenv: 90% of TRAINSTEP_MEMORY_LIMIT, rounded
// down. The other 10% cover what the runtime does not count, such as the
// binary's mapped pages, so the garbage collector works harder before the
// kernel would OOM-kill the step. ok is false when that
// is unset, or when GOMEMLIMIT is set: the runtime has applied that one
// itself, and an explicit setting wins.
func goMemoryLimit(getenv func(string) string) (limit int64, ok bool, err error) {
	if getenv("GOMEMLIMIT") != "" {
		return 0, false, nil
	}
	raw := strings.TrimSpace(getenv(envMemoryLimit))
	if raw == "" {
		return 0, false, nil
	}
	bytes, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || bytes <= 0 {
		return 0, false, result.Invalid(result.ReasonInvalidArguments, fmt.Errorf("$%s: %q is not a positive number of bytes", envMemoryLimit, raw))
	}
	return bytes/10*9 + bytes%10*9/10, true, nil
}

// applyMemoryLimit sets the Go runtime's soft memory limit from getenv and
// logs it.
func applyMemoryLimit(getenv func(string) string, logger *zap.Logger) error {
	limit, ok, err := goMemoryLimit(getenv)
	if err != nil {
		return err
	}
	if ok {
		debug.SetMemoryLimit(limit)
		logger.Info("Go memory limit set", zap.Int64("bytes", limit), zap.String("from", envMemoryLimit))
	}
	return nil
}
