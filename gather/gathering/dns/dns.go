// Package dns turns a resolved deployment into the DNS records
// bosh-injector's CoreDNS serves for it: the BOSH DNS aliases of every
// bosh-dns-aliases job (instance groups and addons alike) and the BOSH
// address forms the template spec hands out (networks.<net>.dns_record_name
// and the instance UUID form). Every record is a CNAME to the Kubernetes
// Service address of a group, an instance or an alias over several groups
// (Union), so CoreDNS answers with the current pod addresses that the
// cluster DNS gives for those Services.
//
// The records of a deployment live in one zone,
// names.DNSZone(deployment, namespace); injected pods search it first, so a
// name such as nats.service.cf.internal resolves within the pod's own
// deployment, as bosh-dns resolves the aliases of the VM it runs on.
package dns

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	"github.com/bosh-injector/bosh-injector/gather/model/deployment"
	"github.com/bosh-injector/bosh-injector/gather/model/instance"
	"github.com/bosh-injector/bosh-injector/gather/model/yamlvalue"
	"github.com/bosh-injector/bosh-injector/gather/names"
)

// AliasesJob is the job whose `aliases` property declares BOSH DNS aliases.
const AliasesJob = "bosh-dns-aliases"

// TTL of every record, in seconds: short, as pod addresses change when pods
// are replaced.
const TTL = 5

// Record is a name relative to the zone and the absolute address it is a
// CNAME of.
type Record struct {
	Name, Target string
}

// Remote looks up a group of another deployment in the namespace: that
// deployment's original name and the group's instance count. found is
// false when the group is not in that deployment's last gathering; err is
// a failure to look, which fails the gathering rather than the alias.
type Remote func(deployment, group string) (deploymentName string, instances int, found bool, err error)

// lookupError is a Remote's failure to look.
type lookupError struct{ err error }

func (e *lookupError) Error() string { return e.err.Error() }

// Union is an alias whose `*` targets name several groups. bosh-dns
// answers it with the instances of all of them, so gathering keeps a
// Service of its own selecting Label on the pods of every group in Groups.
type Union struct {
	Domain, Service, Label string
	Groups                 []string
}

// Records returns the records of d, sorted by name, with addresses in
// network, the aliases over several groups they name, and warnings: one per
// alias target naming a group d does not have. remote resolves targets
// naming another deployment of the namespace; nil knows none.
//
// The director does not check alias targets (the bosh-dns-aliases job only
// renders them) and bosh-dns answers nothing for a group without
// instances, so such a target contributes no record: cf-deployment's
// `_.cell.service.cf.internal` names windows2019-cell and
// isolated-diego-cell, which only ops files add.
func Records(d *deployment.Deployment, network instance.Network, remote Remote) ([]Record, []Union, []string, error) {
	var recs []Record
	var unions []Union
	var errs, warnings []string
	add := func(name, target string) {
		recs = append(recs, Record{Name: strings.ToLower(strings.TrimSuffix(name, ".")), Target: target + "."})
	}
	for _, g := range d.Groups {
		// The director's own forms on the one network pods have: the
		// canonical group query and instance UUID names, and the index
		// name spec.networks.default.dns_record_name hands out as is.
		base := canonical(g.Manifest.Name) + "." + PodNetwork + "." + canonical(d.Name) + "." + instance.DNSDomain
		add("q-s0."+base, g.Address)
		for _, inst := range g.Instances {
			add(inst.ID+"."+base, inst.Address)
			add(fmt.Sprintf("%d.%s.%s.%s.%s", inst.Index, g.Manifest.Name, PodNetwork, d.Name, instance.DNSDomain), inst.Address)
		}
	}
	aliases, err := collect(d)
	if err != nil {
		return nil, nil, nil, err
	}
	for _, a := range aliases {
		targets, union, missing, err := resolve(d, network, remote, a)
		for _, g := range missing {
			warnings = append(warnings, fmt.Sprintf("job '%s', alias '%s': target instance group '%s' is not in deployment '%s': it answers nothing, as bosh-dns answers nothing for a group without instances", AliasesJob, a.domain, g, d.Name))
		}
		if lookup := (*lookupError)(nil); errors.As(err, &lookup) {
			return nil, nil, nil, fmt.Errorf("resolving DNS alias '%s': %w", a.domain, lookup.err)
		}
		if err == nil {
			err = validName(a.domain)
		}
		if err != nil {
			errs = append(errs, fmt.Sprintf("  - Alias '%s': %s", a.domain, err))
			continue
		}
		for _, t := range targets {
			add(t.Name, t.Target)
		}
		if union != nil {
			unions = append(unions, *union)
		}
	}
	if len(errs) > 0 {
		return nil, nil, nil, fmt.Errorf("Failed to resolve DNS aliases of deployment '%s':\n%s", d.Name, strings.Join(errs, "\n"))
	}
	slices.SortFunc(recs, func(a, b Record) int { return strings.Compare(a.Name, b.Name) })
	recs = slices.Compact(recs)
	for i := 1; i < len(recs); i++ {
		if recs[i].Name == recs[i-1].Name {
			return nil, nil, nil, fmt.Errorf("Failed to resolve DNS aliases of deployment '%s':\n  - Name '%s' resolves to both %s and %s: bosh-injector serves each name as one Service, so declare the targets in one alias",
				d.Name, recs[i].Name, strings.TrimSuffix(recs[i-1].Target, "."), strings.TrimSuffix(recs[i].Target, "."))
		}
	}
	return recs, unions, warnings, nil
}

