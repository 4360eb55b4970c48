package settings

import (
	"flag"
	"fmt"
	"io"
	"path"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// Default are the settings of a controller given no flags and no environment.
func Default() *Options {
	o, _, _ := Parse(noEnvironment, nil)
	return o
}

func noEnvironment(string) (string, bool) { return "", false }

// Parse reads the settings as the controller's process does: each flag's default,
// then the environment variable its usage names (from lookup), then args. It
// returns the flags too, so that a prediction can set one by name over what a
// Deployment said. Values are parsed, not validated: a prediction needs the
// settings that change decisions, and reports the rest as the controller would
// only when it starts.
func Parse(lookup func(string) (string, bool), args []string) (*Options, *flag.FlagSet, error) {
	o := &Options{}
	fs := flag.NewFlagSet("dovetail-controller", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.AddFlagsFrom(fs, lookup)
	if len(o.envErrors) > 0 {
		return o, fs, fmt.Errorf("%s", strings.Join(o.envErrors, "; "))
	}
	if err := fs.Parse(args); err != nil {
		return o, fs, err
	}
	return o, fs, nil
}

// ControllerContainer finds the container of a Deployment that runs the Dovetail
// controller: the one whose image is a dovetail-controller, or, in a Deployment
// labelled app.kubernetes.io/name=dovetail (as the chart and the provider label
// it), the chart's container "controller" or the only one.
func ControllerContainer(d *appsv1.Deployment) (*corev1.Container, bool) {
	containers := d.Spec.Template.Spec.Containers
	for i := range containers {
		if image, _, _ := strings.Cut(path.Base(containers[i].Image), "@"); strings.Split(image, ":")[0] == "dovetail-controller" {
			return &containers[i], true
		}
	}
	if d.Labels["app.kubernetes.io/name"] != "dovetail" {
		return nil, false
	}
	for i := range containers {
		if containers[i].Name == "controller" || len(containers) == 1 {
			return &containers[i], true
		}
	}
	return nil, false
}

// FromContainer reads the settings a controller container runs with: its env, then
// its command's arguments (a container's args follow its command). Variables taken
// from the downward API, ConfigMaps or Secrets are not in a manifest; each one
// that names a setting is reported in notes and keeps its default.
func FromContainer(c *corev1.Container) (o *Options, fs *flag.FlagSet, notes []string, err error) {
	env := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil {
			env[e.Name] = "\x00"
			continue
		}
		env[e.Name] = e.Value
	}
	for _, from := range c.EnvFrom {
		name := "a ConfigMap"
		if from.ConfigMapRef != nil {
			name = "ConfigMap " + from.ConfigMapRef.Name
		} else if from.SecretRef != nil {
			name = "Secret " + from.SecretRef.Name
		}
		notes = append(notes, fmt.Sprintf("container %s takes environment variables from %s, which the snapshot does not hold; settings set there keep their defaults", c.Name, name))
	}
	lookup := func(key string) (string, bool) {
		v, ok := env[key]
		if v == "\x00" {
			if key != "POD_NAMESPACE" && key != "MEMORY_LIMIT" {
				notes = append(notes, fmt.Sprintf("container %s sets %s from a reference the snapshot does not resolve; it keeps its default", c.Name, key))
			}
			return "", false
		}
		return v, ok
	}
	var args []string
	if len(c.Command) > 1 {
		args = append(args, c.Command[1:]...)
	}
	args = append(args, c.Args...)
	// A newer controller's flag, or a command wrapped in a shell, is not this
	// build's to read: it is named, and the settings that are read still hold.
	_, known, _ := Parse(noEnvironment, nil)
	var kept []string
	for i := 0; i < len(args); i++ {
		name, _, hasValue := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		f := known.Lookup(name)
		if !strings.HasPrefix(args[i], "-") || f == nil {
			notes = append(notes, fmt.Sprintf("container %s: argument %q is not a setting this dovetail reads; it is ignored", c.Name, args[i]))
			continue
		}
		kept = append(kept, args[i])
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); !hasValue && !(ok && b.IsBoolFlag()) && i+1 < len(args) {
			kept = append(kept, args[i+1])
			i++
		}
	}
	o, fs, err = Parse(lookup, kept)
	if err != nil {
		return o, fs, notes, fmt.Errorf("container %s: %w", c.Name, err)
	}
	return o, fs, notes, nil
}
