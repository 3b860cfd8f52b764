// Package trainer is trainstep's demo trainer: data-parallel linear
// regression on a synthetic dataset, in four shapes — a single process, a
// TensorFlow-style parameter-server cluster (TF_CONFIG), a PyTorch-style
// ring all-reduce (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE) and the same
// ring ranked by a Paddle-style rendezvous (PADDLE_MASTER, PADDLE_NNODES).
//
// It exists so a TrainJob can be run for real, locally or on a cluster,
// without any ML framework installed. It uses the standard library only and
// must stay small: it is a demonstration of the topologies trainstep wires
// up, not a training library. It does not read flags or the environment
// itself; the command passes everything in through Settings and the parsed
// topology.
package trainer
