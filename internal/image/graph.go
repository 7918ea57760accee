package image

import (
	"fmt"
	"path"
	"strings"

	"github.com/containerd/platforms"
	"github.com/moby/buildkit/client/llb"
	"github.com/moby/buildkit/solver/pb"
)

// LocalBinary prefixes the names of the LLB local sources holding the
// devbox binary (one file named ContextBinary) for each platform; Build
// fills them from the binary paths.
const LocalBinary = "devbox-binary"

// VertexPrefix starts the name of every build vertex devbox creates, so
// progress output and tests can tell devbox's steps from BuildKit's.
const VertexPrefix = "[devbox] "

// stepEnv is the environment of every RUN step. SOURCE_DATE_EPOCH makes
// useradd's password-change date (and anything else that honours it)
// reproducible.
func stepEnv(spec Spec) []string {
	return []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		fmt.Sprintf("SOURCE_DATE_EPOCH=%d", spec.Lock.SourceDateEpoch),
	}
}

// Graph returns the LLB graph of the heavy image for spec: every step but
// the tail (Step.Tail), which devbox appends itself (Assemble). It is a
// pure function of spec, and the same for two policies that differ only in
// what the tail writes (the network policy): marshal it with llb.Platform of
// spec.Platform.
func Graph(spec Spec) (llb.State, error) {
	steps, err := Steps(spec)
	if err != nil {
		return llb.State{}, err
	}
	plat, err := platforms.Parse(spec.Platform)
	if err != nil {
		return llb.State{}, fmt.Errorf("platform %q: %w", spec.Platform, err)
	}
	plat = platforms.Normalize(plat)
	base := llb.Image(spec.Lock.Base.Pinned(), llb.Platform(plat),
		llb.WithCustomName(VertexPrefix+"base "+spec.Lock.Base.Pinned()))

	// stages holds each stage's root filesystem; outs the /out mount of a
	// stage whose RUN step produced one.
	stages := map[string]llb.State{"": base, StageClaude: base}
	fetched := map[string]llb.State{}
	outs := map[string]llb.State{}

	for _, s := range steps {
		if s.Tail {
			continue
		}
		st := stages[s.Stage]
		name := llb.WithCustomName(VertexPrefix + s.Name)
		switch s.Kind {
		case FetchStep:
			fetched[s.Stage] = llb.HTTP(s.URL, llb.Filename(path.Base(s.Dest)), name)
		case RunStep:
			opts := []llb.RunOption{
				llb.Args([]string{"/bin/sh", "-euc", s.Script}),
				name,
			}
			for _, e := range stepEnv(spec) {
				k, v, _ := strings.Cut(e, "=")
				opts = append(opts, llb.AddEnv(k, v))
			}
			if !s.Network {
				opts = append(opts, llb.Network(pb.NetMode_NONE))
			}
			if f, ok := fetched[s.Stage]; ok {
				// The download is mounted, not copied: it never becomes a
				// layer of anything.
				opts = append(opts, llb.AddMount(path.Dir(fetchDest(steps, s.Stage)), f, llb.Readonly))
			}
			if s.Stage != "" {
				es := st.Run(opts...)
				outs[s.Stage] = es.AddMount(claudeOut, llb.Scratch())
				stages[s.Stage] = es.Root()
			} else {
				stages[s.Stage] = st.Run(opts...).Root()
			}
		case CopyStep:
			var src llb.State
			srcPath := s.Src
			switch {
			case s.From != "":
				out, ok := outs[s.From]
				if !ok {
					return llb.State{}, fmt.Errorf("step %s copies from stage %s, which has no output", s.Name, s.From)
				}
				src = out
				// The stage's /out mount is the root of its output state.
				srcPath = "/" + path.Clean(s.Src)[len(claudeOut):]
			case s.Data != nil:
				src = llb.Scratch().File(llb.Mkfile("/"+s.Src, s.Mode, s.Data, llb.WithCreatedTime(Created(spec.Lock))),
					llb.WithCustomName(VertexPrefix+s.Name+" content"))
				srcPath = "/" + s.Src
			default:
				local := LocalBinaryName(spec.Platform)
				id := local
				if spec.BinaryDigest != "" {
					id += "@sha256:" + spec.BinaryDigest
				}
				src = llb.Local(local, llb.IncludePatterns([]string{s.Src}), llb.SharedKeyHint(id),
					// An ID of the binary's content instead of a random
					// one keeps the graph a pure function of spec, and
					// the vertex its own for each binary.
					llb.LocalUniqueID(id),
					llb.WithCustomName(VertexPrefix+s.Name+" binary"))
				srcPath = "/" + s.Src
			}
			ci := &llb.CopyInfo{CreateDestPath: true, CopyDirContentsOnly: s.From != "", ChownOpt: &llb.ChownOpt{
				User:  &llb.UserOpt{UID: 0},
				Group: &llb.UserOpt{UID: 0},
			}}
			if s.Mode != 0 {
				ci.Mode = &llb.ChmodOpt{Mode: s.Mode}
			}
			stages[s.Stage] = st.File(llb.Copy(src, srcPath, s.Dest, ci), name)
		default:
			return llb.State{}, fmt.Errorf("step %s: unknown kind %v", s.Name, s.Kind)
		}
	}
	return stages[""], nil
}

// fetchDest returns the Dest of stage's FetchStep: where its RunStep finds
// the download mounted.
func fetchDest(steps []Step, stage string) string {
	for _, o := range steps {
		if o.Stage == stage && o.Kind == FetchStep {
			return o.Dest
		}
	}
	return ""
}
