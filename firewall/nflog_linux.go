//go:build linux

package firewall

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// NFLOG over a raw NETLINK_NETFILTER socket: the kernel log is not readable
// from a container, NFLOG is, and it needs no library beyond x/sys/unix.
const (
	nfnlSubsysULOG     = 4
	nfulnlMsgPacket    = 0
	nfulnlMsgConfig    = 1
	nfulaCfgCmd        = 1
	nfulaCfgMode       = 2
	nfulaCfgQThresh    = 5
	nfulnlCfgCmdBind   = 1
	nfulnlCopyPacket   = 2
	nfulaPayload       = 9
	nfulaPrefix        = 10
	nfulaPacketHdr     = 1
	nlaTypeMask        = ^uint16(unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER)
	nflogCopyRangeSize = 128 // enough for the IPv6 header and ports
)

// nflogReader receives the packets the rules send to one NFLOG group.
type nflogReader struct {
	fd int
}

func openNFLOG(group uint16) (*nflogReader, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
	if err != nil {
		return nil, fmt.Errorf("nflog socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("nflog bind: %w", err)
	}
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 1<<20)
	r := &nflogReader{fd: fd}
	// Bind the group, then ask for the packet's first bytes.
	if err := r.config(group, nfulaCfgCmd, []byte{nfulnlCfgCmdBind}); err != nil {
		unix.Close(fd)
		return nil, err
	}
	mode := make([]byte, 6)
	binary.BigEndian.PutUint32(mode, nflogCopyRangeSize)
	mode[4] = nfulnlCopyPacket
	if err := r.config(group, nfulaCfgMode, mode); err != nil {
		unix.Close(fd)
		return nil, err
	}
	// One packet per message: the default batches for up to a second.
	if err := r.config(group, nfulaCfgQThresh, binary.BigEndian.AppendUint32(nil, 1)); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return r, nil
}

func (r *nflogReader) Close() error { return unix.Close(r.fd) }

func (r *nflogReader) config(group uint16, attr uint16, val []byte) error {
	alen := 4 + len(val)
	msg := make([]byte, 16+4+align4(alen))
	binary.NativeEndian.PutUint32(msg[0:], uint32(len(msg)))
	binary.NativeEndian.PutUint16(msg[4:], nfnlSubsysULOG<<8|nfulnlMsgConfig)
	binary.NativeEndian.PutUint16(msg[6:], unix.NLM_F_REQUEST|unix.NLM_F_ACK)
	binary.NativeEndian.PutUint32(msg[8:], 1)
	msg[16] = unix.AF_UNSPEC // nfgenmsg: family, version, res_id (group, big endian)
	msg[17] = 0
	binary.BigEndian.PutUint16(msg[18:], group)
	binary.NativeEndian.PutUint16(msg[20:], uint16(alen))
	binary.NativeEndian.PutUint16(msg[22:], attr)
	copy(msg[24:], val)
	if err := unix.Sendto(r.fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("nflog config: %w", err)
	}
	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(r.fd, buf, 0)
	if err != nil {
		return fmt.Errorf("nflog config: %w", err)
	}
	if n >= 20 && binary.NativeEndian.Uint16(buf[4:]) == unix.NLMSG_ERROR {
		if code := int32(binary.NativeEndian.Uint32(buf[16:])); code != 0 {
			return fmt.Errorf("nflog config group %d: %w", group, unix.Errno(-code))
		}
	}
	return nil
}

func align4(n int) int { return (n + 3) &^ 3 }

// read blocks until packets arrive and calls fn for each one.
func (r *nflogReader) read(fn func(prefix string, payload []byte, family uint8)) error {
	buf := make([]byte, 1<<16)
	for {
		n, _, err := unix.Recvfrom(r.fd, buf, 0)
		if err != nil {
			if err == unix.EINTR || err == unix.ENOBUFS {
				continue // ENOBUFS: the kernel dropped some; keep going
			}
			return err
		}
		for b := buf[:n]; len(b) >= 16; {
			mlen := int(binary.NativeEndian.Uint32(b))
			if mlen < 16 || mlen > len(b) {
				break
			}
			mtype := binary.NativeEndian.Uint16(b[4:])
			if mtype == nfnlSubsysULOG<<8|nfulnlMsgPacket && mlen >= 20 {
				family := b[16]
				var prefix string
				var payload []byte
				for a := b[20:mlen]; len(a) >= 4; {
					alen := int(binary.NativeEndian.Uint16(a))
					if alen < 4 || alen > len(a) {
						break
					}
					switch binary.NativeEndian.Uint16(a[2:]) & nlaTypeMask {
					case nfulaPrefix:
						prefix = strings.TrimRight(string(a[4:alen]), "\x00")
					case nfulaPayload:
						payload = a[4:alen]
					}
					a = a[min(align4(alen), len(a)):]
				}
				fn(prefix, payload, family)
			}
			b = b[min(align4(mlen), len(b)):]
		}
	}
}

// packetEvent decodes the IP header and ports of a logged packet.
func packetEvent(prefix string, p []byte) (Event, bool) {
	e := Event{Time: time.Now().UTC()}
	switch prefix {
	case prefixDenied:
		e.Reason = "denied"
	case prefixNotAllowed:
		e.Reason = "not-allowed"
	case prefixUDPGated:
		e.Reason = "udp-gated"
	default:
		return e, false
	}
	if len(p) < 1 {
		return e, false
	}
	var proto uint8
	var l4 []byte
	switch p[0] >> 4 {
	case 4:
		if len(p) < 20 {
			return e, false
		}
		ihl := int(p[0]&0x0f) * 4
		proto = p[9]
		e.Dst = netip.AddrFrom4([4]byte(p[16:20])).String()
		if ihl <= len(p) {
			l4 = p[ihl:]
		}
	case 6:
		if len(p) < 40 {
			return e, false
		}
		proto = p[6]
		e.Dst = netip.AddrFrom16([16]byte(p[24:40])).String()
		l4 = p[40:]
		// Skip hop-by-hop, routing and destination options headers.
		for (proto == 0 || proto == 43 || proto == 60) && len(l4) >= 2 {
			n := (int(l4[1]) + 1) * 8
			proto = l4[0]
			if n > len(l4) {
				l4 = nil
				break
			}
			l4 = l4[n:]
		}
	default:
		return e, false
	}
	switch proto {
	case unix.IPPROTO_TCP, unix.IPPROTO_UDP:
		e.Proto = map[uint8]string{unix.IPPROTO_TCP: "tcp", unix.IPPROTO_UDP: "udp"}[proto]
		if len(l4) >= 4 {
			e.Port = binary.BigEndian.Uint16(l4[2:])
		}
	case unix.IPPROTO_ICMP:
		e.Proto = "icmp"
	case unix.IPPROTO_ICMPV6:
		e.Proto = "icmpv6"
	default:
		e.Proto = strconv.Itoa(int(proto))
	}
	return e, true
}
