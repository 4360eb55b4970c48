package localstack

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	dtaws "github.com/dovetail-sh/dovetail/controller/cloudprovider/aws"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// KubeletStandIn plays the kubelets of the instances the emulator launches: for each
// running instance of the cluster it registers a Node the way the EKS AMI's kubelet
// would (named by private DNS, providerID aws:///<zone>/<id>, the labels, taints and
// max pods its user data's NodeConfig says, capacity of its instance type), marked
// for kwok to keep Ready and run pods on; when the instance terminates, its Node goes.
type KubeletStandIn struct {
	kube    client.Client
	ec2     *ec2.Client
	cluster string
	groups  []string
	stop    func()

	mu         sync.Mutex
	registered map[string]string // instance id → node name
	types      map[string]ec2types.InstanceTypeInfo
}

// StartKubeletStandIn registers nodes until Stop. securityGroups are those of the
// launch templates: the emulator's CreateFleet does not apply a template's security
// groups (spot requests get the default group), so the stand-in sets them on the
// instance before it joins, as EC2 would have at launch. logf reports sync errors.
func StartKubeletStandIn(kube client.Client, api *ec2.Client, cluster string, logf func(format string, args ...any), securityGroups ...string) *KubeletStandIn {
	k := &KubeletStandIn{kube: kube, ec2: api, cluster: cluster, groups: securityGroups, registered: map[string]string{}, types: map[string]ec2types.InstanceTypeInfo{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			began := time.Now()
			if err := k.sync(ctx); err != nil && ctx.Err() == nil {
				logf("kubelet stand-in: %v", err)
			}
			// At least as long as the sync took: over thousands of instances the
			// emulator's answer takes a while, and the stand-in must not take
			// more than half its time from the controller's calls.
			select {
			case <-ctx.Done():
			case <-time.After(max(250*time.Millisecond, time.Since(began))):
			}
		}
	}()
	k.stop = func() { cancel(); <-done }
	return k
}

// Stop ends the registration loop and waits for it.
func (k *KubeletStandIn) Stop() { k.stop() }

// Registered is how many nodes the stand-in has registered so far.
func (k *KubeletStandIn) Registered() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.registered)
}

func (k *KubeletStandIn) sync(ctx context.Context) error {
	// Every page: the emulator answers 100 reservations a page unless asked for
	// more, and EC2 pages its answers too.
	pages := ec2.NewDescribeInstancesPaginator(k.ec2, &ec2.DescribeInstancesInput{MaxResults: aws.Int32(1000), Filters: []ec2types.Filter{
		{Name: aws.String("tag:" + dtaws.ClusterTag(k.cluster)), Values: []string{"owned"}},
	}})
	for pages.HasMorePages() {
		out, err := pages.NextPage(ctx)
		if err != nil {
			return err
		}
		if err := k.syncPage(ctx, out.Reservations); err != nil {
			return err
		}
	}
	return nil
}

// syncPage registers the running instances of one page and removes the nodes of
// its terminated ones.
func (k *KubeletStandIn) syncPage(ctx context.Context, reservations []ec2types.Reservation) error {
	for _, r := range reservations {
		for i := range r.Instances {
			inst := &r.Instances[i]
			id := aws.ToString(inst.InstanceId)
			k.mu.Lock()
			name, known := k.registered[id]
			k.mu.Unlock()
			switch state := inst.State.Name; {
			case state == ec2types.InstanceStateNameRunning && !known:
				if err := k.register(ctx, inst); err != nil {
					return fmt.Errorf("registering %s: %w", id, err)
				}
			case (state == ec2types.InstanceStateNameTerminated || state == ec2types.InstanceStateNameShuttingDown) && known && name != "":
				// The node object goes with the machine, as the cloud node
				// lifecycle controller would see to.
				if err := k.kube.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}); client.IgnoreNotFound(err) != nil {
					return err
				}
				k.mu.Lock()
				k.registered[id] = ""
				k.mu.Unlock()
			}
		}
	}
	return nil
}

// bootConfig is what the stand-in reads from the NodeConfig in an instance's user data.
type bootConfig struct {
	Spec struct {
		Cluster struct {
			Name string `json:"name"`
		} `json:"cluster"`
		Kubelet struct {
			Config struct {
				MaxPods            int64          `json:"maxPods"`
				RegisterWithTaints []corev1.Taint `json:"registerWithTaints"`
			} `json:"config"`
			Flags []string `json:"flags"`
		} `json:"kubelet"`
	} `json:"spec"`
}

