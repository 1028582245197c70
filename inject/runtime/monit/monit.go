// Package monit reads the parts of a job's monit file that run its
// processes: `check process <name>`, `with pidfile`, `start program` and
// `stop program` (monit's control file syntax). Gather lists the processes
// from the job's monit file; the launcher runs them from the rendered one.
package monit

import (
	"fmt"
	"regexp"
	"strings"
)

// Process is a `check process` entry.
type Process struct {
	Name    string
	Pidfile string
	Start   string
	Stop    string
}

var (
	checkRE   = regexp.MustCompile(`(?m)^\s*check\s+process\s+(\S+)`)
	pidfileRE = regexp.MustCompile(`\bwith\s+pidfile\s+"?([^"\s]+)"?`)
	startRE   = regexp.MustCompile(`\bstart\s+program\s*=?\s*"([^"]*)"`)
	stopRE    = regexp.MustCompile(`\bstop\s+program\s*=?\s*"([^"]*)"`)
)

// Processes are the names of the processes a monit file checks, in order.
// ERB in an unrendered file is harmless: names are literal in practice.
func Processes(file string) []string {
	var out []string
	for _, m := range checkRE.FindAllStringSubmatch(file, -1) {
		out = append(out, strings.Trim(m[1], `"`))
	}
	return out
}

// Parse returns the process name of a rendered monit file, or an error
// naming what is missing.
func Parse(file, name string) (Process, error) {
	locs := checkRE.FindAllStringSubmatchIndex(file, -1)
	for i, loc := range locs {
		if strings.Trim(file[loc[2]:loc[3]], `"`) != name {
			continue
		}
		end := len(file)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		// A block ends at the next `check` of any kind.
		block := file[loc[1]:end]
		if j := regexp.MustCompile(`(?m)^\s*check\s`).FindStringIndex(block); j != nil {
			block = block[:j[0]]
		}
		p := Process{Name: name}
		for _, f := range []struct {
			re  *regexp.Regexp
			dst *string
			key string
		}{{pidfileRE, &p.Pidfile, "with pidfile"}, {startRE, &p.Start, "start program"}, {stopRE, &p.Stop, "stop program"}} {
			m := f.re.FindStringSubmatch(block)
			if m == nil {
				return p, fmt.Errorf("monit: check process %s has no %s", name, f.key)
			}
			*f.dst = m[1]
		}
		return p, nil
	}
	return Process{}, fmt.Errorf("monit: no check process %s", name)
}
