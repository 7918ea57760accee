package review

import (
	"strings"
	"testing"

	"github.com/devbox-dev/devbox/firewall/fwpolicy"
	"github.com/devbox-dev/devbox/internal/policy"
)

func TestApplyKeepsComments(t *testing.T) {
	add := func(s, ev string) Addition {
		d, err := policy.ParseDestination(s)
		if err != nil {
			t.Fatal(err)
		}
		return Addition{Destination: d, Evidence: ev}
	}
	adds := []Addition{add("a.test:443", "review: 2 refused queries"), add("b.test:8443", "review: 1 blocked connection")}
	for _, tc := range []struct{ name, src, want string }{
		{"trailing comma and comment", `// top
{
  "network": {
    // the team's hosts
    "allow": [
      "x.test:443", // why x
    ],
  },
}
`, `// top
{
  "network": {
    // the team's hosts
    "allow": [
      "x.test:443", // why x
      // review: 2 refused queries
      "a.test:443",
      // review: 1 blocked connection
      "b.test:8443",
    ],
  },
}
`},
		{"no trailing comma", `{"network": {
    "allow": [
      "x.test:443" // why x
    ]
}}`, `{"network": {
    "allow": [
      "x.test:443", // why x
      // review: 2 refused queries
      "a.test:443",
      // review: 1 blocked connection
      "b.test:8443",
    ]
}}`},
		{"empty list", `{
  "network": {
    "allow": [],
  },
}`, `{
  "network": {
    "allow": [
      // review: 2 refused queries
      "a.test:443",
      // review: 1 blocked connection
      "b.test:8443",
    ],
  },
}`},
		{"no network", `{
  // nothing yet
  "agent": {"claudeCode": "2.1.332"},
}`, `{
  // nothing yet
  "agent": {"claudeCode": "2.1.332"},
  "network": {
    "allow": [
      // review: 2 refused queries
      "a.test:443",
      // review: 1 blocked connection
      "b.test:8443",
    ],
  },
}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Apply([]byte(tc.src), adds)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("got:\n%s\nwant:\n%s\ndiff:\n%s", got, tc.want, Diff("p", []byte(tc.want), got))
			}
			p, err := policy.Parse("p", got)
			if err != nil {
				t.Fatalf("the patched file does not validate: %v", err)
			}
			for _, a := range adds {
				if !strings.Contains(string(got), a.Destination.String()) || !fwpolicy.Config(p).Match(a.Destination.Name).Allowed {
					t.Errorf("%s not allowed after apply", a.Destination)
				}
			}
		})
	}
}