// alias is one domain with its targets, merged over every bosh-dns-aliases
// job of the deployment as bosh-dns merges its aliases files.
type alias struct {
	domain  string
	targets []target
}

type target struct {
	query, group, network, deployment, domain string
}

// collect reads the aliases property of every bosh-dns-aliases job. The job
// is usually an addon and so on every group; identical declarations count
// once.
func collect(d *deployment.Deployment) ([]alias, error) {
	var out []alias
	var errs []string
	for _, g := range d.Groups {
		for _, j := range g.Jobs {
			if j.Name != AliasesJob {
				continue
			}
			v, _ := j.Properties.Get("aliases")
			list, ok := v.([]any)
			if !ok && v != nil {
				errs = append(errs, fmt.Sprintf("  - Job '%s' in instance group '%s': property 'aliases' must be a list", j.Name, g.Manifest.Name))
				continue
			}
			for _, e := range list {
				a, err := parseAlias(e)
				if err != nil {
					errs = append(errs, fmt.Sprintf("  - Job '%s' in instance group '%s': %s", j.Name, g.Manifest.Name, err))
					continue
				}
				i := slices.IndexFunc(out, func(o alias) bool { return o.domain == a.domain })
				if i < 0 {
					out = append(out, a)
					continue
				}
				for _, t := range a.targets {
					if !slices.Contains(out[i].targets, t) {
						out[i].targets = append(out[i].targets, t)
					}
				}
			}
		}
	}
	if len(errs) > 0 {
		slices.Sort(errs)
		return nil, fmt.Errorf("Failed to resolve DNS aliases of deployment '%s':\n%s", d.Name, strings.Join(slices.Compact(errs), "\n"))
	}
	return out, nil
}

// parseAlias reads one entry of `aliases`; a missing key is the error the
// job's template raises (Ruby's Hash#fetch).
func parseAlias(e any) (alias, error) {
	m, ok := e.(*yamlvalue.Map)
	if !ok {
		return alias{}, errors.New("every entry of 'aliases' must be a hash with 'domain' and 'targets'")
	}
	domain, err := fetch(m, "domain")
	if err != nil {
		return alias{}, err
	}
	a := alias{domain: fmt.Sprint(domain)}
	ts, err := fetch(m, "targets")
	if err != nil {
		return alias{}, fmt.Errorf("alias '%s': %w", a.domain, err)
	}
	list, _ := ts.([]any)
	for _, t := range list {
		tm, ok := t.(*yamlvalue.Map)
		if !ok {
			return alias{}, fmt.Errorf("alias '%s': target %v is not a hash with query, instance_group, network and deployment", a.domain, t)
		}
		var vals [4]string
		for i, k := range []string{"query", "instance_group", "network", "deployment"} {
			v, err := fetch(tm, k)
			if err != nil {
				return alias{}, fmt.Errorf("alias '%s': %w", a.domain, err)
			}
			vals[i] = fmt.Sprint(v)
		}
		// A target without a domain names the director's.
		domain := instance.DNSDomain
		if v, ok := tm.Get("domain"); ok && v != nil {
			domain = fmt.Sprint(v)
		}
		a.targets = append(a.targets, target{query: vals[0], group: vals[1], network: vals[2], deployment: vals[3], domain: domain})
	}
	return a, nil
}

// PodNetwork is the one network instances have: spec.networks and the
// director's address forms name it.
const PodNetwork = "default"

