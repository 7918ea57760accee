//go:build linux

package firewall

import (
	"net/netip"
	"testing"
)

func TestProcAddr(t *testing.T) {
	for in, want := range map[string]string{
		"0100007F:1F90":                         "127.0.0.1:8080",
		"6400A8C0:01BB":                         "192.168.0.100:443",
		"0000000000000000FFFF00000100007F:0050": "127.0.0.1:80",
		"00000000000000000000000001000000:0016": "[::1]:22",
		"B80D0120000000000000000001000000:01BB": "[2001:db8::1]:443",
	} {
		got, ok := procAddr(in)
		if !ok || got != netip.MustParseAddrPort(want) {
			t.Errorf("procAddr(%s) = %v %v, want %s", in, got, ok, want)
		}
	}
	if _, ok := procAddr("zz:1"); ok {
		t.Error("procAddr accepted garbage")
	}
}
