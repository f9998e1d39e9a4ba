package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
)

// rotation is the load balancer: the replicas that take new requests,
// round robin. A replica leaves it before it is stopped, and is stopped
// only once the requests it was given have ended, as a load balancer
// deregisters a target before its SIGTERM; so any refused connection is
// a failure of a replica that should have served.
type rotation struct {
	mu   sync.Mutex
	up   []*replica
	next int
}

// acquire picks the next replica and counts a request in flight on it;
// release must be called when the request has its answer.
func (rt *rotation) acquire() (r *replica, release func(), err error) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if len(rt.up) == 0 {
		return nil, func() {}, errNoReplica
	}
	r = rt.up[rt.next%len(rt.up)]
	rt.next++
	r.inflight.Add(1)
	return r, func() { r.inflight.Add(-1) }, nil
}

func (rt *rotation) add(r *replica) {
	rt.mu.Lock()
	rt.up = append(rt.up, r)
	rt.mu.Unlock()
}

// drain takes r out of the rotation and waits until its requests in
// flight have ended.
func (rt *rotation) drain(ctx context.Context, r *replica) error {
	rt.mu.Lock()
	for i, u := range rt.up {
		if u == r {
			rt.up = append(rt.up[:i], rt.up[i+1:]...)
			break
		}
	}
	rt.mu.Unlock()
	if err := until(ctx, 30*time.Second, func() bool { return r.inflight.Load() == 0 }); err != nil {
		return fmt.Errorf("drain replica %s: %d requests still in flight: %w", r, r.inflight.Load(), err)
	}
	return nil
}

// empty reports whether no replica takes requests.
func (rt *rotation) empty() bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return len(rt.up) == 0
}

// String names the replicas in the rotation.
func (rt *rotation) String() string {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	names := make([]string, len(rt.up))
	for i, r := range rt.up {
		names[i] = r.String()
	}
	return strings.Join(names, ", ")
}
