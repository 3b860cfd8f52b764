package trainer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// checkpointFile is the checkpoint's name in the checkpoint directory.
const checkpointFile = "checkpoint.json"

// checkpoint is what a restarted job resumes from: the step reached and
// the weights after it, as a user's trainer keeps them with torch.save.
type checkpoint struct {
	Step    int       `json:"step"`
	Weights []float64 `json:"weights"`
}

// saveCheckpoint writes c to dir atomically (a rank killed mid-write leaves
// the previous checkpoint whole).
func saveCheckpoint(dir string, c checkpoint) error {
	body, err := json.Marshal(c)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, checkpointFile+".*")
	if err != nil {
		return fmt.Errorf("saving the checkpoint: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(body); err != nil {
		tmp.Close()
		return fmt.Errorf("saving the checkpoint: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("saving the checkpoint: %w", err)
	}
	return os.Rename(tmp.Name(), filepath.Join(dir, checkpointFile))
}

// loadCheckpoint reads the checkpoint in dir; ok is false when there is none.
func loadCheckpoint(dir string, features int) (c checkpoint, ok bool, err error) {
	body, err := os.ReadFile(filepath.Join(dir, checkpointFile))
	if errors.Is(err, fs.ErrNotExist) {
		return c, false, nil
	}
	if err != nil {
		return c, false, fmt.Errorf("reading the checkpoint: %w", err)
	}
	if err := json.Unmarshal(body, &c); err != nil {
		return c, false, fmt.Errorf("reading the checkpoint %s: %w", filepath.Join(dir, checkpointFile), err)
	}
	if len(c.Weights) != features || c.Step < 0 {
		return c, false, fmt.Errorf("the checkpoint in %s is of another model (%d weights, step %d)", dir, len(c.Weights), c.Step)
	}
	return c, true, nil
}
