package compile

import (
	"fmt"
	"slices"
	"strings"
)

// Package is a source package of a release.
type Package struct {
	Name        string
	Version     string
	Fingerprint string
	// Dependencies are the direct dependencies, by name.
	Dependencies []string
	// Source is the package's .tgz (packaging script and files).
	Source string
}

// order returns pkgs in dependency order (every package after its
// dependencies), or an error naming a missing dependency or a cycle.
func order(release string, pkgs []Package) ([]Package, error) {
	byName := map[string]*Package{}
	for i := range pkgs {
		byName[pkgs[i].Name] = &pkgs[i]
	}
	const (
		unseen = iota
		visiting
		done
	)
	state := map[string]int{}
	var out []Package
	var visit func(name string, stack []string) error
	visit = func(name string, stack []string) error {
		switch state[name] {
		case done:
			return nil
		case visiting:
			cycle := append(stack[slices.Index(stack, name):], name)
			return fmt.Errorf("release '%s': packages depend on each other in a cycle: %s", release, strings.Join(cycle, " -> "))
		}
		state[name] = visiting
		p := byName[name]
		deps := slices.Sorted(slices.Values(p.Dependencies))
		for _, d := range deps {
			if byName[d] == nil {
				return fmt.Errorf("release '%s': package '%s' depends on '%s', which the release does not have", release, name, d)
			}
			if err := visit(d, append(stack, name)); err != nil {
				return err
			}
		}
		state[name] = done
		out = append(out, *p)
		return nil
	}
	names := make([]string, 0, len(pkgs))
	for _, p := range pkgs {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	for _, n := range names {
		if err := visit(n, nil); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// closure is the transitive dependencies of name, sorted.
func closure(byName map[string]Package, name string) []string {
	seen := map[string]bool{}
	var walk func(string)
	walk = func(n string) {
		for _, d := range byName[n].Dependencies {
			if !seen[d] {
				seen[d] = true
				walk(d)
			}
		}
	}
	walk(name)
	out := make([]string, 0, len(seen))
	for d := range seen {
		out = append(out, d)
	}
	slices.Sort(out)
	return out
}
