package bench

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseCPUTimesCountsIOWaitAsIdle(t *testing.T) {
	// user nice system idle iowait irq softirq steal guest guest_nice
	before, err := parseCPUTimes("cpu  100 0 50 800 50 0 0 0 30 0\ncpu0 1 2 3 4\n")
	require.NoError(t, err)
	assert.Equal(t, cpuTimes{total: 1000, idle: 850}, before, "guest time is already in user time")
	after, err := parseCPUTimes("cpu  160 0 70 900 70 0 0 0 30 0\n")
	require.NoError(t, err)
	// 200 ticks passed, 80 of them busy.
	assert.InDelta(t, 0.4, after.busySince(before), 1e-9)
	assert.Zero(t, before.busySince(before), "no time passed")
}

func TestParseCPUTimesRejectsOtherText(t *testing.T) {
	for _, stat := range []string{"", "intr 1 2 3 4 5 6\n", "cpu 1 2 x 4 5\n", "cpu 1 2\n"} {
		_, err := parseCPUTimes(stat)
		assert.Error(t, err, "%q", stat)
	}
}
