package doctor

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestCredentialRoutes(t *testing.T) {
	refused := errors.New("connection refused")
	for _, tc := range []struct {
		name   string
		routes []Route
		err    error
		direct error
		want   Level
	}{
		{"all good", []Route{{Route: "anthropic", Host: "api.anthropic.com", Secret: "anthropic", SecretSet: true}}, nil, refused, OK},
		{"secret missing", []Route{{Route: "git", Host: "github.com", Secret: "github"}}, nil, refused, Warn},
		{"upstream not checked", []Route{{Route: "git", Host: "github.com", Secret: "github", SecretSet: true, UpstreamSkipped: true}}, nil, refused, OK},
		{"upstream down", []Route{{Route: "git", Host: "github.com", Secret: "github", SecretSet: true, Upstream: "no such host"}}, nil, refused, Warn},
		{"direct access open", []Route{{Route: "anthropic", Host: "api.anthropic.com", Secret: "anthropic", SecretSet: true}}, nil, nil, Fail},
		{"gateway down", nil, errors.New("connection refused"), refused, Fail},
	} {
		c := &checker{sys: &fakeSys{euid: 1000}, o: Options{
			Routes:     func(context.Context) ([]Route, error) { return tc.routes, tc.err },
			DialDirect: func(context.Context, string) error { return tc.direct },
		}}
		c.credentials(context.Background())
		if len(c.out) != 1 || c.out[0].Level != tc.want {
			t.Errorf("%s: findings %+v, want one %s", tc.name, c.out, tc.want)
			continue
		}
		if tc.routes != nil && tc.routes[0].UpstreamSkipped && (!strings.Contains(c.out[0].Detail, "upstream not checked") || strings.Contains(c.out[0].Detail, "reachable")) {
			t.Errorf("%s: %q claims more than was checked", tc.name, c.out[0].Detail)
		}
		if tc.want != OK && c.out[0].Fix == "" {
			t.Errorf("%s: no fix", tc.name)
		}
	}
}
