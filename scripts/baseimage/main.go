// Command baseimage turns a root filesystem tarball into a one-layer OCI image
// and pushes it to a registry. scripts/services uses it to publish the
// debootstrap bookworm base that devbox's tests build on, because the tests
// may not reach any public registry.
//
// Usage:
//
//	go run ./scripts/baseimage -rootfs rootfs.tar -ref 127.0.0.1:5055/devbox/base:bookworm
//
// Credentials come from the Docker config (DOCKER_CONFIG), as for docker push.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// created is the fixed creation time of the image, so the same rootfs tarball
// always gives the same digest (the date of the Debian snapshot the machines
// use).
var created = time.Date(2025, 5, 20, 0, 0, 0, 0, time.UTC)

func main() {
	rootfs := flag.String("rootfs", "", "root filesystem tarball (made with tar --numeric-owner)")
	ref := flag.String("ref", "", "image reference to push, e.g. 127.0.0.1:5055/devbox/base:bookworm")
	insecure := flag.Bool("insecure", false, "allow plain HTTP to the registry (127.0.0.1 is allowed anyway)")
	flag.Parse()
	if err := run(*rootfs, *ref, *insecure); err != nil {
		fmt.Fprintf(os.Stderr, "baseimage: %v\n", err)
		os.Exit(1)
	}
}

func run(rootfs, ref string, insecure bool) error {
	if rootfs == "" || ref == "" {
		return errors.New("both -rootfs and -ref are required")
	}
	var opts []name.Option
	if insecure {
		opts = append(opts, name.Insecure)
	}
	tag, err := name.ParseReference(ref, opts...)
	if err != nil {
		return fmt.Errorf("-ref %q: %w", ref, err)
	}
	img, err := image(rootfs)
	if err != nil {
		return err
	}
	if err := remote.Write(tag, img, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return fmt.Errorf("push %s: %w", tag, err)
	}
	d, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s@%s\n", tag.Context(), d)
	return nil
}

// image builds the one-layer image from the rootfs tarball.
func image(rootfs string) (v1.Image, error) {
	if _, err := os.Stat(rootfs); err != nil {
		return nil, fmt.Errorf("-rootfs: %w", err)
	}
	layer, err := tarball.LayerFromFile(rootfs)
	if err != nil {
		return nil, fmt.Errorf("-rootfs %s: %w", rootfs, err)
	}
	img, err := mutate.Append(empty.Image, mutate.Addendum{
		Layer:   layer,
		History: v1.History{Created: v1.Time{Time: created}, CreatedBy: "debootstrap --variant=minbase bookworm", Comment: "devbox test base"},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS = "linux"
	cf.Architecture = runtime.GOARCH
	cf.Created = v1.Time{Time: created}
	cf.Config.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	cf.Config.Cmd = []string{"/bin/bash"}
	return mutate.ConfigFile(img, cf)
}
