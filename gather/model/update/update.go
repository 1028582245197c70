// Package update holds the director's update semantics for a deployment:
// the `update` blocks read as the director reads them (a group's block over
// the deployment's), the order instance groups are updated in (manifest
// order, consecutive groups with the same `serial` forming one stage), and
// the steps of one group's update (canaries in the first AZ, then batches
// of max_in_flight, AZ by AZ). It is pure: the deploy controller applies it.
package update

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"time"

	"k8s.io/utils/ptr"

	"github.com/bosh-injector/bosh-injector/gather/model/yamlvalue"
)

// Config is an update block with the deployment's block filled in.
type Config struct {
	// Canaries and MaxInFlight are as written: a number or a percentage
	// of the instances of an AZ.
	Canaries    string `json:"canaries"`
	MaxInFlight string `json:"maxInFlight"`
	CanaryWatch Watch  `json:"canaryWatch"`
	UpdateWatch Watch  `json:"updateWatch"`
	Serial      bool   `json:"serial"`
}

// Watch is a watch time: the director checks an instance after Min, then
// until Max, and fails it when it is not running by Max.
type Watch struct {
	Min time.Duration `json:"min"`
	Max time.Duration `json:"max"`
}

// Group is an instance group the deploy updates, with its update config.
type Group struct {
	Name   string `json:"name"`
	Update Config `json:"update"`
	// Instances and AZs are the group's `instances` and how many `azs` it
	// has: a deploy removes instances beyond them before updating the
	// rest, as the director deletes unneeded instances first. Nil where
	// the manifest's instances is not a number (gathering refuses it) or
	// the plan was recorded before it was kept.
	Instances *int `json:"instances,omitempty"`
	AZs       int  `json:"azs,omitempty"`
}

// Plan is the service instance groups of a deployment in manifest order.
// Errand groups are not part of a deploy: they run on demand.
type Plan []Group

// deploymentConfig reads the deployment's update block, which the director
// requires with every key but serial.
func deploymentConfig(root *yamlvalue.Map) (Config, error) {
	u, err := block(root, "update")
	if err != nil {
		return Config{}, err
	}
	if u == nil {
		return Config{}, fmt.Errorf("update: Required property 'update' was not specified in the deployment manifest")
	}
	return read(u, "update", nil)
}

// group reads an instance group's update block over the deployment's;
// where names the group for errors ("instance_groups.api").
func (d Config) group(group *yamlvalue.Map, where string) (Config, error) {
	u, err := block(group, where+".update")
	if err != nil || u == nil {
		return d, err
	}
	return read(u, where+".update", &d)
}

// PlanOf reads the update plan of a manifest's root: its service instance
// groups in order, each with its update config.
func PlanOf(root *yamlvalue.Map) (Plan, error) {
	d, err := deploymentConfig(root)
	if err != nil {
		return nil, err
	}
	v, _ := root.Get("instance_groups")
	list, _ := v.([]any)
	var plan Plan
	for i, e := range list {
		g, ok := e.(*yamlvalue.Map)
		if !ok {
			continue
		}
		name, _ := g.Get("name")
		n, _ := name.(string)
		if lifecycle, _ := g.Get("lifecycle"); lifecycle == "errand" {
			continue
		}
		where := fmt.Sprintf("instance_groups[%d]", i)
		if n != "" {
			where = "instance_groups." + n
		}
		c, err := d.group(g, where)
		if err != nil {
			return nil, err
		}
		group := Group{Name: n, Update: c}
		if v, _ := g.Get("instances"); v != nil {
			if count, ok := v.(int64); ok && count >= 0 && count <= math.MaxInt32 {
				group.Instances = ptr.To(int(count))
			}
		}
		if v, _ := g.Get("azs"); v != nil {
			azs, _ := v.([]any)
			group.AZs = len(azs)
		}
		plan = append(plan, group)
	}
	return plan, nil
}

func block(m *yamlvalue.Map, where string) (*yamlvalue.Map, error) {
	v, _ := m.Get(lastKey(where))
	switch t := v.(type) {
	case nil:
		return nil, nil
	case *yamlvalue.Map:
		return t, nil
	}
	return nil, fmt.Errorf("%s: expected a hash, got %v", where, v)
}

func lastKey(where string) string {
	for i := len(where) - 1; i >= 0; i-- {
		if where[i] == '.' {
			return where[i+1:]
		}
	}
	return where
}

// read reads an update block; over, when set, fills what it leaves out
// (a group's block), else every key but serial is required.
func read(u *yamlvalue.Map, where string, over *Config) (Config, error) {
	c := Config{Serial: true}
	if over != nil {
		c = *over
	}
	text := func(key string) (string, bool, error) {
		v, _ := u.Get(key)
		switch t := v.(type) {
		case string:
			return t, true, nil
		case int64:
			// The director reads these as strings and takes numbers too.
			return strconv.FormatInt(t, 10), true, nil
		case nil:
			if over == nil {
				return "", false, fmt.Errorf("%s.%s: Required property '%s' was not specified", where, key, key)
			}
			return "", false, nil
		}
		return "", false, fmt.Errorf("%s.%s: Property '%s' value (%v) did not match the required type 'String'", where, key, key, v)
	}
	for _, k := range []struct {
		key string
		to  *string
	}{{"canaries", &c.Canaries}, {"max_in_flight", &c.MaxInFlight}} {
		s, ok, err := text(k.key)
		if err != nil {
			return Config{}, err
		}
		if !ok {
			continue
		}
		if _, err := count(s, 1); err != nil {
			return Config{}, fmt.Errorf("%s.%s: %w", where, k.key, err)
		}
		*k.to = s
	}
	for _, k := range []struct {
		key string
		to  *Watch
	}{{"canary_watch_time", &c.CanaryWatch}, {"update_watch_time", &c.UpdateWatch}} {
		s, ok, err := text(k.key)
		if err != nil {
			return Config{}, err
		}
		if !ok {
			continue
		}
		if *k.to, err = ParseWatch(s); err != nil {
			return Config{}, fmt.Errorf("%s.%s: %w", where, k.key, err)
		}
	}
	if v, ok := u.Get("serial"); ok && v != nil {
		b, isBool := v.(bool)
		if !isBool {
			return Config{}, fmt.Errorf("%s.serial: Property 'serial' value (%v) did not match the required type 'TrueClass or FalseClass'", where, v)
		}
		c.Serial = b
	}
	return c, nil
}

