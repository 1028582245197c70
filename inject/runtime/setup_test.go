package runtime

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
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
	state := t.TempDir()
	go func() { served <- serveSetup(ctx, l, dir, state, 200*time.Millisecond) }()
	get := func(path ...string) (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + l.Addr().String() + append(path, contract.SetupPath)[0])
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

	// A process container's readiness, from its launcher's files: its
	// pid file once it lived StartCheck, and the post-starts done.
	if err := contract.WriteInstance(dir, contract.Instance{PreStarts: []string{"pre-start"}, Containers: []string{"web-server"},
		Jobs: []contract.Job{{Name: "web", Scripts: []string{contract.PostStart}, Host: "web-server"}}}.Encode()); err != nil {
		t.Fatal(err)
	}
	web := contract.ReadyURL(contract.Plan{Job: "web", Process: "server", Container: "web-server"})
	if code, body := get(contract.ReadyURL(contract.Plan{Job: "db", Process: "db", Container: "db-db"})); code != http.StatusServiceUnavailable || !strings.Contains(body, `no process container "db-db"`) {
		t.Errorf("another pod's container: %d %s", code, body)
	}
	st := State{Dir: state}
	// The pid is not this process's: from outside the container, the
	// file is the launcher's word.
	if err := st.Mark(pidFile("web-server"), "999999"); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-StartCheck)
	_ = os.Chtimes(filepath.Join(state, pidFile("web-server")), old, old)
	if err := st.Mark(failedFile(contract.PostStart, "web"), failureRecord(errors.New("post-start of job 'web' failed: exit status 1"), "password=hunter2 refused")); err != nil {
		t.Fatal(err)
	}
	// The answer names the failure, never the output, as one no waiting
	// ends.
	if code, body := get(web); code != contract.FailedStatus || !strings.Contains(body, "exit status 1") || strings.Contains(body, "hunter2") {
		t.Errorf("post-start failed: %d %s", code, body)
	}
	plan := contract.Plan{Job: "web", Process: "server", Container: "web-server", Instance: contract.Instance{Containers: []string{"web-server"},
		Jobs: []contract.Job{{Name: "web", Scripts: []string{contract.PostStart}, Host: "web-server"}}}}
	if f := (Instance{Plan: plan, State: st}).Status(true).Failed; len(f) != 1 || f[0].Message != "post-start of job 'web' failed: exit status 1: password=hunter2 refused" {
		t.Errorf("inside the pod the status quotes the output: %+v", f)
	}
	_ = st.Remove(failedFile(contract.PostStart, "web"))
	_ = st.Mark(okFile(contract.PostStart, "web"), "")
	if code, body := get(web); code != http.StatusOK {
		t.Errorf("running, post-start done: %d %s", code, body)
	}
	if code, body := get(web + "&" + contract.NoWait); code != http.StatusOK {
		t.Errorf("asked not to wait: %d %s", code, body)
	}
	// A container running a job's bin/dns/healthy is probed in itself.
	if err := contract.WriteInstance(dir, contract.Instance{PreStarts: []string{"pre-start"}, Containers: []string{"web-server"},
		Jobs: []contract.Job{{Name: "web", Scripts: []string{contract.PostStart, contract.DNSHealthy}, Host: "web-server"}}}.Encode()); err != nil {
		t.Fatal(err)
	}
	if code, body := get(web); code != http.StatusServiceUnavailable || !strings.Contains(body, "bin/dns/healthy") {
		t.Errorf("a dns/healthy host: %d %s", code, body)
	}
	cancel()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}
