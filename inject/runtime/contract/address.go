package contract

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// AddressFile, in PlanDir, holds the instance's address and the pod's IP
// when render ended its step before the address resolved (a render
// container beside the processes): the launchers wait for the address
// before starting anything, as on a VM the instance's own DNS record
// exists before its jobs start.
const AddressFile = "address.json"

// Address is the instance's address (spec.address) and the pod's IP it
// must resolve to.
type Address struct {
	Name string `json:"name"`
	IP   string `json:"ip"`
}

// WriteAddress writes a in dir (PlanDir), atomically.
func WriteAddress(dir string, a Address) error {
	data, err := json.Marshal(a)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, "."+AddressFile+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, AddressFile))
}

// ReadAddress reads AddressFile in dir; ok is false when there is none
// (render waited for the address itself).
func ReadAddress(dir string) (a Address, ok bool, err error) {
	data, err := os.ReadFile(filepath.Join(dir, AddressFile))
	if errors.Is(err, fs.ErrNotExist) {
		return a, false, nil
	}
	if err != nil {
		return a, false, err
	}
	if err := json.Unmarshal(data, &a); err != nil {
		return a, false, fmt.Errorf("%s: %w", AddressFile, err)
	}
	return a, true, nil
}
