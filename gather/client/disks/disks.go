// Package disks is the client side of orphaned persistent disks: listing
// them as `bosh disks --orphaned` does and deleting one as
// `bosh delete-disk` does. The operator (gather/operator/disks) labels
// them and deletes them after the retention.
package disks

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/operator/orphan"
)

// Disk is an orphaned claim. DiskName is a named disk's name in
// `persistent_disks`, "-" for the managed disk.
type Disk struct {
	Namespace, Name, DiskName, Size, Deployment, Instance, OrphanedAt string
}

// Orphaned lists the orphaned claims of namespace ("" for all), oldest
// first as the director lists them.
func Orphaned(ctx context.Context, c client.Reader, namespace string) ([]Disk, error) {
	var list corev1.PersistentVolumeClaimList
	if err := c.List(ctx, &list, client.InNamespace(namespace), orphan.Selector); err != nil {
		return nil, fmt.Errorf("listing orphaned claims: %w", err)
	}
	var out []Disk
	for _, p := range list.Items {
		size := p.Status.Capacity[corev1.ResourceStorage]
		if size.IsZero() {
			size = p.Spec.Resources.Requests[corev1.ResourceStorage]
		}
		diskName := p.Annotations[names.AnnotationDiskName]
		if diskName == "" {
			diskName = "-"
		}
		out = append(out, Disk{
			Namespace: p.Namespace, Name: p.Name, DiskName: diskName, Size: size.String(),
			Deployment: p.Labels[names.LabelDeployment],
			Instance:   orphan.Instance(&p),
			OrphanedAt: orphan.At(&p),
		})
	}
	slices.SortFunc(out, func(a, b Disk) int {
		return strings.Compare(a.OrphanedAt+a.Namespace+a.Name, b.OrphanedAt+b.Namespace+b.Name)
	})
	return out, nil
}

// Print writes disks as the director's table: disk, size, deployment,
// instance, orphaned at; and, after the disk, its name in
// `persistent_disks`.
func Print(w io.Writer, disks []Disk, allNamespaces bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := "DISK\tNAME\tSIZE\tDEPLOYMENT\tINSTANCE\tORPHANED AT"
	if allNamespaces {
		head = "NAMESPACE\t" + head
	}
	fmt.Fprintln(tw, head)
	for _, d := range disks {
		row := strings.Join([]string{d.Name, d.DiskName, d.Size, d.Deployment, d.Instance, d.OrphanedAt}, "\t")
		if allNamespaces {
			row = d.Namespace + "\t" + row
		}
		fmt.Fprintln(tw, row)
	}
	fmt.Fprintf(tw, "\n%d disks\n", len(disks))
	return tw.Flush()
}

// Delete deletes an orphaned claim, and only an orphaned one, as the
// director's delete-disk takes orphaned disks only: an instance's disk
// goes with its instance.
func Delete(ctx context.Context, c client.Client, namespace, name string) error {
	var p corev1.PersistentVolumeClaim
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &p); err != nil {
		return fmt.Errorf("disk '%s': %w", name, err)
	}
	if !orphan.Is(&p) {
		return fmt.Errorf("disk '%s' is not orphaned: an instance mounts it (scale the group down or delete its StatefulSet first)", name)
	}
	if err := orphan.Delete(ctx, c, &p); err != nil {
		return fmt.Errorf("deleting disk '%s': %w", name, err)
	}
	return nil
}
