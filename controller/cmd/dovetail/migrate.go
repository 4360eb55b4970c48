package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/dovetail-sh/dovetail/controller/migrate"
)

func migrateCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var files fileList
	fs.Var(&files, "f", "a file of old Karpenter manifests (repeatable; - reads stdin)")
	var opts migrate.Options
	fs.StringVar(&opts.Role, "role", "", "the nodes' IAM role for every EC2NodeClass (v1 needs a role or an instance profile)")
	fs.StringVar(&opts.InstanceProfile, "instance-profile", "", "the nodes' instance profile for every EC2NodeClass, instead of --role")
	output := fs.String("o", "yaml", "output: yaml (manifests) or hcl (dovetail_node_pool and dovetail_ec2_node_class resources)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	switch {
	case len(files) == 0:
		fmt.Fprintln(stderr, "dovetail migrate: -f FILE is required (the Provisioners, AWSNodeTemplates or v1beta1 objects to convert)")
		return 2
	case opts.Role != "" && opts.InstanceProfile != "":
		fmt.Fprintln(stderr, "dovetail migrate: --role and --instance-profile are exclusive: an EC2NodeClass takes one or the other")
		return 2
	case *output != "yaml" && *output != "hcl":
		fmt.Fprintf(stderr, "dovetail migrate: -o %q is not yaml or hcl\n", *output)
		return 2
	}
	var docs []map[string]any
	for _, name := range files {
		var r io.Reader = os.Stdin
		if name != "-" {
			f, err := os.Open(name)
			if err != nil {
				fmt.Fprintf(stderr, "dovetail migrate: %v\n", err)
				return 1
			}
			defer f.Close()
			r = f
		}
		d, err := migrate.Decode(r)
		if err != nil {
			fmt.Fprintf(stderr, "dovetail migrate: %s: %v\n", name, err)
			return 1
		}
		docs = append(docs, d...)
	}
	res, err := migrate.Convert(docs, opts)
	if err != nil {
		fmt.Fprintf(stderr, "dovetail migrate:\n%v\n", err)
		return 1
	}
	write := migrate.WriteYAML
	if *output == "hcl" {
		write = migrate.WriteHCL
	}
	if err := write(stdout, res); err != nil {
		fmt.Fprintf(stderr, "dovetail migrate: %v\n", err)
		return 1
	}
	return 0
}