func (k *KubeletStandIn) bootConfig(ctx context.Context, id string) (*bootConfig, error) {
	attr, err := k.ec2.DescribeInstanceAttribute(ctx, &ec2.DescribeInstanceAttributeInput{InstanceId: aws.String(id), Attribute: ec2types.InstanceAttributeNameUserData})
	if err != nil {
		return nil, err
	}
	if attr.UserData == nil || attr.UserData.Value == nil {
		return nil, fmt.Errorf("instance has no user data; it could not join")
	}
	raw, err := base64.StdEncoding.DecodeString(*attr.UserData.Value)
	if err != nil {
		return nil, err
	}
	msg, err := mail.ReadMessage(strings.NewReader(string(raw)))
	if err != nil {
		return nil, fmt.Errorf("user data is not MIME: %w", err)
	}
	_, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil {
		return nil, err
	}
	parts := multipart.NewReader(msg.Body, params["boundary"])
	for {
		p, err := parts.NextPart()
		if err == io.EOF {
			return nil, fmt.Errorf("user data has no NodeConfig")
		}
		if err != nil {
			return nil, err
		}
		if p.Header.Get("Content-Type") != "application/node.eks.aws" {
			continue
		}
		body, _ := io.ReadAll(p)
		cfg := &bootConfig{}
		if err := yaml.Unmarshal(body, cfg); err != nil {
			return nil, err
		}
		return cfg, nil
	}
}

func (k *KubeletStandIn) instanceType(ctx context.Context, name ec2types.InstanceType) (ec2types.InstanceTypeInfo, error) {
	k.mu.Lock()
	info, ok := k.types[string(name)]
	k.mu.Unlock()
	if ok {
		return info, nil
	}
	out, err := k.ec2.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []ec2types.InstanceType{name}})
	if err != nil || len(out.InstanceTypes) == 0 {
		return info, fmt.Errorf("describing %s: %v", name, err)
	}
	k.mu.Lock()
	k.types[string(name)] = out.InstanceTypes[0]
	k.mu.Unlock()
	return out.InstanceTypes[0], nil
}

func (k *KubeletStandIn) register(ctx context.Context, inst *ec2types.Instance) error {
	id := aws.ToString(inst.InstanceId)
	zone := aws.ToString(inst.Placement.AvailabilityZone)
	boot, err := k.bootConfig(ctx, id)
	if err != nil {
		return err
	}
	if boot.Spec.Cluster.Name != k.cluster {
		return fmt.Errorf("user data joins cluster %q, not %q", boot.Spec.Cluster.Name, k.cluster)
	}
	if len(k.groups) > 0 {
		if _, err := k.ec2.ModifyInstanceAttribute(ctx, &ec2.ModifyInstanceAttributeInput{InstanceId: inst.InstanceId, Groups: k.groups}); err != nil {
			return fmt.Errorf("applying the launch template's security groups: %w", err)
		}
	}
	info, err := k.instanceType(ctx, inst.InstanceType)
	if err != nil {
		return err
	}
	entry, ok := dtaws.CatalogEntry(info, []string{zone}, 1, boot.Spec.Kubelet.Config.MaxPods)
	if !ok {
		return fmt.Errorf("instance type %s cannot run a node", inst.InstanceType)
	}
	labels := entry.NodeLabels()
	for _, flag := range boot.Spec.Kubelet.Flags {
		if list, ok := strings.CutPrefix(flag, "--node-labels="); ok {
			for _, pair := range strings.Split(list, ",") {
				if key, value, ok := strings.Cut(pair, "="); ok {
					labels[key] = value
				}
			}
		}
	}
	name := aws.ToString(inst.PrivateDnsName)
	if name == "" {
		name = id
	}
	labels[v1.LabelHostname] = name
	labels[v1.LabelTopologyZone] = zone
	// The kubelet computes allocatable from the same reservations the provider
	// planned with: the EKS formulas.
	it := scheduling.NewInstanceType(entry.Name, labels, entry.Capacity(), nil, scheduling.DefaultAllocatableSettings())
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
		Spec:       corev1.NodeSpec{ProviderID: dtaws.ProviderIDPrefix + zone + "/" + id, Taints: boot.Spec.Kubelet.Config.RegisterWithTaints},
	}
	if err := k.kube.Create(ctx, node); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	base := node.DeepCopy()
	node.Status.Capacity = it.Capacity.ToResourceList()
	node.Status.Allocatable = it.Allocatable.ToResourceList()
	node.Status.NodeInfo = corev1.NodeSystemInfo{Architecture: labels[v1.LabelArch], OperatingSystem: "linux", KubeletVersion: "v1.33.13"}
	if err := k.kube.Status().Patch(ctx, node, client.MergeFrom(base)); err != nil {
		return err
	}
	k.mu.Lock()
	k.registered[id] = name
	k.mu.Unlock()
	return nil
}
