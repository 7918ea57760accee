package features

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/devbox-dev/devbox/internal/devboxtest"
)

// tarEntry is what the comparison looks at in a tarball entry: everything
// but the times (the CLI stamps the packaging time, devbox a fixed one).
type tarEntry struct {
	Name       string
	Type       byte
	Mode       int64
	UID, GID   int
	Uname      string
	Gname      string
	Linkname   string
	Data       string
	DataLength int
}

func tarEntries(t *testing.T, b []byte) []tarEntry {
	t.Helper()
	var out []tarEntry
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("reading tarball: %v", err)
		}
		d, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, tarEntry{h.Name, h.Typeflag, h.Mode, h.Uid, h.Gid, h.Uname, h.Gname, h.Linkname, string(d), len(d)})
	}
}

// writeFeatureDir lays files out as a feature folder src/ID/ for the CLI.
func writeFeatureDir(t *testing.T, dir string, files []File) string {
	t.Helper()
	src := filepath.Join(dir, "src", "devbox")
	for _, f := range files {
		p := filepath.Join(src, filepath.FromSlash(f.Name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, f.Data, f.Mode); err != nil {
			t.Fatal(err)
		}
		// WriteFile's mode goes through the umask; the CLI tars the bits on disk.
		if err := os.Chmod(p, f.Mode); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "src")
}

func devcontainerCLI(t *testing.T, env []string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, devboxtest.Env(t, "DEVBOX_DEVCONTAINER_CLI"), args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("devcontainer %s: %v\n%s%s", strings.Join(args, " "), err, stdout.Bytes(), stderr.Bytes())
	}
	return stdout.String()
}

