package sandbox

import (
	"path"
)

// dangerousFile and dangerousDir index DangerousFiles and the one-component
// DangerousDirs; ".claude" holds the two-component ones.
var (
	dangerousFile = setOf(DangerousFiles...)
	dangerousDir  = setOf(".vscode", ".idea")
	claudeDirs    = []string{"commands", "agents"}
)

// findDangerous walks the tree at root, down to maxGlobDepth directories
// like the "**" globs and through the same listings, and calls found with
// every dangerous path: a file of DangerousFiles, a directory of
// DangerousDirs, and in each git directory its hooks directory and config
// (reported Missing when absent, so that a repository's hooks can be denied
// before there are any). The run-end audit watches more (gitaudit's model,
// see Audit); Plan makes read-only what exists. It descends neither into what it reports,
// nor into .git, node_modules (large, and never a place an editor or a
// shell reads settings from) or symbolic links, which are never followed.
func findDangerous(fsys FS, root string, found func(p string, k Kind)) error {
	// foundIn reports each of names under dir, the missing ones too when
	// missing is set.
	foundIn := func(dir string, names []string, missing bool) error {
		for _, n := range names {
			q := path.Join(dir, n)
			k, err := fsys.Lstat(q)
			if err != nil {
				return err
			}
			if missing || k != Missing {
				found(q, k)
			}
		}
		return nil
	}
	var walk func(dir string, depth int) error
	walk = func(dir string, depth int) error {
		entries, err := readDirKinds(fsys, dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			p := path.Join(dir, e.Name)
			switch {
			case e.Name == "node_modules":
			case e.Kind == Symlink:
				// Plan leaves a link alone: a mount would land where it
				// points. The audit follows it and watches the target.
			case e.Kind == File && dangerousFile[e.Name]:
				found(p, File)
			case e.Kind != Dir:
			case e.Name == ".git":
				if err := foundIn(dir, gitDangerous, true); err != nil {
					return err
				}
			case dangerousDir[e.Name]:
				found(p, Dir)
			case e.Name == ".claude":
				if err := foundIn(p, claudeDirs, false); err != nil {
					return err
				}
			case depth < maxGlobDepth:
				if err := walk(p, depth+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return walk(root, 0)
}

func setOf(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}
