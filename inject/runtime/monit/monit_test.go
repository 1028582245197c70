package monit_test

import (
	"reflect"
	"testing"

	"github.com/bosh-injector/bosh-injector/inject/runtime/monit"
)

const file = `check process nats
  with pidfile /var/vcap/sys/run/nats/nats.pid
  start program "/var/vcap/jobs/nats/bin/nats_ctl start"
  stop program "/var/vcap/jobs/nats/bin/nats_ctl stop"
  group vcap

check file nats.conf with path /var/vcap/jobs/nats/config/nats.conf

check process "nats_stream"
  with pidfile "/var/vcap/sys/run/nats/stream.pid"
  start program = "/var/vcap/jobs/nats/bin/stream_ctl start" with timeout 60 seconds
  stop program = "/var/vcap/jobs/nats/bin/stream_ctl stop"
`

func TestProcesses(t *testing.T) {
	if got := monit.Processes(file); !reflect.DeepEqual(got, []string{"nats", "nats_stream"}) {
		t.Errorf("got %v", got)
	}
	if got := monit.Processes(""); got != nil {
		t.Errorf("an empty monit file (a package-only job) has processes %v", got)
	}
}

func TestParse(t *testing.T) {
	p, err := monit.Parse(file, "nats_stream")
	want := monit.Process{Name: "nats_stream", Pidfile: "/var/vcap/sys/run/nats/stream.pid",
		Start: "/var/vcap/jobs/nats/bin/stream_ctl start", Stop: "/var/vcap/jobs/nats/bin/stream_ctl stop"}
	if err != nil || p != want {
		t.Errorf("got %+v, %v", p, err)
	}
	if _, err := monit.Parse("check process x\n  with pidfile /x.pid\n", "x"); err == nil || err.Error() != "monit: check process x has no start program" {
		t.Errorf("got %v", err)
	}
	if _, err := monit.Parse(file, "gnatsd"); err == nil {
		t.Error("no error for a missing process")
	}
}
