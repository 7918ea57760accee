package golden

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestForEach: one subtest per matching file, named without directory and
// extension, given the file's path; files that do not match are left out.
func TestForEach(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"a.json", "b.c.json", "skip.txt"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	ForEach(t, filepath.Join(dir, "*.json"), func(t *testing.T, path, name string) {
		if want := filepath.Join(dir, name+".json"); path != want {
			t.Errorf("path %s, want %s", path, want)
		}
		got = append(got, t.Name())
	})
	if want := []string{"TestForEach/a", "TestForEach/b.c"}; !slices.Equal(got, want) {
		t.Errorf("subtests %q, want %q", got, want)
	}
}