// TestPackageMatchesCLI packages the same feature files with the pinned
// official CLI (`devcontainer features package`) and with devbox, and
// compares the tarballs entry by entry (names, order, types, modes,
// owners, bytes) and the collection file byte for byte.
func TestPackageMatchesCLI(t *testing.T) {
	devboxtest.RequireE2E(t)
	files, err := testSource(t).Files()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	devcontainerCLI(t, nil, "features", "package", writeFeatureDir(t, dir, files), "-o", out)

	cliTar, err := os.ReadFile(filepath.Join(out, TarballName("devbox")))
	if err != nil {
		t.Fatalf("the CLI wrote no %s: %v", TarballName("devbox"), err)
	}
	ours, err := Tar(files, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	want, got := tarEntries(t, cliTar), tarEntries(t, ours)
	if len(want) < len(files) {
		t.Fatalf("the CLI's tarball has %d entries for %d files", len(want), len(files))
	}
	if !reflect.DeepEqual(got, want) {
		for i := range max(len(got), len(want)) {
			var g, w tarEntry
			if i < len(got) {
				g = got[i]
			}
			if i < len(want) {
				w = want[i]
			}
			if !reflect.DeepEqual(g, w) {
				g.Data, w.Data = "", ""
				t.Errorf("entry %d: devbox %+v, CLI %+v", i, g, w)
			}
		}
	}
	if len(ours) != len(cliTar) {
		t.Errorf("tarball size: devbox %d bytes, CLI %d", len(ours), len(cliTar))
	}

	cliCol, err := os.ReadFile(filepath.Join(out, CollectionFile))
	if err != nil {
		t.Fatal(err)
	}
	m, err := ParseManifest("m", rootManifest(t))
	if err != nil {
		t.Fatal(err)
	}
	col, err := Collection(m)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(col, cliCol) {
		t.Errorf("collection differs:\ndevbox: %s\nCLI:    %s", col, cliCol)
	}
}

// registryManifest is what the comparison reads from a pushed manifest.
type registryManifest struct {
	SchemaVersion int
	MediaType     string
	Config        struct {
		MediaType string
		Size      int64
		Digest    string
	}
	Layers []struct {
		MediaType   string
		Size        int64
		Annotations map[string]string
	}
	Annotations map[string]string
}

func getManifest(t *testing.T, ref string, opts ...remote.Option) (registryManifest, []byte) {
	t.Helper()
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Get(r, opts...)
	if err != nil {
		t.Fatalf("%s: %v", ref, err)
	}
	var m registryManifest
	if err := json.Unmarshal(desc.Manifest, &m); err != nil {
		t.Fatalf("%s: %v", ref, err)
	}
	return m, desc.Manifest
}

func listTags(t *testing.T, repo string, opts ...remote.Option) []string {
	t.Helper()
	r, err := name.NewRepository(repo, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	tags, err := remote.List(r, opts...)
	if err != nil {
		t.Fatalf("listing %s: %v", repo, err)
	}
	slices.Sort(tags)
	return tags
}

// TestPublishMatchesCLI publishes the same feature files with
// `devcontainer features publish` and with devbox to the local registry
// (htpasswd auth) and compares the manifests: media types, config,
// layer title, annotations (the dev.containers.metadata value byte for
// byte), tags, and the collection artifact.
func TestPublishMatchesCLI(t *testing.T) {
	devboxtest.RequireE2E(t)
	reg := devboxtest.Env(t, "DEVBOX_REGISTRY")
	user := devboxtest.Env(t, "DEVBOX_REGISTRY_USER")
	pass := devboxtest.Env(t, "DEVBOX_REGISTRY_PASSWORD")
	_, port, ok := strings.Cut(reg, ":")
	if !ok {
		t.Fatalf("DEVBOX_REGISTRY %q has no port", reg)
	}
	// The CLI speaks plain HTTP only to a registry named "localhost"; both
	// names reach the same registry. Credentials for it go through the
	// CLI's DEVCONTAINERS_OCI_AUTH; devbox reads DOCKER_CONFIG.
	cliReg := "localhost:" + port
	run := time.Now().UnixNano()
	cliNS := fmt.Sprintf("feature-cmp/cli-%d", run)
	ourNS := fmt.Sprintf("feature-cmp/devbox-%d", run)

	files, err := testSource(t).Files()
	if err != nil {
		t.Fatal(err)
	}
	src := writeFeatureDir(t, t.TempDir(), files)
	outJSON := devcontainerCLI(t, []string{"DEVCONTAINERS_OCI_AUTH=" + cliReg + "|" + user + "|" + pass},
		"features", "publish", src, "--registry", cliReg, "--namespace", cliNS)
	var cliOut map[string]struct {
		PublishedTags []string
		Digest        string
		Version       string
	}
	if err := json.Unmarshal([]byte(outJSON), &cliOut); err != nil {
		t.Fatalf("CLI output %q: %v", outJSON, err)
	}

	m, err := ParseManifest("m", rootManifest(t))
	if err != nil {
		t.Fatal(err)
	}
	tarball, err := Tar(files, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	col, err := Collection(m)
	if err != nil {
		t.Fatal(err)
	}
	auth := remote.WithAuthFromKeychain(authn.DefaultKeychain)
	p, err := Publish(context.Background(), reg+"/"+ourNS, m, tarball, col, auth)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("CLI published %s@%s, devbox %s", cliNS, cliOut["devbox"].Digest, p.Feature)

	wantTags, _ := Tags(m.Version)
	slices.Sort(wantTags)
	cliTags := slices.Sorted(slices.Values(cliOut["devbox"].PublishedTags))
	ourTags := slices.Sorted(slices.Values(p.Tags))
	if !slices.Equal(cliTags, wantTags) || !slices.Equal(ourTags, cliTags) {
		t.Errorf("published tags: devbox %v, CLI %v, want %v", ourTags, cliTags, wantTags)
	}
	if got, want := listTags(t, reg+"/"+ourNS+"/devbox", auth), listTags(t, reg+"/"+cliNS+"/devbox", auth); !slices.Equal(got, want) {
		t.Errorf("registry tags: devbox %v, CLI %v", got, want)
	}

	cliM, cliRaw := getManifest(t, reg+"/"+cliNS+"/devbox:"+m.Version, auth)
	ourM, ourRaw := getManifest(t, reg+"/"+ourNS+"/devbox:"+m.Version, auth)
	if ourM.Annotations[MetadataAnnotation] == "" || ourM.Annotations[MetadataAnnotation] != cliM.Annotations[MetadataAnnotation] {
		t.Errorf("%s: devbox %q, CLI %q", MetadataAnnotation, ourM.Annotations[MetadataAnnotation], cliM.Annotations[MetadataAnnotation])
	}
	if len(cliM.Layers) != 1 || cliM.Layers[0].MediaType != LayerMediaType || cliM.Layers[0].Annotations[TitleAnnotation] != TarballName("devbox") {
		t.Errorf("the CLI's manifest is not the shape devbox expects: %s", cliRaw)
	}
	// Sizes match too: the tarballs differ only in their timestamps.
	if !reflect.DeepEqual(ourM, cliM) {
		t.Errorf("feature manifests differ beyond the layer digest:\ndevbox: %s\nCLI:    %s", ourRaw, cliRaw)
	}

	cliC, cliCRaw := getManifest(t, reg+"/"+cliNS+":latest", auth)
	ourC, ourCRaw := getManifest(t, reg+"/"+ourNS+":latest", auth)
	if !bytes.Equal(cliCRaw, ourCRaw) {
		// The collection file is byte-identical, so the manifests should be.
		t.Errorf("collection manifests differ:\ndevbox: %s\nCLI:    %s", ourCRaw, cliCRaw)
	}
	if len(ourC.Layers) != 1 || ourC.Layers[0].MediaType != CollectionMediaType || ourC.Layers[0].Annotations[TitleAnnotation] != CollectionFile || ourC.Config.MediaType != cliC.Config.MediaType {
		t.Errorf("collection manifest %s", ourCRaw)
	}
}

// featureSource writes a --source tree for `devbox feature` with the root
// manifest at version.
func featureSource(t *testing.T, version string) string {
	t.Helper()
	dir := t.TempDir()
	m := bytes.Replace(rootManifest(t), []byte(`"version": "0.1.0"`), []byte(`"version": "`+version+`"`), 1)
	if !bytes.Contains(m, []byte(`"version": "`+version+`"`)) {
		t.Fatal(`the root manifest has no "version": "0.1.0" line to replace`)
	}
	install, err := os.ReadFile("src/devbox/install.sh")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "features", "src", "devbox"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ManifestFile), m, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "features", "src", "devbox", "install.sh"), install, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestPublishCommand runs `devbox feature publish` against the local
// registry with its htpasswd credentials coming only from DOCKER_CONFIG:
// the digest it prints is the one the registry serves for every tag, and
// publishing 1.2.2 after 1.2.3 adds 1.2.2 but leaves 1, 1.2 and latest on
// 1.2.3.
func TestPublishCommand(t *testing.T) {
	devboxtest.RequireE2E(t)
	reg := devboxtest.Env(t, "DEVBOX_REGISTRY")
	devboxtest.Env(t, "DOCKER_CONFIG")
	devbox := devboxtest.BuildDevbox(t)
	ns := fmt.Sprintf("%s/feature-cli/t%d", reg, time.Now().UnixNano())

	publish := func(version string) (digest string, out string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, devbox, "feature", "publish", "--source", featureSource(t, version), ns)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("devbox feature publish %s: %v\n%s%s", version, err, stdout.Bytes(), stderr.Bytes())
		}
		lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
		last := lines[len(lines)-1]
		ref, err := name.NewDigest(last)
		if err != nil {
			t.Fatalf("last line %q is not a digest reference: %v\n%s", last, err, stdout.Bytes())
		}
		if ref.Context().String() != ns+"/devbox" {
			t.Errorf("printed %s, want a digest in %s/devbox", ref, ns)
		}
		t.Logf("publish %s:\n%s", version, stdout.Bytes())
		return ref.DigestStr(), stdout.String()
	}
	at := func(tag string) string {
		t.Helper()
		ref, err := name.NewTag(ns+"/devbox:"+tag, name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		d, err := remote.Head(ref, remote.WithAuthFromKeychain(authn.DefaultKeychain))
		if err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		return d.Digest.String()
	}

	d123, out := publish("1.2.3")
	if !strings.Contains(out, "tags 1, 1.2, 1.2.3, latest\n") {
		t.Errorf("1.2.3 output does not list the four tags:\n%s", out)
	}
	for _, tag := range []string{"1", "1.2", "1.2.3", "latest"} {
		if got := at(tag); got != d123 {
			t.Errorf("tag %s at %s, printed %s", tag, got, d123)
		}
	}

	d122, out := publish("1.2.2")
	if d122 == d123 {
		t.Fatalf("1.2.2 and 1.2.3 have the same digest %s", d122)
	}
	for _, kept := range []string{"1", "1.2", "latest"} {
		if !strings.Contains(out, "kept tag "+kept+" (at 1.2.3)") {
			t.Errorf("1.2.2 output does not report keeping %s:\n%s", kept, out)
		}
		if got := at(kept); got != d123 {
			t.Errorf("tag %s moved backwards to %s (1.2.3 is %s, 1.2.2 is %s)", kept, got, d123, d122)
		}
	}
	if got := at("1.2.2"); got != d122 {
		t.Errorf("tag 1.2.2 at %s, printed %s", got, d122)
	}
}
