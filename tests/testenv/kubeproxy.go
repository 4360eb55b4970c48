package testenv

import (
	"bytes"
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"

	"k8s.io/client-go/rest"
)

// KubeRequest is one write a client sent the API server through a KubeProxy.
type KubeRequest struct {
	Method, Path string
	Body         []byte
	// Status is the API server's answer.
	Status int
}

// KubeProxy is a plain-HTTP reverse proxy on loopback in front of the API server,
// authenticating as cfg's user and passing the client's impersonation on. A test
// points a controller process at it to act between the API server applying a
// write and the controller hearing of it (a crash in that window).
type KubeProxy struct {
	URL           string
	mu            sync.Mutex
	afterResponse func(KubeRequest)
}

// StartKubeProxy proxies to cfg's API server until the test ends.
func StartKubeProxy(t testing.TB, cfg *rest.Config) *KubeProxy {
	t.Helper()
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	target, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	p := &KubeProxy{}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = transport
	// Watches stream: every event is passed on as it comes.
	proxy.FlushInterval = -1
	proxy.ErrorHandler = quietOnCancel
	proxy.ModifyResponse = func(resp *http.Response) error {
		req, ok := resp.Request.Context().Value(kubeRequestKey{}).(KubeRequest)
		p.mu.Lock()
		after := p.afterResponse
		p.mu.Unlock()
		if ok && after != nil {
			req.Status = resp.StatusCode
			after(req)
		}
		return nil
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			r = r.WithContext(contextWith(r, KubeRequest{Method: r.Method, Path: r.URL.Path, Body: body}))
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

type kubeRequestKey struct{}

// AfterResponse sets (nil clears) what runs between the API server's answer to
// each write and the client receiving it.
func (p *KubeProxy) AfterResponse(f func(KubeRequest)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.afterResponse = f
}

func contextWith(r *http.Request, req KubeRequest) context.Context {
	return context.WithValue(r.Context(), kubeRequestKey{}, req)
}

// quietOnCancel answers 502 for a request the proxy could not pass on, without the
// log line the default handler writes: the client going away (a killed
// controller) is what these proxies are for.
func quietOnCancel(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() == nil {
		log.Printf("proxy error: %v", err)
	}
	w.WriteHeader(http.StatusBadGateway)
}
