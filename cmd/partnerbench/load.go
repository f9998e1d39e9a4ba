package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// request builds one request; i is a per-run sequence number.
type request func(i int64) (*http.Request, error)

// result is one scenario's measurements.
type result struct {
	rps      float64
	p50, p99 time.Duration
	errors   int64
	requests int64
	// all counts every request sent, the warm-up's included.
	all int64
}

// add is r and o as one: their throughputs, errors and requests summed
// (divide rps by the count for the mean of equal durations), latencies the
// worse of each.
func (r result) add(o result) result {
	return result{rps: r.rps + o.rps, p50: max(r.p50, o.p50), p99: max(r.p99, o.p99),
		errors: r.errors + o.errors, requests: r.requests + o.requests, all: r.all + o.all}
}

// load runs a closed loop of `concurrency` workers for d after a warm-up
// and measures throughput and latency. Any status other than want counts
// as an error.
// maxErrorsShown is how many failed requests of one measurement load
// prints to stderr.
const maxErrorsShown = 5

func load(ctx context.Context, client *http.Client, concurrency int, warm, d time.Duration, want int, mk request) (result, error) {
	var seq, errs, sent atomic.Int64
	run := func(dur time.Duration, record bool) ([]time.Duration, error) {
		ctx, cancel := context.WithTimeout(ctx, dur)
		defer cancel()
		var mu sync.Mutex
		var all []time.Duration
		var firstErr error
		var wg sync.WaitGroup
		for range concurrency {
			wg.Add(1)
			go func() {
				defer wg.Done()
				lat := make([]time.Duration, 0, 1<<16)
				for ctx.Err() == nil {
					req, err := mk(seq.Add(1))
					if err != nil {
						mu.Lock()
						firstErr = err
						mu.Unlock()
						return
					}
					start := time.Now()
					sent.Add(1)
					res, err := client.Do(req)
					if err != nil {
						if ctx.Err() == nil {
							if n := errs.Add(1); n <= maxErrorsShown {
								fmt.Fprintf(os.Stderr, "partnerbench: %s %s: %v\n", req.Method, req.URL.Path, err)
							}
						}
						continue
					}
					if res.StatusCode != want {
						// The answer, so that an error in a run says what
						// it was (a line counts them).
						body, _ := io.ReadAll(io.LimitReader(res.Body, 500))
						_, _ = io.Copy(io.Discard, res.Body)
						res.Body.Close()
						if n := errs.Add(1); n <= maxErrorsShown {
							fmt.Fprintf(os.Stderr, "partnerbench: %s %s: status %d, want %d: %s\n", req.Method, req.URL.Path, res.StatusCode, want, body)
						}
						if record && errs.Load() == 1 {
							mu.Lock()
							firstErr = fmt.Errorf("status %d, want %d", res.StatusCode, want)
							mu.Unlock()
						}
						continue
					}
					_, _ = io.Copy(io.Discard, res.Body)
					res.Body.Close()
					if record {
						lat = append(lat, time.Since(start))
					}
				}
				mu.Lock()
				all = append(all, lat...)
				mu.Unlock()
			}()
		}
		wg.Wait()
		return all, firstErr
	}
	if _, err := run(warm, false); err != nil {
		return result{}, err
	}
	errs.Store(0)
	start := time.Now()
	lat, err := run(d, true)
	elapsed := time.Since(start)
	if len(lat) == 0 {
		return result{}, fmt.Errorf("no successful requests: %v", err)
	}
	slices.Sort(lat)
	return result{
		rps:      float64(len(lat)) / elapsed.Seconds(),
		p50:      lat[len(lat)/2],
		p99:      lat[len(lat)*99/100],
		errors:   errs.Load(),
		requests: int64(len(lat)),
		all:      sent.Load(),
	}, nil
}
