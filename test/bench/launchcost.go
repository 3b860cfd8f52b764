package bench

import (
	"context"
	"fmt"

	"k8s.io/client-go/rest"
)

// LaunchCost is what one side's launch cost the machine: the CPU each
// program used, the watches kube-apiserver cut and the writes it made to
// etcd meanwhile.
type LaunchCost struct {
	CPU    ProcessCPU
	Cuts   WatchCuts
	Writes StoreWrites
}

func (c LaunchCost) String() string {
	return fmt.Sprintf("%s; watches kube-apiserver cut as too slow meanwhile: %s; %s", c.CPU, c.Cuts, c.Writes)
}

// LaunchMeter measures a LaunchCost. NewLaunchMeter reads kube-apiserver's
// metrics (Quiesce calls it once no namespace is being deleted, before the
// wait for a quiet machine, since reading them is work of its own); Start
// reads the CPU as the launch starts; Stop reads both again.
type LaunchMeter struct {
	client rest.Interface // an admin's
	cpu    ProcessCPU
	cuts   WatchCuts
	writes StoreWrites
}

func NewLaunchMeter(ctx context.Context, client rest.Interface) (*LaunchMeter, error) {
	m := &LaunchMeter{client: client}
	var err error
	m.cuts, m.writes, err = readCutsAndWrites(ctx, client)
	if err != nil {
		return nil, err
	}
	return m, nil
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
	cuts, writes, err := readCutsAndWrites(ctx, m.client)
	if err != nil {
		return LaunchCost{}, err
	}
	return LaunchCost{CPU: used, Cuts: cuts.Since(m.cuts), Writes: writes.Since(m.writes)}, nil
}

func readCutsAndWrites(ctx context.Context, client rest.Interface) (WatchCuts, StoreWrites, error) {
	metrics, err := readAPIServerMetrics(ctx, client)
	if err != nil {
		return nil, StoreWrites{}, err
	}
	cuts, err := parseWatchCuts(metrics)
	if err != nil {
		return nil, StoreWrites{}, err
	}
	writes, err := parseStoreWrites(metrics)
	return cuts, writes, err
}
