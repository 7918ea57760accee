// Package templates holds the files `devbox init` writes into a repository's
// .devcontainer/ directory, embedded into the devbox binary so init works
// offline and from any working directory.
package templates

import "embed"

// DevContainer is the tree under .devcontainer/. The all: prefix keeps the
// dot-files (.devbox/.gitignore) that a plain pattern would skip.
//
//go:embed all:.devcontainer
var DevContainer embed.FS
