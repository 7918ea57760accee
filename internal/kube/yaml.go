package kube

import (
	"bytes"
	"fmt"
	"net/netip"

	"sigs.k8s.io/yaml"
)

// Marshal writes objects as one YAML stream ("---" between documents).
func Marshal(objs ...any) ([]byte, error) {
	var b bytes.Buffer
	for i, o := range objs {
		y, err := yaml.Marshal(o)
		if err != nil {
			return nil, fmt.Errorf("kube: %w", err)
		}
		if i > 0 {
			b.WriteString("---\n")
		}
		b.Write(y)
	}
	return b.Bytes(), nil
}

// DecodeStrict reads one YAML document into out, refusing unknown and
// duplicate fields: what kubectl's strict field validation refuses.
func DecodeStrict(doc []byte, out any) error {
	if err := yaml.UnmarshalStrict(doc, out); err != nil {
		return fmt.Errorf("kube: strict decode: %w", err)
	}
	return nil
}

func netipHost(a netip.Addr) string { return netip.PrefixFrom(a, a.BitLen()).String() }
