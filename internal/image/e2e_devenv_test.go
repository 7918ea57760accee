package image_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/devbox-dev/devbox/internal/devboxtest"
	"github.com/devbox-dev/devbox/internal/image"
	"github.com/devbox-dev/devbox/internal/policy"
)

// TestE2EBadBase builds on a busybox root filesystem (no apt, no dpkg): the
// packages step fails first with what to do, and nothing is pushed.
func TestE2EBadBase(t *testing.T) {
	e := newE2E(t)
	t.Setenv("DOCKER_CONFIG", e.dockerConfig)
	bb := devboxtest.RequireBinary(t, "busybox")
	ctx := context.Background()

	// A one-layer image: /bin/busybox and /bin/sh pointing at it.
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(bb)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bin", "busybox"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("busybox", filepath.Join(dir, "bin", "sh")); err != nil {
		t.Fatal(err)
	}
	tarPath := filepath.Join(t.TempDir(), "rootfs.tar")
	if out, err := exec.CommandContext(ctx, "tar", "--numeric-owner", "-C", dir, "-cf", tarPath, ".").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
	layer, err := tarball.LayerFromFile(tarPath)
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.ConfigFile(empty.Image, &v1.ConfigFile{OS: "linux", Architecture: "amd64", RootFS: v1.RootFS{Type: "layers"}})
	if err != nil {
		t.Fatal(err)
	}
	img, err = mutate.AppendLayers(img, layer)
	if err != nil {
		t.Fatal(err)
	}
	tag := fmt.Sprintf("%d", time.Now().UnixNano())
	baseRef := e.registry + "/devbox/e2e-busybox:" + tag
	r, err := name.ParseReference(baseRef)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		t.Fatal(err)
	}
	d, _ := img.Digest()

	p, err := policy.Parse("busybox.jsonc", []byte(`{"image": {"base": "`+baseRef+`"}, "agent": {"claudeCode": "none"}, "network": {"allow": []}}`))
	if err != nil {
		t.Fatal(err)
	}
	lock := &policy.Lock{Version: policy.LockVersion, Devbox: "0.1.0-dev", SourceDateEpoch: 1767225600,
		Base: policy.LockedImage{Ref: baseRef, Digest: d.String()}, ClaudeCode: policy.LockedClaudeCode{Version: policy.ClaudeCodeNone}}
	push := e.registry + "/devbox/e2e-badbase:" + tag
	c, err := image.Connect(ctx, e.buildkit, image.TLS{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = image.Build(ctx, c, image.BuildOptions{
		Specs:         []image.Spec{{Policy: p, Lock: lock, Platform: "linux/amd64"}},
		DevboxVersion: "0.1.0-dev",
		Binaries:      map[string]string{"linux/amd64": e.devbox},
		Push:          []string{push},
		Progress:      "quiet",
	})
	var se *image.StepError
	if !errors.As(err, &se) || se.Step != "packages" || !strings.Contains(se.Error(), "is not Debian-based (no apt-get/dpkg)") {
		t.Fatalf("build on busybox: err = %v, want the packages step to fail saying the base is not Debian-based", err)
	}
	t.Logf("the error a user sees:\n%v", err)
	pr, _ := name.ParseReference(push)
	if _, err := remote.Head(pr, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err == nil {
		t.Errorf("%s exists after a failed build: half an image was pushed", push)
	}
}

// TestE2EBuildkitTLS starts a buildkitd that requires mutual TLS on a
// loopback tcp:// address: a client with a certificate from the daemon's CA
// connects; one with a certificate from another CA, or none, gets an error
// that says what is wrong.
func TestE2EBuildkitTLS(t *testing.T) {
	devboxtest.RequireRoot(t)
	dir := t.TempDir()
	ca, caKey := newCA(t, "devbox test CA")
	other, otherKey := newCA(t, "someone else's CA")
	writePEM(t, filepath.Join(dir, "ca.pem"), "CERTIFICATE", ca.Raw)
	issue(t, dir, "server", ca, caKey, true)
	issue(t, dir, "client", ca, caKey, false)
	issue(t, dir, "wrong", other, otherKey, false)

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := "tcp://" + l.Addr().String()
	l.Close()
	good := image.TLS{CACert: filepath.Join(dir, "ca.pem"), Cert: filepath.Join(dir, "client.pem"), Key: filepath.Join(dir, "client-key.pem")}
	startBuildkitd(t, addr, good, "--tlscacert", filepath.Join(dir, "ca.pem"),
		"--tlscert", filepath.Join(dir, "server.pem"), "--tlskey", filepath.Join(dir, "server-key.pem"))

	ctx := context.Background()
	c, err := image.Connect(ctx, addr, good)
	if err != nil {
		t.Fatalf("client certificate from the daemon's CA: %v", err)
	}
	ws, err := c.ListWorkers(ctx)
	c.Close()
	if err != nil || len(ws) == 0 {
		t.Fatalf("workers over mutual TLS: %v %v", ws, err)
	}

	for _, tt := range []struct {
		name string
		tls  image.TLS
		want string
	}{
		{"client certificate from another CA", image.TLS{CACert: good.CACert, Cert: filepath.Join(dir, "wrong.pem"), Key: filepath.Join(dir, "wrong-key.pem")}, "refused the TLS handshake"},
		{"no client certificate", image.TLS{CACert: good.CACert}, "refused the TLS handshake"},
		{"server not from the CA given", image.TLS{CACert: filepath.Join(dir, "wrong.pem"), Cert: good.Cert, Key: good.Key}, "refused the TLS handshake"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := image.Connect(ctx, addr, tt.tls)
			if err == nil {
				c.Close()
				t.Fatal("connected")
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "--tlscacert") {
				t.Errorf("error does not say what to check:\n%v", err)
			}
			t.Logf("%v", err)
		})
	}
}

func newCA(t *testing.T, cn string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return cert, key
}

// issue writes NAME.pem and NAME-key.pem: a server certificate for
// 127.0.0.1, or a client certificate.
func issue(t *testing.T, dir, name string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, server bool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, filepath.Join(dir, name+".pem"), "CERTIFICATE", der)
	writePEM(t, filepath.Join(dir, name+"-key.pem"), "EC PRIVATE KEY", kb)
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
