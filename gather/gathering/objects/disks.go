package objects

import (
	appsv1 "k8s.io/api/apps/v1"
)

// retainClaims keeps a StatefulSet's claims when it scales down or is
// deleted, as the director orphans a removed instance's disk instead of
// deleting it: the operator labels such claims orphaned and deletes them
// after the retention (gather/operator/disks). It is set explicitly, not
// left to the cluster's default, so the objects say what happens to data.
func retainClaims(sts *appsv1.StatefulSet) {
	sts.Spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
		WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
		WhenScaled:  appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
	}
}
