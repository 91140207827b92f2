package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/herdguard/herdguard/internal/datadir"
	"github.com/herdguard/herdguard/internal/deploy"
	"github.com/herdguard/herdguard/internal/storm"
)

func deployCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("devicesim deploy", deployModes, stderr)
	file := fs.String("f", "", "the storm file the shards run")
	var o deploy.Options
	fs.StringVar(&o.Image, "image", "", "devicesim's image, as pushed from make image's build/image/devicesim")
	fs.StringVar(&o.Name, "name", "devicesim", "the Job's name; the ConfigMap and the volume claim are NAME-storm and NAME-reports")
	fs.StringVar(&o.Storage, "storage", "10Gi", "the shared volume's size: every shard's events.csv and report")
	fs.StringVar(&o.StorageClass, "storage-class", "", "the shared volume's storage class (ReadWriteMany; empty: the cluster's default)")
	out := fs.String("out", "deploy", "directory for the manifests")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if *file == "" {
		return errors.New("deploy: name the storm file (-f)")
	}
	b, err := storm.Load(*file) // shipped as written, read within the cap every storm file has
	if err != nil {
		return fmt.Errorf("deploy: %w", err)
	}
	files, err := deploy.Render(b, o)
	if err != nil {
		return err
	}
	for _, f := range files {
		if err := datadir.WriteFileIn(*out, f.Name, f.Data); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "%s: kubectl apply -k %s\n", *out, *out)
	return nil
}
