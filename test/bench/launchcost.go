package bench

import (
	"context"
	"fmt"

	"k8s.io/client-go/rest"
)

// LaunchCost is what one side's launch cost the machine: the CPU each
// program used and the watches kube-apiserver cut meanwhile.
type LaunchCost struct {
	CPU  ProcessCPU
	Cuts WatchCuts
}

func (c LaunchCost) String() string {
	return fmt.Sprintf("%s; watches kube-apiserver cut as too slow meanwhile: %s", c.CPU, c.Cuts)
}

// LaunchMeter measures a LaunchCost. NewLaunchMeter reads the cuts before
// the wait for a quiet machine, since reading kube-apiserver's metrics is
// work of its own; Start reads the CPU as the launch starts; Stop reads both
// again.
type LaunchMeter struct {
	client rest.Interface // an admin's
	cpu    ProcessCPU
	cuts   WatchCuts
}

func NewLaunchMeter(ctx context.Context, client rest.Interface) (*LaunchMeter, error) {
	cuts, err := ReadWatchCuts(ctx, client)
	if err != nil {
		return nil, err
	}
	return &LaunchMeter{client: client, cuts: cuts}, nil
}

func (m *LaunchMeter) Start() error {
	cpu, err := ReadProcessCPU()
	m.cpu = cpu
	return err
}

func (m *LaunchMeter) Stop(ctx context.Context) (LaunchCost, error) {
	used, err := CPUSince(m.cpu)
	if err != nil {
		return LaunchCost{}, err
	}
	cuts, err := ReadWatchCuts(ctx, m.client)
	if err != nil {
		return LaunchCost{}, err
	}
	return LaunchCost{CPU: used, Cuts: cuts.Since(m.cuts)}, nil
}
