package pricing_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	awspricing "github.com/aws/aws-sdk-go-v2/service/pricing"
	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/dovetail-sh/dovetail/controller/cloudprovider/aws/pricing"
	"github.com/dovetail-sh/dovetail/tests/testenv"
)

const product = `{"product":{"productFamily":"Compute Instance","attributes":{"instanceType":"m7g.large","regionCode":"eu-west-3","operatingSystem":"Linux"}},
"terms":{"OnDemand":{"ABC.JRTCKXETXF":{"priceDimensions":{"ABC.JRTCKXETXF.6YS6EN2CT7":{"unit":"Hrs","pricePerUnit":{"USD":"0.0952000000"}}}}}}}`

func TestParseProduct(t *testing.T) {
	it, price, ok := pricing.ParseProduct(product)
	if !ok || it != "m7g.large" || price != 0.0952 {
		t.Errorf("ParseProduct = %q %v %v", it, price, ok)
	}
	for _, bad := range []string{`not json`, `{"product":{"attributes":{}}}`, strings.Replace(product, "0.0952000000", "0.0000000000", 1)} {
		if _, _, ok := pricing.ParseProduct(bad); ok {
			t.Errorf("ParseProduct(%.40q) accepted", bad)
		}
	}
}

// countingProducts records GetProducts calls; it stands for a Pricing API that must
// not be called at all.
type countingProducts struct{ calls int }

func (c *countingProducts) GetProducts(context.Context, *awspricing.GetProductsInput, ...func(*awspricing.Options)) (*awspricing.GetProductsOutput, error) {
	c.calls++
	return &awspricing.GetProductsOutput{}, nil
}

// logLines collects what a logger writes.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, args)
	}, funcr.Options{})
}

func (l *logLines) matching(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}

func TestIsolatedVPCNeverCallsThePricingAPI(t *testing.T) {
	products := &countingProducts{}
	var logs logLines
	p := pricing.NewProvider(nil, products, "us-east-1", true, clocktesting.NewFakeClock(time.Now()), logs.logger())
	for i := 0; i < 3; i++ {
		if err := p.UpdateOnDemand(context.Background()); err != nil {
			t.Fatalf("isolated refresh %d: %v", i, err)
		}
	}
	if products.calls != 0 {
		t.Errorf("the Pricing API was called %d times in an isolated VPC", products.calls)
	}
	if n := logs.matching("isolated VPC"); n != 1 {
		t.Errorf("the isolated-VPC notice was logged %d times, want once", n)
	}
	if price, ok := p.OnDemand("m5.large"); !ok || price != 0.096 {
		t.Errorf("m5.large = %v %v; want the built-in 0.096", price, ok)
	}
}

// The emulator has no Pricing API: a refresh fails, the table stays, and the log says
// so once rather than on every refresh.
func TestUnreachablePricingAPIKeepsTheTable(t *testing.T) {
	if testing.Short() {
		t.Skip("starts moto_server")
	}
	clients := testenv.AWSClients(t, testenv.StartMoto(t), "us-west-2")
	var logs logLines
	p := pricing.NewProvider(clients.EC2, clients.Pricing, "us-west-2", false, clocktesting.NewFakeClock(time.Now()), logs.logger())
	for i := 0; i < 3; i++ {
		if err := p.UpdateOnDemand(context.Background()); err == nil {
			t.Fatal("a refresh from an API that does not answer succeeded")
		}
	}
	if n := logs.matching("Pricing API did not answer"); n != 1 {
		t.Errorf("the failure was logged %d times, want once", n)
	}
	if price, ok := p.OnDemand("m5.large"); !ok || price != 0.096 {
		t.Errorf("m5.large = %v %v; want the built-in 0.096 kept", price, ok)
	}
	before := p.Version()
	if err := p.UpdateSpot(context.Background()); err != nil {
		t.Fatal(err)
	}
	if price, ok := p.Spot("m5.large", "us-west-2a"); !ok || price <= 0 || p.Version() == before {
		t.Errorf("spot m5.large in us-west-2a = %v %v after reading the history", price, ok)
	}
}
