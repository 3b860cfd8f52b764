package trainer

import (
	"context"
	"fmt"
	"net"
	"strconv"
)

// PaddleEnv is the collective topology as PaddlePaddle's launcher
// (python -m paddle.distributed.launch) reads it from the environment
// Training Operator gives a PaddleJob: PADDLE_MASTER, the rendezvous
// (host:port: the node's own pod IP on the node that hosts it, that node's
// Service elsewhere), PADDLE_NNODES, every node, PADDLE_JOB_ID, and in
// parameter-server mode PADDLE_SERVER_NUM on a server, PADDLE_TRAINER_NUM on
// a trainer.
type PaddleEnv struct {
	Master string
	Nodes  int
	JobID  string
	// Role is "server" or "trainer" in parameter-server mode, "" in
	// collective mode.
	Role string
}

// Validate reports an environment no rendezvous can be held with.
func (e PaddleEnv) Validate() error {
	if e.Nodes < 1 {
		return fmt.Errorf("PADDLE_NNODES must be at least 1, got %d", e.Nodes)
	}
	host, port, err := net.SplitHostPort(e.Master)
	if err != nil || host == "" {
		return fmt.Errorf("PADDLE_MASTER must be host:port, got %q", e.Master)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("PADDLE_MASTER's port must be a port number, got %q", port)
	}
	return nil
}

// RunPaddle trains as one node of a Paddle job, as Paddle's launcher
// rendezvouses: the node that can listen on PADDLE_MASTER (the address is
// its own) hosts the rendezvous and is rank 0; every other node registers
// with it and is ranked in the order it arrives. The nodes then all-reduce
// in a ring, servers and trainers alike (this trainer has no parameter
// server of its own). Every node writes the metrics: which replica is rank
// 0 is the rendezvous's choice, and the job's metrics are read from the
// replica that decides its success.
func RunPaddle(ctx context.Context, s Settings, env PaddleEnv, log *Logger) error {
	if err := env.Validate(); err != nil {
		return err
	}
	host, portText, _ := net.SplitHostPort(env.Master)
	port, _ := strconv.Atoi(portText)
	topology := PyTorchEnv{MasterAddr: host, MasterPort: port, WorldSize: env.Nodes, Rank: assignRank}
	role := env.Role
	if role == "" {
		role = "collective"
	}
	log.Printf("paddle job %s: %s node of %d, rendezvous at %s", env.JobID, role, env.Nodes, env.Master)
	if env.Nodes == 1 {
		return trainSynchronously(ctx, s, 0, 1, soloReducer{}, log, true)
	}
	var ring *Ring
	agreed := s
	ln, listenErr := net.Listen("tcp", env.Master)
	if listenErr == nil {
		topology.Rank = 0
		log.Printf("hosting the rendezvous at %s as rank 0", env.Master)
		ring, listenErr = hostRingOn(ctx, s, topology, ln)
		if listenErr != nil {
			return fmt.Errorf("hosting the rendezvous: %w", listenErr)
		}
	} else {
		var err error
		if ring, agreed, err = joinHostedRing(ctx, s, topology, log); err != nil {
			return fmt.Errorf("joining the rendezvous at %s: %w", env.Master, err)
		}
	}
	defer ring.Close()
	log.Printf("rank %d of %d: ring ready", ring.rank, ring.world)
	return trainSynchronously(ctx, agreed, ring.rank, ring.world, ring, log, true)
}
