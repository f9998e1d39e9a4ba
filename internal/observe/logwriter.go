package observe

import (
	"io"
	"sync"
	"time"
)

// LogWriter batches log records on their way to a slow writer (the
// process's stderr, a pipe to the log collector): one write system call
// per batch instead of one per access log line, which was a tenth of the
// server's CPU on small requests. Each Write is one whole record (slog
// writes a record at a time), so a batch never splits a line. Records are
// written within FlushEvery, at once when the batch is full, and all of
// them by Close; a record at Warn or above is not delayed, so that a
// failure is seen even if the process dies right after.
type LogWriter struct {
	out   io.Writer
	every time.Duration

	mu     sync.Mutex
	buf    []byte
	err    error
	closed bool
	stop   chan struct{}
	done   chan struct{}
}

// logBatchBytes is the batch size that is written at once.
const logBatchBytes = 32 << 10

// NewLogWriter starts a writer that flushes to out every interval.
func NewLogWriter(out io.Writer, every time.Duration) *LogWriter {
	w := &LogWriter{out: out, every: every, buf: make([]byte, 0, logBatchBytes), stop: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	return w
}

// Write queues one record. Records that are not plain info lines (a
// warning, an error) are written through at once, with what is queued
// before them.
func (w *LogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return w.out.Write(p)
	}
	w.buf = append(w.buf, p...)
	if len(w.buf) >= logBatchBytes || urgent(p) {
		w.flushLocked()
	}
	return len(p), nil
}

// urgent reports whether a JSON log record is above Info: it carries
// "level":"WARN" or "level":"ERROR" near its start (slog's JSON handler
// writes time, level and msg first).
func urgent(p []byte) bool {
	head := p[:min(len(p), 96)]
	for i := 0; i+len(`"level":"`) < len(head); i++ {
		if string(head[i:i+len(`"level":"`)]) == `"level":"` {
			rest := head[i+len(`"level":"`):]
			return len(rest) > 0 && rest[0] != 'I' && rest[0] != 'D'
		}
	}
	return true
}

func (w *LogWriter) flushLocked() {
	if len(w.buf) == 0 {
		return
	}
	if _, err := w.out.Write(w.buf); err != nil && w.err == nil {
		w.err = err
	}
	if cap(w.buf) > 4*logBatchBytes {
		w.buf = make([]byte, 0, logBatchBytes)
	} else {
		w.buf = w.buf[:0]
	}
}

// Flush writes what is queued.
func (w *LogWriter) Flush() {
	w.mu.Lock()
	w.flushLocked()
	w.mu.Unlock()
}

func (w *LogWriter) run() {
	defer close(w.done)
	t := time.NewTicker(w.every)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
			w.Flush()
		}
	}
}

// Close writes what is queued and stops batching: later records are
// written through. It returns the first write error seen.
func (w *LogWriter) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return w.err
	}
	w.closed = true
	w.flushLocked()
	w.mu.Unlock()
	close(w.stop)
	<-w.done
	return w.err
}
