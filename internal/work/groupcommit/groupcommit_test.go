package groupcommit

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/svat/partnerapi/db"
)

// TestEveryCallerAnsweredAndNoFailedItemWritten: callers with deadlines,
// cancellations and neither, while the queue starts and stops; every Do
// returns, and no item whose caller was told it failed is written. It
// runs in a synctest bubble: the writes' durations, the budgets and the
// cancellations are on the bubble's fake clock, so the test takes no
// real time for them and a Do that never returns is reported after 5 s
// of fake time (or as a deadlock of the bubble), not after a real wait.
//
// Under the race detector it runs on the real clock instead: Go 1.26's
// race runtime crashes on this many goroutines in a bubble (a
// ThreadSanitizer CHECK on tsan_rtl.cpp:346, or a SIGSEGV in
// timer.maybeRunChan; golang/go#78156), and the race build is the one
// that checks the queue's locking.
func TestEveryCallerAnsweredAndNoFailedItemWritten(t *testing.T) {
	if raceEnabled {
		everyCallerAnswered(t)
		return
	}
	synctest.Test(t, everyCallerAnswered)
}

func everyCallerAnswered(t *testing.T) {
	var written sync.Map
	q := &Queue[int, int]{MaxBatch: 4, Write: func(ctx context.Context, items []int) []int {
		select {
		case <-after(time.Duration(rand.IntN(3)) * time.Millisecond):
		case <-ctx.Done():
			out := make([]int, len(items))
			for i := range out {
				out[i] = -1 // failed, not written
			}
			return out
		}
		out := make([]int, len(items))
		for i, it := range items {
			written.Store(it, true)
			out[i] = it
		}
		return out
	}}
	var failed sync.Map
	var n atomic.Int64
	for round := range 20 {
		ctx, stop := context.WithCancel(context.Background())
		runDone := make(chan struct{})
		go func() { _ = q.Run(ctx); close(runDone) }()
		var wg sync.WaitGroup
		for i := range 200 {
			item := round*1000 + i
			wg.Go(func() {
				c, cancel := context.Background(), context.CancelFunc(func() {})
				switch i % 3 {
				case 0:
					// A server budget, which bounds the group too.
					c, cancel = db.WithBudget(c, time.Duration(rand.IntN(2000))*time.Microsecond)
				case 1:
					// A client that gives up.
					c, cancel = context.WithCancel(c)
					gone := time.AfterFunc(time.Duration(rand.IntN(2000))*time.Microsecond, cancel)
					defer gone.Stop()
				}
				defer cancel()
				done := make(chan struct{})
				go func() {
					defer close(done)
					r, err := q.Do(c, item)
					if err != nil || r == -1 {
						failed.Store(item, true)
					}
					n.Add(1)
				}()
				select {
				case <-done:
				case <-after(5 * time.Second):
					t.Errorf("item %d: Do did not return", item)
				}
			})
			if i == 100 {
				stop()
			}
		}
		wg.Wait()
		stop()
		<-runDone
	}
	failed.Range(func(k, _ any) bool {
		if _, ok := written.Load(k); ok {
			t.Errorf("item %v written after its caller was told it failed", k)
		}
		return true
	})
	t.Logf("%d calls", n.Load())
}

// after is time.After without a timer channel: a channel closed by
// time.AfterFunc, which in a synctest bubble does not take the timer
// channel path (timer.maybeRunChan) that crashed under -race.
func after(d time.Duration) <-chan struct{} {
	c := make(chan struct{})
	time.AfterFunc(d, func() { close(c) })
	return c
}
