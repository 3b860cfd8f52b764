package trainer

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"time"
)

// Ring is one rank's place in a ring of ranks connected over TCP: it sends
// to the next rank and receives from the previous one. A rank that dies
// breaks the ring; the others then fail on their next step rather than
// wait forever, which is how collective training behaves.
type Ring struct {
	rank, world int
	next, prev  net.Conn
	// timeout bounds one exchange with a neighbour; a healthy neighbour is
	// at most one step behind.
	timeout time.Duration
}

// Close closes the ring's connections.
func (r *Ring) Close() error {
	var errs []error
	for _, c := range []net.Conn{r.next, r.prev} {
		if c != nil {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}

// AllReduce replaces v on every rank by the element-wise sum of v over all
// ranks: a reduce-scatter then an all-gather, each world−1 exchanges of one
// chunk. Each chunk is summed on one rank and copied to the others, so every
// rank ends with bit-identical values. A failed all-reduce leaves the
// byte streams out of step, so it closes the ring: the neighbours then fail
// at once too, instead of waiting out their timeout.
func (r *Ring) AllReduce(ctx context.Context, v []float64) error {
	if r.world <= 1 {
		return nil
	}
	err := r.allReduce(ctx, v)
	if err != nil {
		r.Close()
	}
	return err
}

func (r *Ring) allReduce(ctx context.Context, v []float64) error {
	// Unblock reads and writes at once when ctx ends.
	stop := context.AfterFunc(ctx, func() {
		r.next.SetDeadline(time.Unix(1, 0))
		r.prev.SetDeadline(time.Unix(1, 0))
	})
	defer stop()
	received := make([]float64, len(v)/r.world+1)
	for s := range r.world - 1 {
		send, recv := r.chunk(v, r.rank-s), r.chunk(v, r.rank-s-1)
		if err := r.exchange(send, received[:len(recv)]); err != nil {
			return fmt.Errorf("reduce-scatter exchange %d: %w", s, err)
		}
		for i, x := range received[:len(recv)] {
			recv[i] += x
		}
	}
	for s := range r.world - 1 {
		send, recv := r.chunk(v, r.rank+1-s), r.chunk(v, r.rank-s)
		if err := r.exchange(send, recv); err != nil {
			return fmt.Errorf("all-gather exchange %d: %w", s, err)
		}
	}
	return ctx.Err()
}

// chunk is the c-th of world nearly equal slices of v (c taken modulo world).
func (r *Ring) chunk(v []float64, c int) []float64 {
	c = ((c % r.world) + r.world) % r.world
	return v[c*len(v)/r.world : (c+1)*len(v)/r.world]
}

// exchange sends send to the next rank while receiving len(into) values
// from the previous one; doing both at once keeps the ring from deadlocking
// when chunks outgrow the socket buffers.
func (r *Ring) exchange(send, into []float64) error {
	deadline := time.Now().Add(r.timeout)
	r.next.SetWriteDeadline(deadline)
	r.prev.SetReadDeadline(deadline)
	sent := make(chan error, 1)
	go func() { sent <- writeFloats(r.next, send) }()
	recvErr := readFloats(r.prev, into)
	if recvErr != nil {
		recvErr = fmt.Errorf("receiving from rank %d: %w", r.neighbour(-1), recvErr)
	}
	sendErr := <-sent
	if sendErr != nil {
		sendErr = fmt.Errorf("sending to rank %d: %w", r.neighbour(+1), sendErr)
	}
	return errors.Join(recvErr, sendErr)
}

func (r *Ring) neighbour(offset int) int { return ((r.rank+offset)%r.world + r.world) % r.world }

func writeFloats(w io.Writer, values []float64) error {
	buf := make([]byte, 8*len(values))
	for i, x := range values {
		binary.LittleEndian.PutUint64(buf[8*i:], math.Float64bits(x))
	}
	_, err := w.Write(buf)
	return err
}

func readFloats(rd io.Reader, into []float64) error {
	buf := make([]byte, 8*len(into))
	if _, err := io.ReadFull(rd, buf); err != nil {
		return err
	}
	for i := range into {
		into[i] = math.Float64frombits(binary.LittleEndian.Uint64(buf[8*i:]))
	}
	return nil
}
