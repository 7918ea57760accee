package entrypoint

import (
	"strings"
	"testing"

	"github.com/devbox-dev/devbox/internal/devboxtest"
)

const rootStatus = `Name:	cat
Uid:	0	0	0	0
Gid:	0	0	0	0
CapInh:	0000000000000000
CapPrm:	00000000a80435fb
CapEff:	00000000a80435fb
CapBnd:	00000000a80435fb
CapAmb:	0000000000000000
NoNewPrivs:	0
Seccomp:	2
`

const userStatus = `Name:	cat
State:	S (sleeping)
Uid:	1000	1000	1000	1000
Gid:	1000	1000	1000	1000
CapInh:	0000000000000000
CapPrm:	0000000000000000
CapEff:	0000000000000000
CapBnd:	00000000a80435fb
CapAmb:	0000000000000000
NoNewPrivs:	1
Seccomp:	2
`

func TestParseProcStatus(t *testing.T) {
	for _, tc := range []struct {
		name, text   string
		wantUnpriv   string // "" means Unprivileged() == nil
		wantParseErr string
	}{
		{name: "root", text: rootStatus, wantUnpriv: "effective capabilities CAP_CHOWN,"},
		{name: "user", text: userStatus},
		{name: "user without nnp", text: strings.Replace(userStatus, "NoNewPrivs:\t1", "NoNewPrivs:\t0", 1), wantUnpriv: "no_new_privs off"},
		{name: "ambient net_admin", text: strings.Replace(userStatus, "CapAmb:\t0000000000000000", "CapAmb:\t0000000000001000", 1), wantUnpriv: "ambient capabilities CAP_NET_ADMIN"},
		{name: "inheritable", text: strings.Replace(userStatus, "CapInh:\t0000000000000000", "CapInh:\t0000000000003000", 1), wantUnpriv: "inheritable capabilities CAP_NET_ADMIN,CAP_NET_RAW"},
		{name: "no cap lines", text: "Uid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\n", wantParseErr: "no CapInh line"},
		{name: "bad mask", text: strings.Replace(userStatus, "0000000000000000", "zz", 1), wantParseErr: "CapInh"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps, err := ParseProcStatus(tc.text)
			if devboxtest.WantErr(t, err, tc.wantParseErr) {
				return
			}
			uerr := ps.Unprivileged()
			switch {
			case tc.wantUnpriv == "" && uerr != nil:
				t.Errorf("Unprivileged() = %v, want nil", uerr)
			case tc.wantUnpriv != "" && (uerr == nil || !strings.Contains(uerr.Error(), tc.wantUnpriv)):
				t.Errorf("Unprivileged() = %v, want %q", uerr, tc.wantUnpriv)
			}
		})
	}
}

func TestZombie(t *testing.T) {
	for text, want := range map[string]bool{userStatus: false, strings.Replace(userStatus, "S (sleeping)", "Z (zombie)", 1): true} {
		ps, err := ParseProcStatus(text)
		if err != nil {
			t.Fatal(err)
		}
		if ps.Zombie() != want {
			t.Errorf("Zombie() = %v for state %q", ps.Zombie(), ps.State)
		}
	}
}

func TestCapNames(t *testing.T) {
	for mask, want := range map[uint64]string{
		0:                "none",
		1 << CapNetAdmin: "CAP_NET_ADMIN",
		1<<CapNetRaw | 1: "CAP_CHOWN,CAP_NET_RAW",
		1 << 50:          "cap_50",
	} {
		if got := CapNames(mask); got != want {
			t.Errorf("CapNames(%#x) = %q, want %q", mask, got, want)
		}
	}
}
