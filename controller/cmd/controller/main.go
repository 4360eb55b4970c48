// Command dovetail-controller is the in-cluster autoscaler: it provisions nodes for
// pending pods and manages their lifecycle.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime/debug"

	uberzap "go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/dovetail-sh/dovetail/controller/operator"
	"github.com/dovetail-sh/dovetail/controller/version"
)

// managedGCPercent is the GC target under a memory limit (the runtime's default
// is 100).
const managedGCPercent = 50

func main() {
	var opts operator.Options
	opts.AddFlags(flag.CommandLine)
	printVersion := flag.Bool("version", false, "print the version and exit")
	flag.Parse()
	if *printVersion {
		fmt.Println(version.Get())
		return
	}
	level := map[string]zapcore.Level{"debug": zapcore.DebugLevel, "info": zapcore.InfoLevel, "error": zapcore.ErrorLevel}[opts.LogLevel]
	// Bad paths are reported by Run's validation, before anything is logged.
	out, _ := operator.LogStreams(opts.LogOutputPaths)
	errOut, _ := operator.LogStreams(opts.LogErrorOutputPaths)
	ctrl.SetLogger(zap.New(zap.UseDevMode(false), zap.Level(level), zap.JSONEncoder(), zap.WriteTo(zapcore.NewMultiWriteSyncer(out...)),
		zap.RawZapOpts(uberzap.ErrorOutput(zapcore.NewMultiWriteSyncer(errOut...)))))
	// An explicit GOMEMLIMIT or GOGC is the runtime's own and wins over these.
	if opts.MemoryLimit > 0 {
		if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
			debug.SetMemoryLimit(opts.MemoryLimit / 10 * 9)
		}
		// Collecting when the heap has grown by half its live size rather than all
		// of it trades GC CPU (about a tenth of the process's in a 15,000-pod
		// backlog) for headroom under the limit: the process stays near 1.5
		// times its live heap, mostly the long-lived informer cache, not 2.
		if _, set := os.LookupEnv("GOGC"); !set {
			debug.SetGCPercent(managedGCPercent)
		}
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		fmt.Fprintf(os.Stderr, "dovetail-controller: finding the cluster (set --kubeconfig or KUBECONFIG, or run in a pod): %v\n", err)
		os.Exit(1)
	}
	if err := operator.Run(ctrl.SetupSignalHandler(), opts, cfg); err != nil {
		fmt.Fprintf(os.Stderr, "dovetail-controller: %v\n", err)
		os.Exit(1)
	}
}
