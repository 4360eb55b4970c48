package iampolicy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
)

// A controller that runs as its own process cannot have its SDK clients hooked, so
// its calls are recorded on the wire instead: Proxy stands in front of the AWS
// emulator, decodes each request back into the SDK's typed input (the query
// protocol of EC2 and IAM, the JSON protocol of SSM, SQS and Pricing, EKS's REST
// paths) and records it as APIOption would, so Check covers such a controller too.

// inputs makes an empty typed input for each operation the mappings know.
var inputs = map[string]func() any{
	"EC2 CreateFleet":                    func() any { return &ec2.CreateFleetInput{} },
	"EC2 CreateLaunchTemplate":           func() any { return &ec2.CreateLaunchTemplateInput{} },
	"EC2 DeleteLaunchTemplate":           func() any { return &ec2.DeleteLaunchTemplateInput{} },
	"EC2 TerminateInstances":             func() any { return &ec2.TerminateInstancesInput{} },
	"EC2 RebootInstances":                func() any { return &ec2.RebootInstancesInput{} },
	"SSM GetParameter":                   func() any { return &ssm.GetParameterInput{} },
	"IAM GetInstanceProfile":             func() any { return &iam.GetInstanceProfileInput{} },
	"IAM CreateInstanceProfile":          func() any { return &iam.CreateInstanceProfileInput{} },
	"IAM AddRoleToInstanceProfile":       func() any { return &iam.AddRoleToInstanceProfileInput{} },
	"IAM RemoveRoleFromInstanceProfile":  func() any { return &iam.RemoveRoleFromInstanceProfileInput{} },
	"IAM DeleteInstanceProfile":          func() any { return &iam.DeleteInstanceProfileInput{} },
	"EKS DescribeCluster":                func() any { return &eks.DescribeClusterInput{} },
	"Pricing GetProducts":                func() any { return &pricing.GetProductsInput{} },
	"SQS GetQueueUrl":                    func() any { return &sqs.GetQueueUrlInput{} },
	"SQS ReceiveMessage":                 func() any { return &sqs.ReceiveMessageInput{} },
	"SQS DeleteMessage":                  func() any { return &sqs.DeleteMessageInput{} },
	"EC2 DescribeCapacityReservations":   func() any { return &ec2.DescribeCapacityReservationsInput{} },
	"EC2 DescribeImages":                 func() any { return &ec2.DescribeImagesInput{} },
	"EC2 DescribeInstances":              func() any { return &ec2.DescribeInstancesInput{} },
	"EC2 DescribeInstanceTypes":          func() any { return &ec2.DescribeInstanceTypesInput{} },
	"EC2 DescribeInstanceTypeOfferings":  func() any { return &ec2.DescribeInstanceTypeOfferingsInput{} },
	"EC2 DescribeLaunchTemplates":        func() any { return &ec2.DescribeLaunchTemplatesInput{} },
	"EC2 DescribePlacementGroups":        func() any { return &ec2.DescribePlacementGroupsInput{} },
	"EC2 DescribeSecurityGroups":         func() any { return &ec2.DescribeSecurityGroupsInput{} },
	"EC2 DescribeSpotPriceHistory":       func() any { return &ec2.DescribeSpotPriceHistoryInput{} },
	"EC2 DescribeSubnets":                func() any { return &ec2.DescribeSubnetsInput{} },
	"EC2 DescribeAvailabilityZones":      func() any { return &ec2.DescribeAvailabilityZonesInput{} },
	"EC2 DescribeInstanceStatus":         func() any { return &ec2.DescribeInstanceStatusInput{} },
	"EC2 CreateTags":                     func() any { return &ec2.CreateTagsInput{} },
	"EC2 RunInstances":                   func() any { return &ec2.RunInstancesInput{} },
	"EC2 DescribeLaunchTemplateVersions": func() any { return &ec2.DescribeLaunchTemplateVersionsInput{} },
}

// signingServices maps a request's signing name to the SDK's service id.
var signingServices = map[string]string{"ec2": "EC2", "iam": "IAM", "ssm": "SSM", "sqs": "SQS", "eks": "EKS", "pricing": "Pricing"}

var credentialScope = regexp.MustCompile(`Credential=[^/]+/[^/]+/([^/]+)/([^/]+)/aws4_request`)

