package main

import (
	"os"
	"runtime"
	"strings"
	"testing"
)

func TestParseCacheEntries(t *testing.T) {
	tests := []struct {
		in       string
		wantType string
		wantRef  string
		wantErr  string
	}{
		{in: "type=registry,ref=registry.test/team/devbox:cache,mode=max", wantType: "registry", wantRef: "registry.test/team/devbox:cache"},
		{in: "type=local,src=/tmp/cache", wantType: "local"},
		{in: "type=registry", wantErr: "needs ref="},
		{in: "ref=x", wantErr: "missing type="},
		{in: "type=floppy,ref=x", wantErr: `unknown cache type "floppy"`},
		{in: "type=registry,ref", wantErr: "not key=value"},
		// What buildctl's parser brings: CSV quoting and case-insensitive keys.
		{in: `type=registry,"ref=registry.test/a,b:cache"`, wantType: "registry", wantRef: "registry.test/a,b:cache"},
		{in: "type=registry,REF=registry.test/c:cache", wantType: "registry", wantRef: "registry.test/c:cache"},
		{in: `type=registry,ref="unterminated`, wantErr: "not key=value"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseCacheEntries("cache-from", []string{tt.in})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "--cache-from") {
					t.Fatalf("err = %v, want one naming --cache-from and %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got[0].Type != tt.wantType || got[0].Attrs["ref"] != tt.wantRef {
				t.Errorf("got %+v", got[0])
			}
		})
	}
}

// --cache-to goes through buildctl's export parser: mode=min unless given,
// as buildctl and buildx say.
func TestParseCacheEntriesExport(t *testing.T) {
	got, err := parseCacheEntries("cache-to", []string{"type=registry,ref=registry.test/c:cache", "type=local,dest=/tmp/c,mode=max"})
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Attrs["mode"] != "min" || got[1].Attrs["mode"] != "max" || got[1].Attrs["dest"] != "/tmp/c" {
		t.Errorf("got %+v", got)
	}
	if _, err := parseCacheEntries("cache-to", []string{"ref=x"}); err == nil || !strings.Contains(err.Error(), "--cache-to") {
		t.Errorf("err = %v, want one naming --cache-to", err)
	}
}

func TestDevboxBinaries(t *testing.T) {
	self, _ := os.Executable()
	host := runtime.GOOS + "/" + runtime.GOARCH
	other := "linux/arm64"
	if runtime.GOARCH == "arm64" {
		other = "linux/amd64"
	}
	tests := []struct {
		name  string
		flags []string
		plats []string
		want  map[string]string
	}{
		{"default is this binary", nil, []string{host}, map[string]string{host: self}},
		{"one path for all", []string{"/x/devbox"}, []string{host, other}, map[string]string{host: "/x/devbox", other: "/x/devbox"}},
		{"per platform", []string{other + "=/y/devbox"}, []string{host, other}, map[string]string{host: self, other: "/y/devbox"}},
		{"other arch left for image.Build to refuse", nil, []string{other}, map[string]string{}},
	}
	if runtime.GOOS != "linux" {
		t.Skip("the default binary is only used on linux")
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := devboxBinaries(tt.flags, tt.plats)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("%s: got %q, want %q", k, got[k], v)
				}
			}
		})
	}
}
