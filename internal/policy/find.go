package policy

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// SearchPath is where a command given no policy file looks for one,
// relative to the repository root, in order: where `devbox init` writes it,
// then the root itself. The first that exists wins, so with both present
// every command reads the same file.
var SearchPath = []string{
	filepath.Join(".devcontainer", DefaultFileName),
	DefaultFileName,
}

// Find returns the first file of SearchPath under root that exists (root
// "." gives relative paths, as the user would type them). When there is
// none the error wraps ErrNoPolicy and says where it looked.
func Find(root string) (string, error) {
	var looked []string
	for _, rel := range SearchPath {
		p := filepath.Join(root, rel)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
		looked = append(looked, p)
	}
	return "", fmt.Errorf("%w: looked for %s", ErrNoPolicy, strings.Join(looked, " and "))
}
