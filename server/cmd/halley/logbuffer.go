package main

import (
	"io"
	"sync"
	"time"
)

// logBuffer is the log's writer: a line written while the log is quiet goes out at once; lines that follow
// within every of a write are kept and written together at most every later. Under load the access log alone is
// a line per request, and a write(2) per line was ~2 % of Halley's CPU in the steps suite (docs/benchmarks.md);
// buffered, it is a few writes a second. At most every of lines is lost if the process is killed; a clean stop
// writes everything (Close).
type logBuffer struct {
	mu    sync.Mutex
	w     io.Writer
	buf   []byte
	last  time.Time // when lines last went out
	every time.Duration

	stop    chan struct{}
	done    chan struct{}
	closing sync.Once
}

// logInterval is how long a line of a busy log may wait to be written.
const logInterval = 100 * time.Millisecond

// logBufferMax is what the buffer holds before it is written out at once.
const logBufferMax = 64 << 10

func newLogBuffer(w io.Writer, every time.Duration) *logBuffer {
	b := &logBuffer{w: w, every: every, stop: make(chan struct{}), done: make(chan struct{})}
	go b.loop()
	return b
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.buf) == 0 && time.Since(b.last) >= b.every {
		b.last = time.Now()
		return b.w.Write(p)
	}
	b.buf = append(b.buf, p...)
	if len(b.buf) >= logBufferMax {
		b.flushLocked()
	}
	return len(p), nil
}

func (b *logBuffer) flushLocked() {
	if len(b.buf) == 0 {
		return
	}
	_, _ = b.w.Write(b.buf) // as slog's handlers do, a line that cannot be written is dropped
	b.buf = b.buf[:0]
	if cap(b.buf) > 4*logBufferMax {
		b.buf = nil // a burst of huge lines does not stay allocated
	}
	b.last = time.Now()
}

func (b *logBuffer) loop() {
	defer close(b.done)
	t := time.NewTicker(b.every)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
			b.mu.Lock()
			b.flushLocked()
			b.mu.Unlock()
		}
	}
}

// Close writes what is kept and stops the writing loop; later lines are written at once.
func (b *logBuffer) Close() {
	b.closing.Do(func() { close(b.stop) })
	<-b.done
	b.mu.Lock()
	b.flushLocked()
	b.every = 0 // every later line goes out at once
	b.mu.Unlock()
}
