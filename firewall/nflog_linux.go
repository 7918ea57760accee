//go:build linux

package firewall

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// NFLOG over a NETLINK_NETFILTER socket (the kernel log is not readable
// from a container, NFLOG is), with the netlink library's nl package for
// the socket, the messages and their attributes. nl has the nfnetlink
// framing but not the NFULNL constants, so those are here.
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
	nlaTypeMask        = ^uint16(unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER)
	nflogCopyRangeSize = 128 // enough for the IPv6 header and ports
)

// nflogReader receives the packets the rules send to one NFLOG group.
type nflogReader struct {
	s *nl.NetlinkSocket
}

func openNFLOG(group uint16) (*nflogReader, error) {
	s, err := nl.Subscribe(unix.NETLINK_NETFILTER)
	if err != nil {
		return nil, fmt.Errorf("nflog socket: %w", err)
	}
	s.SetReceiveBufferSize(1<<20, false)
	r := &nflogReader{s: s}
	// Bind the group, then ask for the packet's first bytes.
	if err := r.config(group, nfulaCfgCmd, []byte{nfulnlCfgCmdBind}); err != nil {
		s.Close()
		return nil, err
	}
	mode := binary.BigEndian.AppendUint32(nil, nflogCopyRangeSize)
	mode = append(mode, nfulnlCopyPacket, 0) // copy_mode, padding
	if err := r.config(group, nfulaCfgMode, mode); err != nil {
		s.Close()
		return nil, err
	}
	// One packet per message: the default batches for up to a second.
	if err := r.config(group, nfulaCfgQThresh, binary.BigEndian.AppendUint32(nil, 1)); err != nil {
		s.Close()
		return nil, err
	}
	return r, nil
}

// Close closes the socket; a read in progress returns.
func (r *nflogReader) Close() error { r.s.Close(); return nil }

// config sends one NFULNL_MSG_CONFIG for group with one attribute and
// waits for its ack.
func (r *nflogReader) config(group uint16, attr int, val []byte) error {
	req := nl.NewNetlinkRequest(nfnlSubsysULOG<<8|nfulnlMsgConfig, unix.NLM_F_ACK)
	req.AddData(&nl.Nfgenmsg{NfgenFamily: unix.AF_UNSPEC, Version: nl.NFNETLINK_V0, ResId: nl.Swap16(group)})
	req.AddData(nl.NewRtAttr(attr, val))
	if err := r.s.Send(req); err != nil {
		return fmt.Errorf("nflog config: %w", err)
	}
	msgs, _, err := r.s.Receive()
	if err != nil {
		return fmt.Errorf("nflog config: %w", err)
	}
	for _, m := range msgs {
		if err := ackError(m); err != nil {
			return fmt.Errorf("nflog config group %d: %w", group, err)
		}
	}
	return nil
}

// ackError is the error an NLMSG_ERROR message carries (nil for an ack or
// another message).
func ackError(m syscall.NetlinkMessage) error {
	if m.Header.Type != unix.NLMSG_ERROR || len(m.Data) < 4 {
		return nil
	}
	if code := int32(nl.NativeEndian().Uint32(m.Data)); code != 0 {
		return unix.Errno(-code)
	}
	return nil
}

// read blocks until packets arrive and calls fn for each one.
func (r *nflogReader) read(fn func(prefix string, payload []byte, family uint8)) error {
	for {
		msgs, _, err := r.s.Receive()
		if err != nil {
			if err == unix.EINTR || err == unix.ENOBUFS {
				continue // ENOBUFS: the kernel dropped some; keep going
			}
			return err
		}
		for _, m := range msgs {
			if m.Header.Type != nfnlSubsysULOG<<8|nfulnlMsgPacket || len(m.Data) < nl.SizeofNfgenmsg {
				continue
			}
			attrs, err := nl.ParseRouteAttr(m.Data[nl.SizeofNfgenmsg:])
			if err != nil {
				continue
			}
			var prefix string
			var payload []byte
			for _, a := range attrs {
				switch a.Attr.Type & nlaTypeMask {
				case nfulaPrefix:
					prefix = strings.TrimRight(string(a.Value), "\x00")
				case nfulaPayload:
					payload = a.Value
				}
			}
			fn(prefix, payload, nl.DeserializeNfgenmsg(m.Data).NfgenFamily)
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