// decodeWire turns one HTTP request into the SDK's service id, operation, region and
// typed input.
func decodeWire(req *http.Request, body []byte) (service, op, region string, input any, err error) {
	m := credentialScope.FindStringSubmatch(req.Header.Get("Authorization"))
	if m == nil {
		return "", "", "", nil, fmt.Errorf("unsigned request %s %s", req.Method, req.URL.Path)
	}
	region, service = m[1], signingServices[m[2]]
	if service == "" {
		return "", "", region, nil, fmt.Errorf("request to an unknown service %q", m[2])
	}
	var form url.Values
	switch {
	case strings.HasPrefix(req.Header.Get("Content-Type"), "application/x-www-form-urlencoded"):
		if form, err = url.ParseQuery(string(body)); err != nil {
			return service, "", region, nil, fmt.Errorf("reading the %s query, %w", service, err)
		}
		op = form.Get("Action")
	case req.Header.Get("X-Amz-Target") != "":
		_, op, _ = strings.Cut(req.Header.Get("X-Amz-Target"), ".")
	case service == "EKS" && req.Method == http.MethodGet && strings.Count(strings.Trim(req.URL.Path, "/"), "/") == 1 && strings.HasPrefix(req.URL.Path, "/clusters/"):
		op = "DescribeCluster"
		return service, op, region, &eks.DescribeClusterInput{Name: aws.String(strings.TrimPrefix(req.URL.Path, "/clusters/"))}, nil
	default:
		return service, "", region, nil, fmt.Errorf("%s request %s %s of no protocol this decoder knows", service, req.Method, req.URL.Path)
	}
	newInput, ok := inputs[service+" "+op]
	if !ok {
		return service, op, region, nil, fmt.Errorf("no typed input for %s %s: add it to tests/iampolicy inputs", service, op)
	}
	input = newInput()
	if form != nil {
		decodeQuery(form, "", reflect.ValueOf(input).Elem())
		return service, op, region, input, nil
	}
	if err := json.Unmarshal(body, input); err != nil {
		return service, op, region, nil, fmt.Errorf("reading the %s %s body, %w", service, op, err)
	}
	return service, op, region, input, nil
}

// decodeQuery fills v from a query-protocol form: fields by name, lists as
// Name.N (EC2 names a list by its element, InstanceIds as InstanceId.N) or
// Name.member.N (IAM).
func decodeQuery(form url.Values, prefix string, v reflect.Value) bool {
	set := false
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		for _, name := range []string{f.Name, strings.TrimSuffix(f.Name, "s"), strings.TrimSuffix(f.Name, "es")} {
			key := name
			if prefix != "" {
				key = prefix + "." + name
			}
			if present(form, key) && decodeValue(form, key, v.Field(i)) {
				set = true
				break
			}
		}
	}
	return set
}

func present(form url.Values, key string) bool {
	if _, ok := form[key]; ok {
		return true
	}
	for k := range form {
		if strings.HasPrefix(k, key+".") {
			return true
		}
	}
	return false
}

func decodeValue(form url.Values, key string, v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Pointer:
		elem := reflect.New(v.Type().Elem())
		if !decodeValue(form, key, elem.Elem()) {
			return false
		}
		v.Set(elem)
		return true
	case reflect.Struct:
		return decodeQuery(form, key, v)
	case reflect.Slice:
		n := 0
		for i := 1; ; i++ {
			elemKey := ""
			for _, k := range []string{key + "." + strconv.Itoa(i), key + ".member." + strconv.Itoa(i)} {
				if present(form, k) {
					elemKey = k
					break
				}
			}
			if elemKey == "" {
				break
			}
			elem := reflect.New(v.Type().Elem()).Elem()
			decodeValue(form, elemKey, elem)
			v.Set(reflect.Append(v, elem))
			n++
		}
		return n > 0
	}
	raw, ok := form[key]
	if !ok || len(raw) == 0 {
		return false
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(raw[0])
	case reflect.Bool:
		b, err := strconv.ParseBool(raw[0])
		if err != nil {
			return false
		}
		v.SetBool(b)
	case reflect.Int32, reflect.Int64, reflect.Int:
		n, err := strconv.ParseInt(raw[0], 10, 64)
		if err != nil {
			return false
		}
		v.SetInt(n)
	case reflect.Float64:
		f, err := strconv.ParseFloat(raw[0], 64)
		if err != nil {
			return false
		}
		v.SetFloat(f)
	default:
		return false
	}
	return true
}

var launchTemplateID = regexp.MustCompile(`<launchTemplateId>([^<]+)</launchTemplateId>`)

// Proxy starts a reverse proxy to target that records every AWS call through it,
// and returns its URL: point every AWS endpoint of a controller process at it.
func (r *Recorder) Proxy(t testing.TB, target string) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.ErrorHandler = func(w http.ResponseWriter, req *http.Request, err error) {
		// A client that gave up (a long poll cancelled at shutdown) is no error.
		// The test may be over by then, so this logs to the process, not to t.
		if !errors.Is(err, context.Canceled) {
			log.Printf("iampolicy proxy: %s %s: %v", req.Method, req.URL, err)
		}
		w.WriteHeader(http.StatusBadGateway)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		service, op, region, input, err := decodeWire(req, body)
		var reqs []Request
		if err == nil {
			// Resource state is read before the call: a delete removes what it is
			// authorized on.
			reqs, err = r.Requests(context.Background(), service, op, region, input)
		}
		r.mu.Lock()
		r.calls = append(r.calls, Call{Service: service, Operation: op, Region: region, Requests: reqs, Err: err})
		r.mu.Unlock()
		in, created := input.(*ec2.CreateLaunchTemplateInput)
		if !created {
			proxy.ServeHTTP(w, req)
			return
		}
		// What a template was created with is what launches from it are authorized
		// on: remember it with the id the response gives.
		rec := httptest.NewRecorder()
		proxy.ServeHTTP(rec, req)
		if m := launchTemplateID.FindSubmatch(rec.Body.Bytes()); rec.Code == http.StatusOK && m != nil {
			r.remember(in, &ec2.CreateLaunchTemplateOutput{LaunchTemplate: &ec2types.LaunchTemplate{LaunchTemplateId: aws.String(string(m[1]))}})
		}
		for k, vs := range rec.Header() {
			w.Header()[k] = vs
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}
