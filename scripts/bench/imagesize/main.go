// Command imagesize prints the per-layer table of a devbox image written by
// `devbox build --output oci=DIR`: each layer's uncompressed and compressed
// size and the step that made it, the total against the size budget, and the
// Debian packages the packages step added with their installed size and the
// bytes their files take in that layer (what is left after dpkg's
// path-excludes).
//
//	go run ./scripts/bench/imagesize -budget 600 DIR
package main

import (
	"archive/tar"
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

func main() {
	budget := flag.Float64("budget", 600, "size budget in MB (uncompressed); exit 1 above it")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: imagesize [-budget MB] OCI-LAYOUT-DIR")
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *budget); err != nil {
		fmt.Fprintln(os.Stderr, "imagesize:", err)
		os.Exit(1)
	}
}

func run(dir string, budget float64) error {
	p, err := layout.FromPath(dir)
	if err != nil {
		return err
	}
	idx, err := p.ImageIndex()
	if err != nil {
		return err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	if len(m.Manifests) == 0 {
		return errors.New("no image in the layout")
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	var names []string
	for _, h := range cf.History {
		if !h.EmptyLayer {
			names = append(names, h.CreatedBy)
		}
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	fmt.Println("| layer | uncompressed MB | compressed MB |")
	fmt.Println("|---|---:|---:|")
	var total, totalC int64
	before, after := map[string]int64{}, map[string]int64{}
	var pkgLayer *layerFiles
	for i, l := range layers {
		name := fmt.Sprintf("layer %d", i+1)
		if i < len(names) {
			name = names[i]
		}
		status, files, n, err := readLayer(l)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		c, err := l.Size()
		if err != nil {
			return err
		}
		if status != nil {
			if strings.HasSuffix(name, " packages") {
				after = status
				pkgLayer = files
			} else if len(after) == 0 {
				before = status
			}
		}
		total += n
		totalC += c
		fmt.Printf("| %s | %.1f | %.1f |\n", name, mb(n), mb(c))
	}
	fmt.Printf("| **total** | **%.1f** | **%.1f** |\n", mb(total), mb(totalC))

	type pkg struct {
		name  string
		kb    int64
		bytes int64
	}
	var added []pkg
	var addedKB, addedBytes int64
	owned := map[string]bool{}
	for n, kb := range after {
		if _, ok := before[n]; !ok {
			p := pkg{name: n, kb: kb}
			if pkgLayer != nil {
				for _, f := range pkgLayer.lists[n] {
					if _, ok := pkgLayer.sizes[f]; !ok {
						// merged /usr: dpkg lists /bin/x, the layer has /usr/bin/x.
						f = "/usr" + f
					}
					if _, ok := pkgLayer.sizes[f]; ok && !owned[f] {
						p.bytes += pkgLayer.sizes[f]
						owned[f] = true
					}
				}
			}
			added = append(added, p)
			addedKB += kb
			addedBytes += p.bytes
		}
	}
	sort.Slice(added, func(i, j int) bool { return added[i].bytes > added[j].bytes })
	fmt.Printf("\nPackages the packages step added (%d): dpkg's Installed-Size, and the bytes of their files in the layer\n\n", len(added))
	fmt.Printf("  %-28s %9s %9s\n", "package", "dpkg MB", "layer MB")
	for _, p := range added {
		fmt.Printf("  %-28s %9.1f %9.1f\n", p.name, float64(p.kb)/1024, mb(p.bytes))
	}
	if pkgLayer != nil {
		var rest int64
		for f, n := range pkgLayer.sizes {
			if !owned[f] {
				rest += n
			}
		}
		fmt.Printf("  %-28s %9s %9.1f\n", "(no package's file: dpkg db, caches, config)", "", mb(rest))
		fmt.Printf("  %-28s %9.1f %9.1f\n", "total", float64(addedKB)/1024, mb(addedBytes+rest))
	}
	fmt.Printf("\nbudget: %.1f MB of %.0f MB\n", mb(total), budget)
	if mb(total) > budget {
		return fmt.Errorf("the image is %.1f MB uncompressed, over the %.0f MB budget", mb(total), budget)
	}
	return nil
}

func mb(n int64) float64 { return float64(n) / 1e6 }

// layerFiles is what a layer holds: each regular file's size by absolute
// path, and the file lists of the packages dpkg (re)wrote in it.
type layerFiles struct {
	sizes map[string]int64
	lists map[string][]string // package name (no :arch) → its files
}

// readLayer returns the layer's uncompressed size, its files and, when it
// carries dpkg's status file, each installed package's Installed-Size in
// KiB.
func readLayer(l v1.Layer) (map[string]int64, *layerFiles, int64, error) {
	rc, err := l.Uncompressed()
	if err != nil {
		return nil, nil, 0, err
	}
	defer rc.Close()
	cr := &counter{r: rc}
	tr := tar.NewReader(cr)
	var status map[string]int64
	files := &layerFiles{sizes: map[string]int64{}, lists: map[string][]string{}}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, 0, err
		}
		name := "/" + strings.TrimPrefix(strings.TrimPrefix(h.Name, "./"), "/")
		if h.Typeflag == tar.TypeReg {
			files.sizes[name] = h.Size
		}
		switch {
		case name == "/var/lib/dpkg/status":
			status, err = parseStatus(tr)
		case strings.HasPrefix(name, "/var/lib/dpkg/info/") && strings.HasSuffix(name, ".list"):
			pkg, _, _ := strings.Cut(strings.TrimSuffix(strings.TrimPrefix(name, "/var/lib/dpkg/info/"), ".list"), ":")
			var b []byte
			b, err = io.ReadAll(tr)
			files.lists[pkg] = strings.Split(strings.TrimSpace(string(b)), "\n")
		}
		if err != nil {
			return nil, nil, 0, err
		}
	}
	io.Copy(io.Discard, cr)
	return status, files, cr.n, nil
}

func parseStatus(r io.Reader) (map[string]int64, error) {
	out := map[string]int64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var name string
	var size int64
	installed := false
	flush := func() {
		if name != "" && installed {
			out[name] = size
		}
		name, size, installed = "", 0, false
	}
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			flush()
		case strings.HasPrefix(line, "Package: "):
			name = strings.TrimPrefix(line, "Package: ")
		case strings.HasPrefix(line, "Installed-Size: "):
			size, _ = strconv.ParseInt(strings.TrimPrefix(line, "Installed-Size: "), 10, 64)
		case strings.HasPrefix(line, "Status: "):
			installed = strings.HasSuffix(line, " installed")
		}
	}
	flush()
	return out, sc.Err()
}

type counter struct {
	r io.Reader
	n int64
}

func (c *counter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
