// Package inputfile reads the files a user names on the command line
// (manifest, ops files, vars files, vars store) with a bound on their size.
package inputfile

import (
	"context"
	"fmt"
	"io"
	"os"
)

// MaxInputSize bounds a manifest, ops file or vars file read: a path such
// as /dev/zero or a mistaken log file fails at once instead of filling
// memory. The largest real manifests are a few hundred KiB.
const MaxInputSize = 16 << 20

// Read reads an input file of at most MaxInputSize bytes; what names it
// in errors, e.g. "--manifest". It returns when ctx ends (SIGTERM) even if
// the read blocks (a FIFO without a writer): the blocked read is left to
// the process's exit.
func Read(ctx context.Context, what, path string) ([]byte, error) {
	type result struct {
		data []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		data, err := read(what, path)
		done <- result{data, err}
	}()
	select {
	case r := <-done:
		return r.data, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("%s %s: reading stopped: %w", what, path, ctx.Err())
	}
}

func read(what, path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer f.Close()
	if info, err := f.Stat(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	} else if info.IsDir() {
		return nil, fmt.Errorf("%s %s: is a directory, not a file", what, path)
	}
	data, err := readBounded(f)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, path, err)
	}
	return data, nil
}

// readBounded reads r to its end, failing past MaxInputSize bytes.
func readBounded(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxInputSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxInputSize {
		return nil, fmt.Errorf("larger than the %d MiB an input file may be", MaxInputSize>>20)
	}
	return data, nil
}
