package aws_test

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	dtaws "github.com/dovetail-sh/dovetail/controller/cloudprovider/aws"
)

func launchedClaim(id string) *v1.NodeClaim {
	return &v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: id},
		Spec:       v1.NodeClaimSpec{NodeClassRef: &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "default"}},
		Status:     v1.NodeClaimStatus{ProviderID: fmt.Sprintf("aws:///us-west-2a/%s", id)},
	}
}

// A drift pass over a fleet costs one listing, 1,000 instances a page, not one
// call per node.
func TestDriftPassListsInstancesInPages(t *testing.T) {
	f := newUnitFixture(t)
	const nodes = 1200
	ids := f.ec2.addInstances(nodes-1, "ami-amd64", "subnet-a")
	ids = append(ids, f.ec2.addInstances(1, "ami-old", "subnet-a")...)
	pass := func() map[string]string {
		t.Helper()
		out := map[string]string{}
		for _, id := range ids {
			reason, err := f.cp.IsDrifted(f.ctx, launchedClaim(id))
			if err != nil {
				t.Fatalf("IsDrifted(%s): %v", id, err)
			}
			out[id] = string(reason)
		}
		return out
	}
	got := pass()
	pages := (nodes + 999) / 1000
	if n := f.ec2.count("DescribeInstances"); n != pages {
		t.Errorf("a drift pass over %d nodes made %d DescribeInstances calls, want %d (one listing, %d per page)", nodes, n, pages, 1000)
	}
	if got[ids[nodes-1]] != string(dtaws.DriftAMI) || got[ids[0]] != "" {
		t.Errorf("drift of the old-image node %q, of a current one %q; want %s and none", got[ids[nodes-1]], got[ids[0]], dtaws.DriftAMI)
	}

	// The next pass within the listing's life asks EC2 nothing; after it, lists again.
	pass()
	if n := f.ec2.count("DescribeInstances"); n != pages {
		t.Errorf("a second pass within %v made %d more calls, want 0", dtaws.DriftListingTTL, n-pages)
	}
	f.clock.Step(dtaws.DriftListingTTL)
	pass()
	if n := f.ec2.count("DescribeInstances"); n != 2*pages {
		t.Errorf("a pass after %v made %d calls, want %d", dtaws.DriftListingTTL, n-pages, pages)
	}

	// A node whose claim was made after the listing cannot be in it: no verdict
	// and no call until the next listing, which judges it.
	fresh := f.ec2.addInstances(1, "ami-old", "subnet-a")[0]
	freshClaim := launchedClaim(fresh)
	freshClaim.CreationTimestamp = metav1.NewTime(f.clock.Now())
	if reason, err := f.cp.IsDrifted(f.ctx, freshClaim); err != nil || reason != "" {
		t.Errorf("drift of a node newer than the listing = %q, %v; want no verdict yet", reason, err)
	}
	if n := f.ec2.count("DescribeInstances"); n != 2*pages {
		t.Errorf("%d calls for a node newer than the listing, want none", n-2*pages)
	}
	f.clock.Step(dtaws.DriftListingTTL)
	if reason, err := f.cp.IsDrifted(f.ctx, freshClaim); err != nil || reason != dtaws.DriftAMI {
		t.Errorf("drift of that node at the next listing = %q, %v; want %s", reason, err, dtaws.DriftAMI)
	}
	listed := f.ec2.count("DescribeInstances")

	// A node launched before the listing and missing from it is described on its
	// own, once.
	late := f.ec2.addInstances(1, "ami-old", "subnet-a")[0]
	for i := 0; i < 3; i++ {
		reason, err := f.cp.IsDrifted(f.ctx, launchedClaim(late))
		if err != nil || reason != dtaws.DriftAMI {
			t.Errorf("drift of a node launched after the listing = %q, %v; want %s", reason, err, dtaws.DriftAMI)
		}
	}
	if n := f.ec2.count("DescribeInstances"); n != listed+1 {
		t.Errorf("%d calls for a node missing from the listing, want 1", n-listed)
	}
}
