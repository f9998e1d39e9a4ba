package servertest

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// fatalRecorder is a testing.TB whose Fatalf records the message and ends
// the goroutine, as the real one does.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper() {}

func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// TestIDFailsWithTheAnswer: a create that did not answer a record (here
// the 503 of a database that is down) fails the test with that answer, not
// with a panic on a type assertion (issue 24, item 11: TestLeadValidation
// panicked so).
func TestIDFailsWithTheAnswer(t *testing.T) {
	rec := &fatalRecorder{TB: t}
	var wg sync.WaitGroup
	wg.Go(func() {
		ID(rec, []byte(`{"type":"about:blank","code":"unavailable","status":503,"detail":"the database is unavailable; retry later"}`))
	})
	wg.Wait()
	if !strings.Contains(rec.msg, "no record id") || !strings.Contains(rec.msg, `"status":503`) {
		t.Fatalf("ID of a 503 answer: %q; want a failure that shows the answer", rec.msg)
	}
	if got := ID(t, []byte(`{"id":"con_1"}`)); got != "con_1" {
		t.Fatalf("ID = %q", got)
	}
}
