package observe

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

type lockedBuffer struct {
	mu     sync.Mutex
	b      bytes.Buffer
	writes int
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writes++
	return l.b.Write(p)
}

func (l *lockedBuffer) String() (string, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String(), l.writes
}

// TestLogWriterBatchesInfoAndWritesWarningsAtOnce: info records wait for
// the next flush, in one write; a warning goes out at once with what was
// queued before it; Close writes the rest and later records go through.
func TestLogWriterBatchesInfoAndWritesWarningsAtOnce(t *testing.T) {
	t.Parallel()
	out := &lockedBuffer{}
	w := NewLogWriter(out, time.Hour)
	log := slog.New(slog.NewJSONHandler(w, nil))
	log.Info("request", "n", 1)
	log.Info("request", "n", 2)
	if s, n := out.String(); s != "" || n != 0 {
		t.Fatalf("info records written before a flush: %d writes: %q", n, s)
	}
	log.Warn("slow", "n", 3)
	s, n := out.String()
	if n != 1 || strings.Count(s, "\n") != 3 || !strings.Contains(s, `"msg":"slow"`) {
		t.Fatalf("after a warning: %d writes: %q", n, s)
	}
	log.Info("request", "n", 4)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if s, n := out.String(); n != 2 || strings.Count(s, "\n") != 4 {
		t.Fatalf("after Close: %d writes: %q", n, s)
	}
	log.Info("request", "n", 5)
	if s, n := out.String(); n != 3 || strings.Count(s, "\n") != 5 {
		t.Fatalf("after Close, records are not written through: %d writes: %q", n, s)
	}
}

// TestLogWriterFlushesOnTime: queued records are written when the
// interval has passed, not before, and a full batch at once. The writer's
// ticker runs on a synctest bubble's fake clock, which the test moves.
func TestLogWriterFlushesOnTime(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		out := &lockedBuffer{}
		w := NewLogWriter(out, 10*time.Millisecond)
		defer w.Close()
		log := slog.New(slog.NewJSONHandler(w, nil))
		log.Info("request")
		time.Sleep(9 * time.Millisecond) // synctest: moves the bubble's fake clock
		synctest.Wait()
		if s, n := out.String(); n != 0 {
			t.Fatalf("flushed before the interval: %d writes: %q", n, s)
		}
		time.Sleep(time.Millisecond) // synctest: moves the bubble's fake clock
		synctest.Wait()              // the writer's flush on its tick
		if s, n := out.String(); n != 1 || !strings.Contains(s, `"msg":"request"`) {
			t.Fatalf("not flushed once the interval passed: %d writes: %q", n, s)
		}
		big := strings.Repeat("x", logBatchBytes)
		log.Info(big)
		if _, n := out.String(); n != 2 {
			t.Fatalf("a full batch was not written at once: %d writes, want 2", n)
		}
	})
}
