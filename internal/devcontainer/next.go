package devcontainer

import "path/filepath"

// NextStep returns what to run after init wrote results in root: nothing
// while a file is still pending (its note says what to run) or when nothing
// changed (the initializeCommand's run on every start), else how to
// open the container, and what to install first when neither docker nor
// podman is on the PATH (lookPath is exec.LookPath outside tests). With a
// Podman engine (InitOptions.Engine) the command names podman.
func NextStep(root, engine string, results []FileResult, lookPath func(string) (string, error)) []string {
	changed := false
	for _, r := range results {
		if r.Status == Pending {
			return nil
		}
		if r.Status != Unchanged && r.Status != Kept {
			changed = true
		}
	}
	if !changed {
		return nil
	}
	ws := "."
	if abs, err := filepath.Abs(root); err == nil {
		if wd, err := filepath.Abs("."); err != nil || wd != abs {
			ws = root
		}
	}
	_, dockerErr := lookPath("docker")
	_, podmanErr := lookPath("podman")
	if engine == "podman" || engine == "podman-rootful" {
		out := []string{"next: devcontainer up --docker-path podman --workspace-folder " + ws + "   (or VS Code with the setting dev.containers.dockerPath: podman)"}
		if podmanErr != nil {
			out = append(out, "note: podman is not on the PATH: install it (apt-get install podman)")
		}
		return out
	}
	out := []string{"next: devcontainer up --workspace-folder " + ws + "   (or VS Code: \"Dev Containers: Reopen in Container\")"}
	switch {
	case dockerErr != nil && podmanErr != nil:
		out = append(out, "note: neither docker nor podman is on the PATH: the container needs an engine — install Docker Engine (apt-get install docker.io), or Podman and add --docker-path podman")
	case dockerErr != nil:
		out = append(out, "note: docker is not on the PATH; with Podman run: devcontainer up --docker-path podman --workspace-folder "+ws+" (rootful Podman, as root, needs `devbox init --engine podman-rootful` first)")
	}
	return out
}
