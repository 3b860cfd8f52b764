package trainer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"
)

// PyTorchEnv is the all-reduce topology as PyTorch's launch environment
// describes it (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE).
type PyTorchEnv struct {
	MasterAddr string
	MasterPort int
	Rank       int
	WorldSize  int
}

// Validate reports a topology no ring can be built from.
func (e PyTorchEnv) Validate() error {
	switch {
	case e.WorldSize < 1:
		return fmt.Errorf("WORLD_SIZE must be at least 1, got %d", e.WorldSize)
	case e.Rank < 0 || e.Rank >= e.WorldSize:
		return fmt.Errorf("RANK must be in [0, %d), got %d", e.WorldSize, e.Rank)
	case e.WorldSize > 1 && e.MasterAddr == "":
		return errors.New("MASTER_ADDR must be set")
	case e.WorldSize > 1 && (e.MasterPort < 1 || e.MasterPort > 65535):
		return fmt.Errorf("MASTER_PORT must be a port number, got %d", e.MasterPort)
	}
	return nil
}

func (e PyTorchEnv) masterAddress() string {
	return net.JoinHostPort(e.MasterAddr, strconv.Itoa(e.MasterPort))
}

// hello is the first line on every connection to a rendezvous or ring
// listener: a rank registering its ring address, or a rank joining the ring
// as its listener's previous neighbour.
type hello struct {
	Kind  string `json:"kind"` // helloRegister or helloRing
	Rank  int    `json:"rank"`
	World int    `json:"world,omitempty"`
	Addr  string `json:"addr,omitempty"`
}

const (
	helloRegister = "register"
	helloRing     = "ring"
)

// roster is rank 0's answer to a registration: every rank's ring address
// (rank 0's is empty: each rank reaches it at its own MASTER_ADDR), the
// settings every rank trains with, and the rank it gave a node that asked
// for one (Paddle's nodes are ranked by the rendezvous).
type roster struct {
	Peers    []string  `json:"peers,omitempty"`
	Settings *Settings `json:"settings,omitempty"`
	Rank     int       `json:"rank,omitempty"`
	Error    string    `json:"error,omitempty"`
}

// assignRank is the rank a node registers with when the rendezvous is to
// rank it, in the order the nodes arrive.
const assignRank = -1

// RunAllReduce trains as one rank of a ring all-reduce and writes the
// metrics on rank 0. A rank that dies fails the others' next step.
func RunAllReduce(ctx context.Context, s Settings, env PyTorchEnv, log *Logger) error {
	if err := env.Validate(); err != nil {
		return err
	}
	ring, agreed, err := JoinRing(ctx, s, env, log)
	if err != nil {
		return fmt.Errorf("joining the ring: %w", err)
	}
	defer ring.Close()
	log.Printf("rank %d of %d: ring ready", env.Rank, env.WorldSize)
	return trainSynchronously(ctx, agreed, env.Rank, env.WorldSize, ring, log, false)
}

// JoinRing runs the rendezvous and connects this rank to its ring
// neighbours. Rank 0 hosts the rendezvous on MASTER_PORT; every other rank
// registers the address of a listener of its own, with the host taken from
// its connection to rank 0 so the address is reachable both in pods and on
// 127.0.0.1. It returns the settings of rank 0, which all ranks train with.
func JoinRing(ctx context.Context, s Settings, env PyTorchEnv, log *Logger) (*Ring, Settings, error) {
	if env.WorldSize == 1 {
		return &Ring{world: 1}, s, nil
	}
	if env.Rank == 0 {
		ring, err := hostRing(ctx, s, env)
		return ring, s, err
	}
	return joinHostedRing(ctx, s, env, log)
}

func hostRing(ctx context.Context, s Settings, env PyTorchEnv) (*Ring, error) {
	ln, err := net.Listen("tcp", ":"+strconv.Itoa(env.MasterPort))
	if err != nil {
		return nil, fmt.Errorf("listening on MASTER_PORT: %w", err)
	}
	return hostRingOn(ctx, s, env, ln)
}

