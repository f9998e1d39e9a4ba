package groupcommit

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svat/partnerapi/db"
)

// TestEveryCallerAnsweredAndNoFailedItemWritten: callers with deadlines,
// cancellations and neither, while the queue starts and stops; every Do
// returns, and no item whose caller was told it failed is written.
func TestEveryCallerAnsweredAndNoFailedItemWritten(t *testing.T) {
	var written sync.Map
	q := &Queue[int, int]{MaxBatch: 4, Write: func(ctx context.Context, items []int) []int {
		select {
		case <-time.After(time.Duration(rand.IntN(3)) * time.Millisecond):
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
					c, cancel = context.WithCancel(c)
					go func() { time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond); cancel() }()
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
				case <-time.After(5 * time.Second):
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
