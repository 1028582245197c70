package inputfile

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// ReadIn reads name, a regular file of at most MaxInputSize bytes, through
// root: a release's spec or template that is a symbolic link out of the
// release (to a key, to /dev/zero), a FIFO or a device is refused before
// anything is read.
func ReadIn(root *os.Root, name string) ([]byte, error) {
	// Non-blocking, so a FIFO fails the check below instead of waiting for
	// a writer.
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fmt.Errorf("not a regular file (%s)", info.Mode().Type())}
	}
	data, err := readBounded(f)
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: name, Err: err}
	}
	return data, nil
}
