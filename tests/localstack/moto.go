package localstack

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// Moto is a running moto_server, the AWS emulator the tests use (moto 5.2, installed
// with these machines' Python). It serves every AWS API on one loopback endpoint.
type Moto struct {
	// Endpoint is the base URL every AWS client is pointed at.
	Endpoint string
	proc     *Process
}

// StartMoto runs moto_server on a free loopback port with managed IAM policies loaded
// and EC2 instance types validated, as DESIGN.md prescribes. Stop ends it.
func StartMoto(ctx context.Context, dir string) (*Moto, error) {
	path, err := exec.LookPath("moto_server")
	if err != nil {
		return nil, fmt.Errorf("moto_server is not on PATH; the AWS tests need moto 5.2 (installed with Python 3.11 on these machines): %w", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	s := &Stack{Dir: dir}
	cmd := exec.Command(path, "-H", "127.0.0.1", "-p", fmt.Sprint(port))
	cmd.Env = append(os.Environ(), "MOTO_IAM_LOAD_MANAGED_POLICIES=true", "MOTO_EC2_ENABLE_INSTANCE_TYPE_VALIDATION=true")
	proc, err := s.runCmd(filepath.Base(path), cmd)
	if err != nil {
		return nil, err
	}
	m := &Moto{Endpoint: fmt.Sprintf("http://127.0.0.1:%d", port), proc: proc}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-proc.Exited():
			return nil, fmt.Errorf("moto_server exited:\n%s", proc.Tail(2000))
		case <-ctx.Done():
			m.Stop()
			return nil, ctx.Err()
		default:
		}
		if resp, err := http.Get(m.Endpoint + "/moto-api/"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return m, nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	m.Stop()
	return nil, fmt.Errorf("moto_server did not answer within 30s:\n%s", proc.Tail(2000))
}

// Reset forgets every resource, so tests sharing a server start clean.
func (m *Moto) Reset() error {
	resp, err := http.Post(m.Endpoint+"/moto-api/reset", "application/json", nil)
	if err != nil {
		return fmt.Errorf("resetting moto, %w", err)
	}
	resp.Body.Close()
	return nil
}

// Stop ends the server.
func (m *Moto) Stop() { m.proc.Stop() }

// Tail returns the end of the server's output.
func (m *Moto) Tail(n int) string { return m.proc.Tail(n) }