// Unhonoured describes, once each, the alias target fields that
// bosh-injector cannot answer as bosh-dns would: a network other than the
// one instances have, and a domain other than the director's. Those
// targets answer as if they named PodNetwork and instance.DNSDomain. Errors
// in the aliases are Records' to report.
func Unhonoured(d *deployment.Deployment) []string {
	aliases, err := collect(d)
	if err != nil {
		return nil
	}
	var out []string
	for _, a := range aliases {
		for _, t := range a.targets {
			where := fmt.Sprintf("job '%s', alias '%s', target instance group '%s' of deployment '%s'", AliasesJob, a.domain, t.group, t.deployment)
			if t.network != PodNetwork {
				out = append(out, fmt.Sprintf("%s: field 'network' ('%s') is not honoured: instances have the one network '%s', whose addresses answer the alias", where, t.network, PodNetwork))
			}
			if t.domain != instance.DNSDomain {
				out = append(out, fmt.Sprintf("%s: field 'domain' ('%s') is not honoured: every instance's BOSH names are under '%s', which answers the alias", where, t.domain, instance.DNSDomain))
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func fetch(m *yamlvalue.Map, key string) (any, error) {
	v, ok := m.Get(key)
	if !ok {
		return nil, fmt.Errorf("key not found: %q", key)
	}
	return v, nil
}

// resolve gives the records of one alias. `*` is the group: its Service;
// `*` over several groups is the Union's Service. `_` is one name per
// instance, the instance's UUID in place of the domain's leading `_`: its
// instance Service. A `*` target of a `_.` domain answers every name under
// it with the group. A target naming a group of d's own deployment that d
// does not have answers nothing: missing lists those groups.
func resolve(d *deployment.Deployment, network instance.Network, remote Remote, a alias) (out []Record, union *Union, missing []string, err error) {
	rest, placeholder := strings.CutPrefix(a.domain, "_.")
	name := a.domain
	if placeholder {
		name = "*." + rest
	}
	var groups, addresses, deployments []string
	for _, t := range a.targets {
		depName, ids, instAddresses, groupAddress, err := targetGroup(d, network, remote, t)
		if errors.Is(err, errNotInDeployment) {
			if !slices.Contains(missing, t.group) {
				missing = append(missing, t.group)
			}
			continue
		}
		if err != nil {
			return nil, nil, nil, err
		}
		switch queryOf(t.query) {
		case "*":
			if !slices.Contains(addresses, groupAddress) {
				groups, addresses, deployments = append(groups, t.group), append(addresses, groupAddress), append(deployments, depName)
			}
		case healthyQuery:
			if len(a.targets) > 1 {
				return nil, nil, nil, fmt.Errorf("query '%s' (healthy instances) answers for one target only: use '*' for an alias over several groups", t.query)
			}
			_, healthy, err := network.SubsetAddress(depName, t.group, instance.Subset{Healthy: true})
			if err != nil {
				return nil, nil, nil, err
			}
			out = append(out, Record{Name: name, Target: healthy})
		case "_":
			if !placeholder {
				return nil, nil, nil, fmt.Errorf("query '_' answers '<instance-id>.<domain>': the domain must start with '_.'")
			}
			for i := range ids {
				out = append(out, Record{Name: ids[i] + "." + rest, Target: instAddresses[i]})
			}
		default:
			return nil, nil, nil, fmt.Errorf("query '%s' of instance group '%s' in deployment '%s' is not supported: use '*' (the group), '_' (each instance), 'q-s4' or 'q-s0' (all instances) or 'q-s3' (healthy ones)", t.query, t.group, depName)
		}
	}
	if len(addresses) < 2 {
		for _, addr := range addresses {
			out = append(out, Record{Name: name, Target: addr})
		}
		return out, nil, missing, nil
	}
	// The union's Service selects a label the webhook puts on the pods of
	// the deployment it gathers, so its groups must all be d's own.
	for i, dep := range deployments {
		if dep != d.Name {
			return nil, nil, nil, fmt.Errorf("its '*' targets name instance groups '%s' and '%s' of deployments '%s' and '%s': an alias over several groups must target groups of its own deployment '%s'",
				groups[0], groups[i], deployments[0], dep, d.Name)
		}
	}
	h := sha256.Sum256([]byte(canonical(d.Name) + "/" + strings.ToLower(strings.TrimSuffix(a.domain, "."))))
	sum := hex.EncodeToString(h[:])[:10]
	service, address, err := network.Address(d.Name + "-alias-" + sum)
	if err != nil {
		return nil, nil, nil, err
	}
	out = append(out, Record{Name: name, Target: address})
	return out, &Union{Domain: a.domain, Service: service, Label: names.LabelAliasPrefix + sum, Groups: groups}, missing, nil
}

// healthyQuery stands for a query of the group's healthy instances.
const healthyQuery = "healthy"

// queryOf reads bosh-dns's short health queries (q-s<N>: s0 the default,
// healthy instances or all when none is; s3 the healthy; s4 all) as the
// group ('*', whose Service answers every instance) or its healthy
// instances; other queries are as given.
func queryOf(q string) string {
	switch q {
	case "q-s0", "q-s4":
		return "*"
	case "q-s3":
		return healthyQuery
	}
	return q
}

// errNotInDeployment is a target naming a group its own deployment does
// not have.
var errNotInDeployment = errors.New("no such instance group")

// targetGroup finds a target's group, in d or in another deployment of the
// namespace, and its instance IDs and addresses and group address.
func targetGroup(d *deployment.Deployment, network instance.Network, remote Remote, t target) (dep string, ids, addresses []string, group string, err error) {
	if canonical(t.deployment) == canonical(d.Name) {
		for _, g := range d.Groups {
			if canonical(g.Manifest.Name) != canonical(t.group) {
				continue
			}
			for _, inst := range g.Instances {
				ids = append(ids, inst.ID)
				addresses = append(addresses, inst.Address)
			}
			return d.Name, ids, addresses, g.Address, nil
		}
		return d.Name, nil, nil, "", errNotInDeployment
	}
	name, count, found := "", 0, false
	if remote != nil {
		if name, count, found, err = remote(t.deployment, t.group); err != nil {
			return t.deployment, nil, nil, "", &lookupError{err}
		}
	}
	if !found {
		return t.deployment, nil, nil, "", fmt.Errorf("instance group '%s' does not exist in deployment '%s' of namespace %s (as that deployment was last gathered)", t.group, t.deployment, network.Namespace)
	}
	if group, err = network.GroupAddress(name, t.group); err != nil {
		return name, nil, nil, "", err
	}
	insts, err := network.Instances(name, t.group, nil, count)
	if err != nil {
		return name, nil, nil, "", err
	}
	for _, inst := range insts {
		ids = append(ids, inst.ID)
		addresses = append(addresses, inst.Address)
	}
	return name, ids, addresses, group, nil
}

// validName checks that an alias domain is a DNS name a zone file can hold,
// so one bad alias cannot keep CoreDNS from loading the whole zone.
func validName(domain string) error {
	name := strings.TrimSuffix(domain, ".")
	// The zone's origin takes room too; 253 is the whole name's limit.
	if name == "" || len(name) > 160 {
		return fmt.Errorf("'%s' is not a DNS name of at most 160 characters", domain)
	}
	for i, label := range strings.Split(name, ".") {
		if len(label) == 0 || len(label) > 63 || (label == "_" && i > 0) {
			return fmt.Errorf("'%s' is not a DNS name: label '%s'", domain, label)
		}
		for _, r := range strings.ToLower(label) {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '*' && label == "*" && i == 0) {
				return fmt.Errorf("'%s' is not a DNS name: label '%s' holds '%c'", domain, label, r)
			}
		}
	}
	return nil
}

// canonical is the director's canonical form of a DNS label, which
// is how Kubernetes names are sanitized too.
func canonical(s string) string { return names.LabelValue(s) }

// ZoneFile is the zone of origin holding recs, in the master file format
// CoreDNS's auto plugin loads. Its SOA serial is a digest of the records,
// so CoreDNS reloads the zone exactly when they change.
func ZoneFile(origin string, recs []Record) []byte {
	var body strings.Builder
	for _, r := range recs {
		fmt.Fprintf(&body, "%s\tIN\tCNAME\t%s\n", r.Name, r.Target)
	}
	h := fnv.New32a()
	h.Write([]byte(body.String()))
	serial := max(h.Sum32(), 1)
	var b strings.Builder
	fmt.Fprintf(&b, "$ORIGIN %s.\n$TTL %d\n", origin, TTL)
	fmt.Fprintf(&b, "@\tIN\tSOA\tns.%s. hostmaster.%s. %d 3600 600 86400 %d\n", origin, origin, serial, TTL)
	fmt.Fprintf(&b, "@\tIN\tNS\tns.%s.\n", origin)
	b.WriteString(body.String())
	return []byte(b.String())
}
