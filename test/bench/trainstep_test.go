package bench

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/trainstep/trainstep/pkg/timeline"
)

func TestLastCreateReadsTrainstepsTimeline(t *testing.T) {
	start := time.Now().Add(-2 * time.Second)
	tl := timeline.New(start)
	tl.Mark("informers synced")
	tl.Created()
	tl.Mark("last create")
	tl.Mark("run ended")
	file := filepath.Join(t.TempDir(), "timeline.txt")
	require.NoError(t, tl.WriteFile(file))
	at, err := LastCreate(file)
	require.NoError(t, err)
	marks := tl.Marks()
	assert.InDelta(t, float64(marks[2].At), float64(at), float64(100*time.Microsecond), "the table prints tenths of a millisecond")

	require.NoError(t, os.WriteFile(file, []byte("at + stage\n 1.0ms 1.0ms first create\n"), 0o644))
	_, err = LastCreate(file)
	assert.ErrorContains(t, err, `no "last create" line`)
}
