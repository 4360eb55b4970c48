package aws_test

import (
	"testing"
	"time"

	"github.com/dovetail-sh/dovetail/controller/cloudprovider"
)

// Reboot (RebootForRepair) as Karpenter's AWS provider maps EC2's answers: the
// instance is rebooted by id; a call the policy denies is a refusal retrying cannot
// change; a throttle is retried; a terminated instance is NodeClaimNotFound and is
// not asked.
func TestRebootMapsEC2sAnswers(t *testing.T) {
	f := newUnitFixture(t)
	nc, err := f.cp.Create(f.ctx, onDemandClaim("sick", "uid-sick"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.cp.Reboot(f.ctx, nc, "op-1"); err != nil || f.ec2.count("RebootInstances") != 1 {
		t.Fatalf("Reboot = %v after %d RebootInstances calls; want accepted in one", err, f.ec2.count("RebootInstances"))
	}
	f.ec2.fail["RebootInstances"] = apiError("UnauthorizedOperation", "You are not authorized to perform this operation.")
	if err := f.cp.Reboot(f.ctx, nc, "op-2"); !cloudprovider.IsNodeRebootRefused(err) {
		t.Errorf("a denied RebootInstances: %v; want a refusal", err)
	}
	f.ec2.fail["RebootInstances"] = apiError("RequestLimitExceeded", "Request limit exceeded.")
	if err := f.cp.Reboot(f.ctx, nc, "op-3"); err == nil || cloudprovider.IsNodeRebootRefused(err) || cloudprovider.IsNodeClaimNotFound(err) {
		t.Errorf("a throttled RebootInstances: %v; want an error to retry", err)
	}
	delete(f.ec2.fail, "RebootInstances")
	for attempt := 0; !cloudprovider.IsNodeClaimNotFound(f.cp.Delete(f.ctx, nc)); attempt++ {
		if attempt == 10 {
			t.Fatal("the instance is not terminated after 10 Deletes")
		}
		f.clock.Step(2 * time.Second)
	}
	calls := f.ec2.count("RebootInstances")
	if err := f.cp.Reboot(f.ctx, nc, "op-4"); !cloudprovider.IsNodeClaimNotFound(err) || f.ec2.count("RebootInstances") != calls {
		t.Errorf("rebooting a terminated instance: %v, %d more calls; want NodeClaimNotFound and no call", err, f.ec2.count("RebootInstances")-calls)
	}
}