// hostRingOn hosts the rendezvous, as rank 0, on ln, which it closes.
func hostRingOn(ctx context.Context, s Settings, env PyTorchEnv, ln net.Listener) (*Ring, error) {
	defer ln.Close()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	registrations := make(chan registration)
	fromPrevious := make(chan net.Conn, 1)
	done := make(chan struct{})
	defer close(done)
	go acceptHellos(ln, env.WorldSize-1, registrations, fromPrevious, done)

	peers, err := collectRegistrations(ctx, s, env, registrations)
	if err != nil {
		return nil, err
	}
	next, err := dialRingNeighbour(ctx, peers[1], 0, s.ConnectTimeout)
	if err != nil {
		return nil, err
	}
	prev, err := awaitConn(ctx, fromPrevious, s.ConnectTimeout)
	if err != nil {
		next.Close()
		return nil, fmt.Errorf("waiting for rank %d to connect: %w", env.WorldSize-1, err)
	}
	return &Ring{rank: 0, world: env.WorldSize, next: next, prev: prev, timeout: s.ConnectTimeout}, nil
}

type registration struct {
	hello hello
	conn  net.Conn
}

// acceptHellos sorts connections to a listener by their hello until the
// listener closes: registrations go to one channel, the previous
// neighbour's ring connection to the other. Connections arriving after
// done is closed are dropped.
func acceptHellos(ln net.Listener, previousRank int, registrations chan<- registration, fromPrevious chan<- net.Conn, done <-chan struct{}) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			var h hello
			if err := readLine(conn, &h); err != nil {
				conn.Close()
				return
			}
			conn.SetReadDeadline(time.Time{})
			switch {
			case h.Kind == helloRegister && registrations != nil:
				select {
				case registrations <- registration{hello: h, conn: conn}:
				case <-done:
					conn.Close()
				}
			case h.Kind == helloRing && h.Rank == previousRank:
				select {
				case fromPrevious <- conn:
				default: // a second previous neighbour: keep the first
					conn.Close()
				}
			default:
				conn.Close()
			}
		}()
	}
}