var (
	watchRange  = regexp.MustCompile(`^\s*(\d+)\s*-\s*(\d+)\s*$`)
	watchSingle = regexp.MustCompile(`^\s*(\d+)\s*$`)
	percentage  = regexp.MustCompile(`^(\d+)%$`)
	integer     = regexp.MustCompile(`^[-+]?[0-9]+$`)
)

// ParseWatch reads a watch time in milliseconds: "30000" or "1000-30000".
func ParseWatch(s string) (Watch, error) {
	var lo, hi string
	if m := watchRange.FindStringSubmatch(s); m != nil {
		lo, hi = m[1], m[2]
	} else if m := watchSingle.FindStringSubmatch(s); m != nil {
		lo, hi = m[1], m[1]
	} else {
		return Watch{}, fmt.Errorf("Watch time should be an integer or a range of two integers")
	}
	a, errA := strconv.ParseInt(lo, 10, 64)
	b, errB := strconv.ParseInt(hi, 10, 64)
	const most = int64(365 * 24 * time.Hour / time.Millisecond)
	if errA != nil || errB != nil || a > most || b > most {
		return Watch{}, fmt.Errorf("Watch time %q is more than a year", s)
	}
	if a > b {
		return Watch{}, fmt.Errorf("Min watch time cannot be greater than max watch time")
	}
	return Watch{Min: time.Duration(a) * time.Millisecond, Max: time.Duration(b) * time.Millisecond}, nil
}

// count is the director's numerical value of canaries or max_in_flight for
// size instances: a number as written, or a percentage of size rounded down
// and at most size.
func count(value string, size int) (int, error) {
	if m := percentage.FindStringSubmatch(value); m != nil {
		p, err := strconv.Atoi(m[1])
		if err != nil {
			return 0, fmt.Errorf("%q cannot be calculated", value)
		}
		return min(p*size/100, size), nil
	}
	if integer.MatchString(value) {
		n, err := strconv.ParseInt(value, 10, 32)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%q cannot be calculated: expected a number of instances or a percentage", value)
		}
		return int(n), nil
	}
	return 0, fmt.Errorf("%q cannot be calculated: expected a number of instances or a percentage", value)
}

// Stages partitions a plan as the director does: consecutive groups with
// the same `serial` form one stage; a serial stage's groups update one
// after another, a stage of `serial: false` groups all at once.
func (p Plan) Stages() []Plan {
	var stages []Plan
	for _, g := range p {
		if n := len(stages); n > 0 && stages[n-1][0].Update.Serial == g.Update.Serial {
			stages[n-1] = append(stages[n-1], g)
			continue
		}
		stages = append(stages, Plan{g})
	}
	return stages
}

// Step is one step of a group's update: N more instances of one AZ
// released together, canaries or not.
type Step struct {
	AZ     int  `json:"az"`
	N      int  `json:"n"`
	Canary bool `json:"canary,omitempty"`
}

// Steps are the steps of a group's update whose AZs have sizes instances
// to update, in AZ order, as the director's instance group updater takes
// them: canaries (min(canaries, size)) in the first AZ with instances,
// then the rest of each AZ max_in_flight (of that AZ's size, at least one)
// at a time. Canaries beyond max_in_flight are taken max_in_flight at a
// time too: the director runs them in a pool of that many threads.
func (c Config) Steps(sizes []int) ([]Step, error) {
	var steps []Step
	canariesDone := false
	for az, size := range sizes {
		if size == 0 {
			continue
		}
		inFlight, err := count(c.MaxInFlight, size)
		if err != nil {
			return nil, fmt.Errorf("max_in_flight: %w", err)
		}
		inFlight = max(inFlight, 1)
		left := size
		take := func(n int, canary bool) {
			for n > 0 {
				k := min(n, inFlight)
				steps = append(steps, Step{AZ: az, N: k, Canary: canary})
				n -= k
				left -= k
			}
		}
		if !canariesDone {
			canaries, err := count(c.Canaries, size)
			if err != nil {
				return nil, fmt.Errorf("canaries: %w", err)
			}
			take(min(canaries, size), true)
			canariesDone = true
		}
		take(left, false)
	}
	return steps, nil
}

// Watch is the watch time of a step.
func (c Config) Watch(s Step) Watch {
	if s.Canary {
		return c.CanaryWatch
	}
	return c.UpdateWatch
}

// InFlight is the most instances of a group whose AZs have sizes instances
// that its update takes down at once: its largest batch of max_in_flight
// (canaries, fewer, aside).
func (c Config) InFlight(sizes []int) (int, error) {
	c.Canaries = "0"
	steps, err := c.Steps(sizes)
	most := 0
	for _, s := range steps {
		most = max(most, s.N)
	}
	return most, err
}
