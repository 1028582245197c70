package inject

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/bosh-injector/bosh-injector/gather/names"
)

// DNS says where injected pods resolve names: bosh-injector's CoreDNS
// serves each deployment's BOSH names (aliases, the director's address
// forms) and forwards everything else to the cluster DNS.
type DNS struct {
	// Server is the CoreDNS Service's cluster IP; empty leaves pods' DNS as
	// it is.
	Server        string
	ClusterDomain string
}

// dnsRecord keeps the user's DNS settings the injection replaced.
type dnsRecord struct {
	Policy corev1.DNSPolicy     `json:"policy,omitempty"`
	Config *corev1.PodDNSConfig `json:"config,omitempty"`
}

// ndots is the cluster DNS's default: names with fewer dots try the search
// domains first, so nats.service.cf.internal is looked up in the
// deployment's zone before anywhere else.
const ndots = "5"

// setDNS points a pod with the cluster's DNS policy at bosh-injector's
// CoreDNS, with the deployment's zone as first search domain followed by the
// cluster's own, as ClusterFirst would give. A pod whose user chose another
// policy keeps it. It returns what to restore on Strip, nil when nothing
// changed.
func setDNS(pod *corev1.Pod, dns DNS, namespace, deployment string) *dnsRecord {
	if dns.Server == "" || namespace == "" || (pod.Spec.DNSPolicy != "" && pod.Spec.DNSPolicy != corev1.DNSClusterFirst) {
		return nil
	}
	rec := &dnsRecord{Policy: pod.Spec.DNSPolicy, Config: pod.Spec.DNSConfig.DeepCopy()}
	cfg := &corev1.PodDNSConfig{
		Nameservers: []string{dns.Server},
		Searches: []string{
			names.DNSZone(deployment, namespace),
			namespace + ".svc." + dns.ClusterDomain,
			"svc." + dns.ClusterDomain,
			dns.ClusterDomain,
		},
		Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: new(ndots)}},
	}
	// With ClusterFirst the user's dnsConfig is merged into the cluster's;
	// it is merged into ours the same way.
	if user := pod.Spec.DNSConfig; user != nil {
		for _, s := range user.Searches {
			if !slices.Contains(cfg.Searches, s) {
				cfg.Searches = append(cfg.Searches, s)
			}
		}
		cfg.Nameservers = append(cfg.Nameservers, slices.DeleteFunc(slices.Clone(user.Nameservers), func(s string) bool { return s == dns.Server })...)
		for _, o := range user.Options {
			if i := slices.IndexFunc(cfg.Options, func(c corev1.PodDNSConfigOption) bool { return c.Name == o.Name }); i >= 0 {
				cfg.Options[i] = o
			} else {
				cfg.Options = append(cfg.Options, o)
			}
		}
	}
	pod.Spec.DNSPolicy = corev1.DNSNone
	pod.Spec.DNSConfig = cfg
	return rec
}

// restoreDNS undoes setDNS.
func restoreDNS(pod *corev1.Pod, rec *dnsRecord) {
	if rec != nil {
		pod.Spec.DNSPolicy, pod.Spec.DNSConfig = rec.Policy, rec.Config
	}
}