// collectRegistrations waits until every other rank has registered, then
// sends each the roster. A rank that registers again (it restarted before
// the ring formed) replaces its earlier registration.
func collectRegistrations(ctx context.Context, s Settings, env PyTorchEnv, registrations <-chan registration) ([]string, error) {
	byRank := map[int]registration{}
	assigned := 0
	defer func() {
		for _, r := range byRank {
			r.conn.Close()
		}
	}()
	timeout := time.NewTimer(s.ConnectTimeout)
	defer timeout.Stop()
	for len(byRank) < env.WorldSize-1 {
		select {
		case r := <-registrations:
			if r.hello.Rank == assignRank && assigned < env.WorldSize-1 {
				assigned++
				r.hello.Rank = assigned
			}
			if err := checkRegistration(r.hello, env.WorldSize); err != nil {
				writeLine(r.conn, roster{Error: err.Error()})
				r.conn.Close()
				return nil, err
			}
			if old, ok := byRank[r.hello.Rank]; ok {
				old.conn.Close()
			}
			byRank[r.hello.Rank] = r
		case <-timeout.C:
			return nil, fmt.Errorf("only %d of %d ranks registered within %v", len(byRank)+1, env.WorldSize, s.ConnectTimeout)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	peers := make([]string, env.WorldSize)
	for rank, r := range byRank {
		peers[rank] = r.hello.Addr
	}
	var errs []error
	for rank, r := range byRank {
		answer := roster{Peers: peers, Settings: &s, Rank: rank}
		r.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if err := writeLine(r.conn, answer); err != nil {
			errs = append(errs, fmt.Errorf("sending the roster to rank %d: %w", rank, err))
		}
	}
	return peers, errors.Join(errs...)
}

func checkRegistration(h hello, world int) error {
	switch {
	case h.World != world:
		return fmt.Errorf("rank %d says WORLD_SIZE is %d, rank 0 says %d", h.Rank, h.World, world)
	case h.Rank < 1 || h.Rank >= world:
		return fmt.Errorf("a rank registered as %d, outside [1, %d)", h.Rank, world)
	case h.Addr == "":
		return fmt.Errorf("rank %d registered no address", h.Rank)
	}
	return nil
}

func joinHostedRing(ctx context.Context, s Settings, env PyTorchEnv, log *Logger) (*Ring, Settings, error) {
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		return nil, s, fmt.Errorf("listening for the previous rank: %w", err)
	}
	defer ln.Close()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	answer, err := register(ctx, s, env, ln.Addr().(*net.TCPAddr).Port)
	if err != nil {
		return nil, s, err
	}
	if env.Rank == assignRank {
		env.Rank = answer.Rank
		log.Printf("the rendezvous ranked this node %d of %d", env.Rank, env.WorldSize)
	}
	// The previous rank's connection waits in the listen queue meanwhile.
	fromPrevious := make(chan net.Conn, 1)
	done := make(chan struct{})
	defer close(done)
	go acceptHellos(ln, env.Rank-1, nil, fromPrevious, done)
	agreed := adoptSettings(s, *answer.Settings, log)
	nextRank := (env.Rank + 1) % env.WorldSize
	nextAddr := answer.Peers[nextRank]
	if nextRank == 0 {
		nextAddr = env.masterAddress()
	}
	next, err := dialRingNeighbour(ctx, nextAddr, env.Rank, s.ConnectTimeout)
	if err != nil {
		return nil, s, err
	}
	prev, err := awaitConn(ctx, fromPrevious, s.ConnectTimeout)
	if err != nil {
		next.Close()
		return nil, s, fmt.Errorf("waiting for rank %d to connect: %w", env.Rank-1, err)
	}
	return &Ring{rank: env.Rank, world: env.WorldSize, next: next, prev: prev, timeout: s.ConnectTimeout}, agreed, nil
}

// register tells rank 0 where this rank listens and waits for the roster.
func register(ctx context.Context, s Settings, env PyTorchEnv, port int) (roster, error) {
	conn, err := dialWithRetry(ctx, env.masterAddress(), s.ConnectTimeout)
	if err != nil {
		return roster{}, fmt.Errorf("reaching rank 0: %w", err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	// The address rank 0 reached us from is one the other ranks can reach too.
	host := conn.LocalAddr().(*net.TCPAddr).IP.String()
	me := hello{Kind: helloRegister, Rank: env.Rank, World: env.WorldSize, Addr: net.JoinHostPort(host, strconv.Itoa(port))}
	if err := writeLine(conn, me); err != nil {
		return roster{}, fmt.Errorf("registering with rank 0: %w", err)
	}
	conn.SetReadDeadline(time.Now().Add(s.ConnectTimeout))
	var answer roster
	if err := readLine(conn, &answer); err != nil {
		return roster{}, fmt.Errorf("waiting for the roster from rank 0: %w", err)
	}
	switch {
	case answer.Error != "":
		return roster{}, fmt.Errorf("rank 0 refused the registration: %s", answer.Error)
	case len(answer.Peers) != env.WorldSize || answer.Settings == nil:
		return roster{}, fmt.Errorf("rank 0 sent a roster of %d ranks for WORLD_SIZE %d", len(answer.Peers), env.WorldSize)
	case env.Rank == assignRank && (answer.Rank < 1 || answer.Rank >= env.WorldSize):
		return roster{}, fmt.Errorf("rank 0 gave this node rank %d, outside [1, %d)", answer.Rank, env.WorldSize)
	}
	return answer, nil
}

// adoptSettings takes rank 0's training settings (what every rank must
// agree on) and keeps this rank's own pacing, logging and output settings.
func adoptSettings(own, rank0 Settings, log *Logger) Settings {
	agreed := own
	agreed.Steps, agreed.LR, agreed.TargetLoss = rank0.Steps, rank0.LR, rank0.TargetLoss
	agreed.Features, agreed.Samples, agreed.Seed = rank0.Features, rank0.Samples, rank0.Seed
	if agreed != own {
		log.Printf("using rank 0's settings: steps %d lr %v features %d samples %d seed %d target-loss %v",
			agreed.Steps, agreed.LR, agreed.Features, agreed.Samples, agreed.Seed, agreed.TargetLoss)
	}
	return agreed
}

func dialRingNeighbour(ctx context.Context, addr string, myRank int, timeout time.Duration) (net.Conn, error) {
	conn, err := dialWithRetry(ctx, addr, timeout)
	if err != nil {
		return nil, fmt.Errorf("connecting to the next rank: %w", err)
	}
	if err := writeLine(conn, hello{Kind: helloRing, Rank: myRank}); err != nil {
		conn.Close()
		return nil, fmt.Errorf("greeting the next rank: %w", err)
	}
	return conn, nil
}

func awaitConn(ctx context.Context, conns <-chan net.Conn, timeout time.Duration) (net.Conn, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case c := <-conns:
		return c, nil
	case <-t.C:
		return nil, fmt.Errorf("no connection within %v", timeout)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
