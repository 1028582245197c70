package day2

import (
	"compress/gzip"
	"io"
)

// An exec whose streams are cut looks as if its command succeeded with
// no output (see gather/client/ssh): `logs` checks that its tarball's gzip
// stream arrived whole.

// gzipCheck passes a gzip stream through to w and says, at Close, whether
// it arrived whole (gzip's trailer holds the CRC and the size): a tarball
// an exec returns cut is an error, not a short archive.
type gzipCheck struct {
	w    io.Writer
	pw   *io.PipeWriter
	done chan error
}

func newGzipCheck(w io.Writer) *gzipCheck {
	pr, pw := io.Pipe()
	c := &gzipCheck{w: w, pw: pw, done: make(chan error, 1)}
	go func() {
		zr, err := gzip.NewReader(pr)
		if err == nil {
			_, err = io.Copy(io.Discard, zr)
		}
		// Drain, so the writer never blocks on a reader that gave up.
		_, _ = io.Copy(io.Discard, pr)
		c.done <- err
	}()
	return c
}

func (c *gzipCheck) Write(p []byte) (int, error) {
	_, _ = c.pw.Write(p)
	return c.w.Write(p)
}

// Close ends the stream and returns why it is not a whole gzip stream.
func (c *gzipCheck) Close() error {
	_ = c.pw.Close()
	return <-c.done
}
