package standalone

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// progress prints what the standalone process is doing, for a person watching a terminal:
// a line when a step begins, indented detail lines, a line when it ends with how long it took,
// and a reminder every stillEvery while a step runs long (starting member clusters can take a
// minute on a busy machine).
type progress struct {
	mu    sync.Mutex
	w     io.Writer
	begin time.Time
}

// stillEvery is how often a long step says it is still running.
const stillEvery = 15 * time.Second

func newProgress(w io.Writer) *progress {
	return &progress{w: w, begin: time.Now()}
}

// step prints that what begins and returns the function that ends it: done("ready at X")
// prints the result and the time taken.
func (p *progress) step(what string) (done func(result string)) {
	p.printf("==> %s\n", what)
	start := time.Now()
	stop := make(chan struct{})
	var once sync.Once
	go func() {
		t := time.NewTicker(stillEvery)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				p.printf("    ... still %s (%s)\n", lowerFirst(what), time.Since(start).Round(time.Second))
			}
		}
	}()
	return func(result string) {
		once.Do(func() {
			close(stop)
			p.printf("    %s (%s)\n", result, time.Since(start).Round(100*time.Millisecond))
		})
	}
}

// linef prints an indented detail line.
func (p *progress) linef(format string, args ...any) {
	p.printf("    "+format+"\n", args...)
}

// printf prints as is.
func (p *progress) printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, format, args...)
}

// writer returns a writer that prints each line it is given as a detail line, for the logs of
// the harness and the output of fleetctl.
func (p *progress) writer() io.Writer {
	return &lineWriter{p: p}
}

type lineWriter struct {
	p   *progress
	mu  sync.Mutex
	buf []byte
}

func (l *lineWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, b...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		line := strings.TrimRight(string(l.buf[:i]), "\r")
		l.buf = l.buf[i+1:]
		if line != "" {
			l.p.linef("%s", line)
		}
	}
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}
