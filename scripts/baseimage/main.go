// Command baseimage turns a root filesystem tarball into a one-layer OCI image
// and pushes it to a registry. scripts/services uses it to publish the
// debootstrap stand-ins of the official Debian, Node and Python images that
// devbox's tests build on, because the tests may not reach any public
// registry.
//
// Usage:
//
//	go run ./scripts/baseimage -rootfs rootfs.tar -ref 127.0.0.1:5055/devbox/base:trixie -created-by 'debootstrap …'
//	go run ./scripts/baseimage -rootfs amd64=rootfs.tar -rootfs arm64=rootfs-arm64.tar -ref …:trixie-multi
//
// With more than one -rootfs, each ARCH=PATH is one linux/ARCH image and the
// reference names their index, as a multi-platform official image does.
//
// Credentials come from the Docker config (DOCKER_CONFIG), as for docker push.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// created is the fixed creation time of the image, so the same rootfs tarball
// always gives the same digest (the date of the Debian snapshot the machines
// use).
var created = time.Date(2025, 5, 20, 0, 0, 0, 0, time.UTC)

// rootfsFlag collects -rootfs [ARCH=]PATH values.
type rootfsFlag []string

func (r *rootfsFlag) String() string     { return strings.Join(*r, ",") }
func (r *rootfsFlag) Set(v string) error { *r = append(*r, v); return nil }

func main() {
	var rootfs rootfsFlag
	flag.Var(&rootfs, "rootfs", "root filesystem tarball (made with tar --numeric-owner), as PATH or ARCH=PATH; repeat for an index")
	ref := flag.String("ref", "", "image reference to push, e.g. 127.0.0.1:5055/devbox/base:trixie")
	createdBy := flag.String("created-by", "debootstrap --variant=minbase bookworm", "the layer's history entry: how the rootfs was made")
	insecure := flag.Bool("insecure", false, "allow plain HTTP to the registry (127.0.0.1 is allowed anyway)")
	flag.Parse()
	if err := run(rootfs, *ref, *createdBy, *insecure); err != nil {
		fmt.Fprintf(os.Stderr, "baseimage: %v\n", err)
		os.Exit(1)
	}
}

func run(rootfs []string, ref, createdBy string, insecure bool) error {
	if len(rootfs) == 0 || ref == "" {
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
	var adds []mutate.IndexAddendum
	var img v1.Image
	for _, r := range rootfs {
		arch, path, ok := strings.Cut(r, "=")
		if !ok {
			arch, path = runtime.GOARCH, r
		}
		img, err = image(path, arch, createdBy)
		if err != nil {
			return err
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: arch}}})
	}
	var d v1.Hash
	if len(adds) == 1 {
		if err := remote.Write(tag, img, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
			return fmt.Errorf("push %s: %w", tag, err)
		}
		d, err = img.Digest()
	} else {
		idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...)
		if err := remote.WriteIndex(tag, idx, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
			return fmt.Errorf("push %s: %w", tag, err)
		}
		d, err = idx.Digest()
	}
	if err != nil {
		return err
	}
	fmt.Printf("%s@%s\n", tag.Context(), d)
	return nil
}

// image builds the one-layer image from the rootfs tarball; by names how it
// was made in the image's history.
func image(rootfs, arch, by string) (v1.Image, error) {
	if _, err := os.Stat(rootfs); err != nil {
		return nil, fmt.Errorf("-rootfs: %w", err)
	}
	layer, err := tarball.LayerFromFile(rootfs)
	if err != nil {
		return nil, fmt.Errorf("-rootfs %s: %w", rootfs, err)
	}
	if arch != runtime.GOARCH {
		by += " (" + arch + ")"
	}
	img, err := mutate.Append(empty.Image, mutate.Addendum{
		Layer:   layer,
		History: v1.History{Created: v1.Time{Time: created}, CreatedBy: by, Comment: "devbox test base"},
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
	cf.Architecture = arch
	if arch == "arm64" {
		cf.Variant = "v8"
	}
	cf.Created = v1.Time{Time: created}
	cf.Config.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	cf.Config.Cmd = []string{"/bin/bash"}
	return mutate.ConfigFile(img, cf)
}
