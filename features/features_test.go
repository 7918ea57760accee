package features

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/devbox-dev/devbox/internal/image"
	"github.com/devbox-dev/devbox/internal/policy"
)

func rootManifest(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("../devcontainer-feature.json")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRootManifest: the shipped manifest passes the schema rules, the
// feature test layout sees the same file, and its fence properties are
// image.FenceProperties' own.
func TestRootManifest(t *testing.T) {
	b := rootManifest(t)
	m, err := ParseManifest("devcontainer-feature.json", b)
	if err != nil {
		t.Fatal(err)
	}
	if m.ID != "devbox" {
		t.Errorf("id %q", m.ID)
	}
	link, err := os.ReadFile("src/devbox/devcontainer-feature.json")
	if err != nil || !bytes.Equal(link, b) {
		t.Errorf("features/src/devbox/devcontainer-feature.json is not the root manifest (err=%v)", err)
	}
	fence := image.FenceProperties(&policy.Policy{Image: policy.Image{User: policy.User{Name: "dev"}}})
	for _, k := range []string{"capAdd", "securityOpt", "init", "entrypoint"} {
		var got any
		json.Unmarshal(m.Fields[k], &got)
		want, _ := json.Marshal(fence[k])
		var w any
		json.Unmarshal(want, &w)
		if !reflect.DeepEqual(got, w) {
			t.Errorf("%s = %v, FenceProperties says %v", k, got, w)
		}
	}
}

func TestParseManifestRejects(t *testing.T) {
	tests := []struct{ name, json, want string }{
		{"unknown key", `{"id":"x","version":"1.0.0","remoteUser":"dev"}`, `unknown key "remoteUser"`},
		{"missing version", `{"id":"x"}`, `missing required key "version"`},
		{"bad semver", `{"id":"x","version":"1.0"}`, `not a semantic version`},
		{"bad id", `{"id":"X Y","version":"1.0.0"}`, `id "X Y"`},
		{"wrong type", `{"id":"x","version":"1.0.0","capAdd":"NET_ADMIN"}`, `capAdd is string, want array`},
		{"option no default", `{"id":"x","version":"1.0.0","options":{"a":{"type":"string"}}}`, `options.a: missing default`},
		{"option bad type", `{"id":"x","version":"1.0.0","options":{"a":{"type":"number","default":1}}}`, `want "boolean" or "string"`},
		{"bool default string", `{"id":"x","version":"1.0.0","options":{"a":{"type":"boolean","default":"true"}}}`, `default is string, want boolean`},
		{"enum on boolean", `{"id":"x","version":"1.0.0","options":{"a":{"type":"boolean","default":true,"enum":["true"]}}}`, `unknown key "enum"`},
		{"default not in enum", `{"id":"x","version":"1.0.0","options":{"a":{"type":"string","default":"c","enum":["a","b"]}}}`, `not in its enum`},
		{"option unknown key", `{"id":"x","version":"1.0.0","options":{"a":{"type":"string","default":"","pattern":"x"}}}`, `unknown key "pattern"`},
	}
	for _, tt := range tests {
		_, err := ParseManifest("f.json", []byte(tt.json))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %q", tt.name, err, tt.want)
		}
	}
}

func testSource(t *testing.T) Source {
	install, err := os.ReadFile("src/devbox/install.sh")
	if err != nil {
		t.Fatal(err)
	}
	return Source{Manifest: rootManifest(t), Install: install, Binaries: map[string][]byte{"amd64": []byte("\x7fELF amd64"), "arm64": []byte("\x7fELF arm64")}}
}

