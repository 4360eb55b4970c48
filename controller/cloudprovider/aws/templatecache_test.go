package aws_test

import (
	"testing"
)

// A launch template deleted behind the provider's back (another replica's sweep, a
// person) is made again by the launch that finds it gone, and by the ones after.
func TestLaunchRecreatesADeletedTemplate(t *testing.T) {
	f := newUnitFixture(t)
	if _, err := f.cp.Create(f.ctx, onDemandClaim("first", "uid-1")); err != nil {
		t.Fatal(err)
	}
	created := f.ec2.count("CreateLaunchTemplate")
	f.ec2.deleteTemplates()

	if _, err := f.cp.Create(f.ctx, onDemandClaim("second", "uid-2")); err != nil {
		t.Fatalf("a launch after its cached template was deleted: %v; want the template made again", err)
	}
	if n := f.ec2.count("CreateLaunchTemplate") - created; n != 1 {
		t.Errorf("%d templates made after the deletion, want 1", n)
	}
	if n := f.ec2.running(); n != 2 {
		t.Errorf("%d instances, want 2", n)
	}
	fleets := f.ec2.fleets
	if a, b := fleets[len(fleets)-2].ClientToken, fleets[len(fleets)-1].ClientToken; *a == *b {
		t.Errorf("the request after the template was made again reused the failed request's token %s", *a)
	}
	if _, err := f.cp.Create(f.ctx, onDemandClaim("third", "uid-3")); err != nil {
		t.Fatal(err)
	}
	if n := f.ec2.count("CreateLaunchTemplate") - created; n != 1 {
		t.Errorf("%d templates made by the launches after the deletion, want 1 (the next launch reuses it)", n)
	}
}
