package testenv

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// EC2Call is one EC2 Query API request as it went over the wire. Calls of the
// JSON protocols (SQS, SSM) are recorded by action only.
type EC2Call struct {
	Action string
	// Tags are the request's tags by resource type ("instance", "fleet", ...).
	Tags        map[string]map[string]string
	ClientToken string
	// At is when the request reached the recorder.
	At time.Time
	// LaunchTemplateName is the template a CreateLaunchTemplate makes.
	LaunchTemplateName string
	// Filters are the request's filter values by name.
	Filters map[string][]string
	// Service is the signing name of the API called ("ec2", "sqs", "iam", ...).
	Service string
	// Failed says the service answered with an error.
	Failed bool
}

// AWSRecorder is a reverse proxy in front of the AWS emulator that records every
// AWS request: for a controller running as its own process, whose SDK the test
// cannot hook, what it asked EC2 to do.
type AWSRecorder struct {
	URL   string
	mu    sync.Mutex
	calls []EC2Call
	// afterResponse, when set, runs once EC2 has answered a call and before the
	// caller hears the answer: a test kills the controller there to crash it
	// between a call taking effect and its result being recorded.
	afterResponse func(EC2Call)
}

type recordedCall struct{}

// inFlight is a recorded call on its way, with where it is kept.
type inFlight struct {
	call  EC2Call
	index int
}

// AfterResponse sets (nil clears) what runs between EC2's answer to each call and
// the caller receiving it.
func (r *AWSRecorder) AfterResponse(f func(EC2Call)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.afterResponse = f
}

// StartAWSRecorder proxies to target until the test ends.
func StartAWSRecorder(t testing.TB, target string) *AWSRecorder {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	r := &AWSRecorder{}
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.ErrorHandler = quietOnCancel
	proxy.ModifyResponse = func(resp *http.Response) error {
		sent, ok := resp.Request.Context().Value(recordedCall{}).(inFlight)
		r.mu.Lock()
		after := r.afterResponse
		if ok && resp.StatusCode != http.StatusOK {
			r.calls[sent.index].Failed = true
		}
		r.mu.Unlock()
		if ok && after != nil && resp.StatusCode == http.StatusOK {
			after(sent.call)
		}
		return nil
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		service := signingName(req.Header.Get("Authorization"))
		if strings.HasPrefix(req.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
			if form, err := url.ParseQuery(string(body)); err == nil && form.Get("Action") != "" {
				req = req.WithContext(context.WithValue(req.Context(), recordedCall{}, r.record(form, service)))
			}
		} else if target := req.Header.Get("X-Amz-Target"); target != "" {
			// The JSON protocols (SQS, SSM) name the call in a header, as
			// "AmazonSQS.ReceiveMessage": counted, not otherwise read.
			req = req.WithContext(context.WithValue(req.Context(), recordedCall{},
				r.record(url.Values{"Action": {target[strings.LastIndex(target, ".")+1:]}}, service)))
		}
		proxy.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

// signingName is the service a SigV4 Authorization header is scoped to: the
// fourth part of "Credential=KEY/DATE/REGION/SERVICE/aws4_request".
func signingName(authorization string) string {
	_, scope, ok := strings.Cut(authorization, "Credential=")
	if !ok {
		return ""
	}
	parts := strings.Split(strings.SplitN(scope, ",", 2)[0], "/")
	if len(parts) < 5 {
		return ""
	}
	return parts[3]
}

func (r *AWSRecorder) record(form url.Values, service string) inFlight {
	call := EC2Call{Action: form.Get("Action"), ClientToken: form.Get("ClientToken"), Tags: map[string]map[string]string{}, At: time.Now(),
		LaunchTemplateName: form.Get("LaunchTemplateName"), Filters: map[string][]string{}, Service: service}
	for i := 1; form.Get("Filter."+strconv.Itoa(i)+".Name") != ""; i++ {
		prefix := "Filter." + strconv.Itoa(i) + "."
		for j := 1; form.Get(prefix+"Value."+strconv.Itoa(j)) != ""; j++ {
			call.Filters[form.Get(prefix+"Name")] = append(call.Filters[form.Get(prefix+"Name")], form.Get(prefix+"Value."+strconv.Itoa(j)))
		}
	}
	for i := 1; ; i++ {
		prefix := "TagSpecification." + strconv.Itoa(i) + "."
		kind := form.Get(prefix + "ResourceType")
		if kind == "" {
			break
		}
		tags := map[string]string{}
		for j := 1; ; j++ {
			key := form.Get(prefix + "Tag." + strconv.Itoa(j) + ".Key")
			if key == "" {
				break
			}
			tags[key] = form.Get(prefix + "Tag." + strconv.Itoa(j) + ".Value")
		}
		call.Tags[kind] = tags
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, call)
	return inFlight{call: call, index: len(r.calls) - 1}
}

// Calls are the EC2 requests so far with that action.
func (r *AWSRecorder) Calls(action string) []EC2Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []EC2Call
	for _, c := range r.calls {
		if c.Action == action {
			out = append(out, c)
		}
	}
	return out
}

// CountsSince are the EC2 requests per action from the n-th call on (0: all).
func (r *AWSRecorder) CountsSince(n int) map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for _, c := range r.calls[min(n, len(r.calls)):] {
		out[c.Action]++
	}
	return out
}

// CallsSince are the requests with that action from the n-th call on.
func (r *AWSRecorder) CallsSince(n int, action string) []EC2Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []EC2Call
	for _, c := range r.calls[min(n, len(r.calls)):] {
		if c.Action == action {
			out = append(out, c)
		}
	}
	return out
}

// CountsBetween are the requests per action made from..until, of the service
// ("" for all).
func (r *AWSRecorder) CountsBetween(service string, from, until time.Time) map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for _, c := range r.calls {
		if !c.At.Before(from) && c.At.Before(until) && (service == "" || c.Service == service) {
			out[c.Action]++
		}
	}
	return out
}

// Len is how many EC2 requests were made so far.
func (r *AWSRecorder) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}
