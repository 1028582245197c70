package cluster

import (
	"bufio"
	"fmt"
	"io"
	"sync"
)

// NewLines writes whole lines to w.
func NewLines(w io.Writer) *Lines { return &Lines{w: w} }

// Lines writes whole lines of several streams to one output, each
// line with its stream's prefix.
type Lines struct {
	mu sync.Mutex
	w  io.Writer
}

// Line writes text with prefix ("prefix: text"; text alone without one).
func (l *Lines) Line(prefix, text string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if prefix != "" {
		fmt.Fprintf(l.w, "%s: %s\n", prefix, text)
	} else {
		fmt.Fprintln(l.w, text)
	}
}

// Copy writes every line of r with prefix.
func (l *Lines) Copy(prefix string, r io.Reader) {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 64*1024), 1024*1024)
	for s.Scan() {
		l.Line(prefix, s.Text())
	}
}

// Pipe is a writer whose lines go to the output with prefix; Close
// flushes the last line.
func (l *Lines) Pipe(prefix string) io.WriteCloser {
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Copy(prefix, pr)
		_, _ = io.Copy(io.Discard, pr)
	}()
	return closer{pw, done}
}

type closer struct {
	*io.PipeWriter
	done chan struct{}
}

func (c closer) Close() error {
	err := c.PipeWriter.Close()
	<-c.done
	return err
}