// TestTarLayout: the package holds exactly the feature's files, in the
// CLI's layout ("./" entries, 0:0), with checksums install.sh verifies.
func TestTarLayout(t *testing.T) {
	files, err := testSource(t).Files()
	if err != nil {
		t.Fatal(err)
	}
	b, err := Tar(files, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	contents := map[string]string{}
	for _, e := range tarEntries(t, b) {
		if e.UID != 0 || e.GID != 0 {
			t.Errorf("%s owned by %d:%d", e.Name, e.UID, e.GID)
		}
		names = append(names, e.Name)
		contents[e.Name] = e.Data
	}
	// Byte order within each directory, as the CLI writes it.
	want := []string{"./", "./devcontainer-feature.json", "./install.sh", "./payload/", "./payload/SHA256SUMS", "./payload/devbox-linux-amd64", "./payload/devbox-linux-arm64"}
	if !slices.Equal(names, want) {
		t.Errorf("entries %q, want %q", names, want)
	}
	if !strings.Contains(contents["./payload/SHA256SUMS"], "  devbox-linux-amd64\n") {
		t.Errorf("SHA256SUMS: %q", contents["./payload/SHA256SUMS"])
	}
	again, _ := Tar(files, time.Unix(0, 0))
	if !bytes.Equal(b, again) {
		t.Errorf("packaging is not reproducible")
	}
}

// TestPublish pushes to ggcr's in-memory registry and checks the artifact
// and the tag rule: publishing an older version never moves 1 or latest.
func TestPublish(t *testing.T) {
	srv := httptest.NewServer(ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	ns := strings.TrimPrefix(srv.URL, "http://") + "/team/features"
	ctx := context.Background()

	publish := func(version string) *Published {
		t.Helper()
		src := testSource(t)
		src.Manifest = bytes.Replace(src.Manifest, []byte(`"version": "0.1.0"`), []byte(`"version": "`+version+`"`), 1)
		m, err := ParseManifest("m", src.Manifest)
		if err != nil || m.Version != version {
			t.Fatalf("manifest %v version %q", err, m.Version)
		}
		files, _ := src.Files()
		tb, _ := Tar(files, time.Unix(0, 0))
		col, _ := Collection(m)
		p, err := Publish(ctx, ns, m, tb, col)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := publish("1.2.3")
	t.Logf("published %s (collection %s)", p.Feature, p.Collection)
	if !slices.Equal(p.Tags, []string{"1", "1.2", "1.2.3", "latest"}) {
		t.Errorf("tags %v", p.Tags)
	}
	desc, err := remote.Get(mustRef(t, ns+"/devbox:latest"))
	if err != nil {
		t.Fatal(err)
	}
	var mf struct {
		Config struct{ MediaType string }
		Layers []struct {
			MediaType   string
			Annotations map[string]string
		}
		Annotations map[string]string
	}
	json.Unmarshal(desc.Manifest, &mf)
	if mf.Config.MediaType != ConfigMediaType || len(mf.Layers) != 1 || mf.Layers[0].MediaType != LayerMediaType ||
		mf.Layers[0].Annotations[TitleAnnotation] != "devcontainer-feature-devbox.tgz" || !strings.Contains(mf.Annotations[MetadataAnnotation], `"version":"1.2.3"`) {
		t.Errorf("manifest %s", desc.Manifest)
	}
	if desc.Digest.String() != p.Feature.DigestStr() {
		t.Errorf("printed digest %s, registry has %s", p.Feature.DigestStr(), desc.Digest)
	}
	img, _ := desc.Image()
	if cfg, _ := img.RawConfigFile(); string(cfg) != "{}" {
		t.Errorf("config %q", cfg)
	}

	old := publish("1.1.0")
	if !slices.Equal(old.Tags, []string{"1.1", "1.1.0"}) || len(old.Skipped) != 2 {
		t.Errorf("older version moved tags: %+v", old)
	}
	for tag, want := range map[string]string{"1": "1.2.3", "latest": "1.2.3", "1.1": "1.1.0"} {
		d, err := remote.Get(mustRef(t, ns+"/devbox:"+tag))
		if err != nil {
			t.Fatal(err)
		}
		var m struct{ Annotations map[string]string }
		json.Unmarshal(d.Manifest, &m)
		if !strings.Contains(m.Annotations[MetadataAnnotation], `"version":"`+want+`"`) {
			t.Errorf("tag %s does not point at %s", tag, want)
		}
	}
	if _, err := remote.Get(mustRef(t, ns+":latest")); err != nil {
		t.Errorf("collection metadata not published: %v", err)
	}
}

func mustRef(t *testing.T, s string) name.Reference {
	t.Helper()
	r, err := name.ParseReference(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestClaudePins: the committed lock gives one line per architecture with
// the hex of the npm sha512 integrity, and bad pins are refused.
func TestClaudePins(t *testing.T) {
	l, err := policy.ReadLock("claude-code.lock.json")
	if err != nil {
		t.Fatal(err)
	}
	pins, err := ClaudePins([]policy.LockedClaudeCode{l.ClaudeCode, l.ClaudeCode})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(pins)), "\n")
	if len(lines) != 2 {
		t.Fatalf("pins %q: want one line per architecture", pins)
	}
	for i, arch := range []string{"amd64", "arm64"} {
		f := strings.Fields(lines[i])
		want, _ := sha512Hex(l.ClaudeCode.Platforms["linux/"+arch].Integrity)
		if len(f) != 4 || f[0] != l.ClaudeCode.Version || f[1] != arch || f[2] != want || len(f[2]) != 128 || f[3] != l.ClaudeCode.Platforms["linux/"+arch].Tarball {
			t.Errorf("line %q", lines[i])
		}
	}
	bad := []policy.LockedClaudeCode{
		{Version: "latest", Platforms: l.ClaudeCode.Platforms},
		{Version: "1.0.0", Platforms: map[string]policy.LockedPackage{"linux/amd64": {Tarball: "http://x.test/a.tgz", Integrity: l.ClaudeCode.Platforms["linux/amd64"].Integrity}}},
		{Version: "1.0.0", Platforms: map[string]policy.LockedPackage{"linux/amd64": {Tarball: "https://x.test/a b.tgz", Integrity: l.ClaudeCode.Platforms["linux/amd64"].Integrity}}},
		{Version: "1.0.0", Platforms: map[string]policy.LockedPackage{"linux/amd64": {Tarball: "https://x.test/a.tgz", Integrity: "sha1-AAAA"}}},
		{Version: "1.0.0", Platforms: map[string]policy.LockedPackage{"darwin/arm64": l.ClaudeCode.Platforms["linux/arm64"]}},
	}
	for _, b := range bad {
		if _, err := ClaudePins([]policy.LockedClaudeCode{b}); err == nil {
			t.Errorf("%+v: accepted", b)
		}
	}
	files, err := Source{Manifest: rootManifest(t), Install: []byte("#!/bin/sh\n"), Binaries: map[string][]byte{"amd64": []byte("x")}, Claude: []policy.LockedClaudeCode{l.ClaudeCode}}.Files()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f.Name == "payload/SHA256SUMS" && !strings.Contains(string(f.Data), "  claude-code.pins\n") {
			t.Errorf("SHA256SUMS does not cover claude-code.pins: %q", f.Data)
		}
	}
}
