package baseline

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/devbox-dev/devbox/firewall"
	"github.com/devbox-dev/devbox/internal/policy"
)

// Load reads a baseline: a policy file (HuJSON, or the normalized JSON an
// image carries).
func Load(path string) (*policy.Policy, error) {
	p, err := policy.Load(path)
	if err != nil {
		return nil, fmt.Errorf("baseline: %w", err)
	}
	return p, nil
}

// Digest is the digest the image's label records for a baked baseline:
// sha256 of the normalized bytes.
func Digest(normalized []byte) string {
	sum := sha256.Sum256(normalized)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// FromLabel reads the baseline an image carries in its label (the
// normalized JSON, possibly compacted) and checks it against the digest
// label: the digest of the normalized bytes baked at layout.BaselinePath.
func FromLabel(value, digest string) (*policy.Policy, error) {
	p, err := policy.Parse("image baseline label", []byte(value))
	if err != nil {
		return nil, fmt.Errorf("baseline: %w", err)
	}
	norm, err := p.Normalize()
	if err != nil {
		return nil, fmt.Errorf("baseline: %w", err)
	}
	if got := Digest(norm); got != digest {
		return nil, fmt.Errorf("baseline: the image's baseline label has digest %s, its digest label says %q", got, digest)
	}
	return p, nil
}

// Resolve returns the policy the fence applies in a container, and fails
// when it must not be applied (the caller then leaves egress denied):
//   - policyPath is the policy baked into the image;
//   - repoPath is the repository's own policy, mounted read-only into a
//     container started from a prebuilt image (devbox init --image); when
//     it exists it is the policy applied, and it must only narrow the
//     ceiling: the baseline at baselinePath when the image has one, else
//     the baked policy;
//   - without a repository policy, the baked policy is applied, and it too
//     must lie within the baseline when there is one.
//
// The fence is Resolved.Fence (the ceiling's credential hosts stay
// protected); the entrypoint records Resolved.Policy with WriteApplied, and
// `devbox run`, the credential gateway and `devbox doctor` read it back
// with Applied, so the repository's narrowing applies to all of them.
func Resolve(policyPath, baselinePath, repoPath string) (*Resolved, error) {
	baked, err := policy.Load(policyPath)
	if err != nil {
		return nil, err
	}
	ceiling, ceilingName := baked, policyPath
	if _, err := os.Stat(baselinePath); err == nil {
		if ceiling, err = Load(baselinePath); err != nil {
			return nil, err
		}
		ceilingName = baselinePath
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("baseline: %w", err)
	}
	path := policyPath
	if _, err := os.Stat(repoPath); err == nil {
		path = repoPath
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("repository policy: %w", err)
	}
	ex, err := policy.ExplainFile(path)
	if err != nil {
		return nil, err
	}
	if err := Check(ceiling, ceilingName, ex); err != nil {
		return nil, fmt.Errorf("%s widens %s; the fence is not applied:\n%w", path, ceilingName, err)
	}
	return &Resolved{Policy: ex.Policy, Ceiling: ceiling}, nil
}

// Resolved is the outcome of Resolve.
type Resolved struct {
	// Policy is the policy in force: the repository's, or the baked one.
	Policy *policy.Policy
	// Ceiling is what it was checked against: the baseline, else the
	// baked policy.
	Ceiling *policy.Policy
}

// Fence is the firewall Config the entrypoint applies (FenceConfig).
func (r *Resolved) Fence() firewall.Config { return FenceConfig(r.Ceiling, r.Policy) }
