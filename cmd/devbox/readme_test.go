package main

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/devbox-dev/devbox/internal/policy"
)

// TestREADMECoversCLIAndPolicy keeps the README true: its CLI reference names
// every command, and its policy table every key of the policy file.
func TestREADMECoversCLIAndPolicy(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	for _, c := range newApp().Commands {
		if !strings.Contains(readme, "`devbox "+c.Name) {
			t.Errorf("README.md's CLI reference does not mention `devbox %s`", c.Name)
		}
	}
	for _, key := range policyKeys(reflect.TypeFor[policy.Policy](), "") {
		if !strings.Contains(readme, "| `"+key+"` |") {
			t.Errorf("README.md's policy table has no row for %s", key)
		}
	}
}

// policyKeys lists the leaf key paths of the policy file ("image.user.uid"),
// from the json tags of the Policy types.
func policyKeys(t reflect.Type, prefix string) []string {
	var keys []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		if f.Type.Kind() == reflect.Struct {
			keys = append(keys, policyKeys(f.Type, prefix+name+".")...)
			continue
		}
		keys = append(keys, prefix+name)
	}
	return keys
}
