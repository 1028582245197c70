package runtime

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/bosh-injector/bosh-injector/inject/runtime/contract"
)

// The setup probe's answer waits for the setup and says what it still
// waits for; once the setup ended it is 200.
func TestServeSetup(t *testing.T) {
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- serveSetup(ctx, l, dir, 200*time.Millisecond) }()
	get := func() (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + l.Addr().String() + contract.SetupPath)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := get(); code != http.StatusServiceUnavailable || !strings.Contains(body, "waiting for the render step") {
		t.Errorf("before render: %d %s", code, body)
	}
	if err := contract.WriteInstance(dir, contract.Instance{PreStarts: []string{"pre-start"}}.Encode()); err != nil {
		t.Fatal(err)
	}
	if err := contract.MarkDone(dir, contract.Rendered); err != nil {
		t.Fatal(err)
	}
	if code, body := get(); code != http.StatusServiceUnavailable || !strings.Contains(body, "waiting for the pre-start step") {
		t.Errorf("before pre-start: %d %s", code, body)
	}
	if err := contract.MarkDone(dir, "pre-start"); err != nil {
		t.Fatal(err)
	}
	if code, body := get(); code != http.StatusServiceUnavailable || !strings.Contains(body, "waiting for the address step") {
		t.Errorf("before render's address wait ended: %d %s", code, body)
	}
	// An answer waits for the end rather than failing at once.
	time.AfterFunc(50*time.Millisecond, func() { _ = contract.MarkDone(dir, contract.Addressed) })
	if code, body := get(); code != http.StatusOK {
		t.Errorf("after the setup: %d %s", code, body)
	}
	cancel()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}
