package main

// The small part of ZMTP 3.1 (https://rfc.zeromq.org/spec/37/) that a DEALER
// needs to talk to the core's libzmq ROUTER with the NULL mechanism: greeting,
// READY, frames, and PING/PONG. We write it ourselves because the binary must
// be static and built from Go's standard library alone.

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

const (
	flagMore    = 0x01
	flagLong    = 0x02
	flagCommand = 0x04

	// Replies are at most ~1.1 MiB (1 MB payload plus envelope); anything far
	// beyond that is a broken or hostile peer, so don't allocate for it.
	maxFrameSize = 8 << 20
)

// protocolError means the peer broke the protocol. Reconnecting to the same
// peer won't help, so the client gives up instead of retrying.
type protocolError struct{ msg string }

func (e *protocolError) Error() string { return e.msg }

func protocolErrorf(format string, a ...interface{}) error {
	return &protocolError{fmt.Sprintf(format, a...)}
}

type zmtpConn struct {
	conn     net.Conn
	r        *bufio.Reader
	deadline time.Time     // the caller's overall deadline
	ttl      time.Duration // from the peer's last PING: drop the link if silent this long
}

// dialZMTP connects to a unix socket and completes the ZMTP handshake as a DEALER.
func dialZMTP(path string, deadline time.Time) (*zmtpConn, error) {
	d := net.Dialer{Deadline: deadline}
	conn, err := d.Dial("unix", path)
	if err != nil {
		return nil, err
	}
	z := &zmtpConn{conn: conn, r: bufio.NewReader(conn), deadline: deadline}
	conn.SetWriteDeadline(deadline)
	if err := z.handshake(); err != nil {
		conn.Close()
		return nil, err
	}
	return z, nil
}

func (z *zmtpConn) Close() error { return z.conn.Close() }

func (z *zmtpConn) handshake() error {
	// Signature, version 3.1, mechanism NULL, as-server 0, zero filler: 64 bytes.
	var greeting [64]byte
	greeting[0], greeting[9] = 0xff, 0x7f
	greeting[10], greeting[11] = 3, 1
	copy(greeting[12:32], "NULL")
	if _, err := z.conn.Write(greeting[:]); err != nil {
		return err
	}

	var peer [64]byte
	z.setReadDeadline()
	if _, err := io.ReadFull(z.r, peer[:]); err != nil {
		return err
	}
	if peer[0] != 0xff || peer[9] != 0x7f {
		return protocolErrorf("peer is not speaking ZMTP")
	}
	if peer[10] < 3 {
		return protocolErrorf("peer speaks ZMTP %d.%d, need 3.x", peer[10], peer[11])
	}
	if !bytes.Equal(peer[12:32], greeting[12:32]) {
		return protocolErrorf("peer wants security mechanism %q, we only speak NULL",
			strings.TrimRight(string(peer[12:32]), "\x00"))
	}

	if err := z.writeCommand("READY", property("Socket-Type", "DEALER")); err != nil {
		return err
	}
	// Wait for the peer's READY; nothing else may come first but commands.
	for {
		flags, body, err := z.readFrame()
		if err != nil {
			return err
		}
		if flags&flagCommand == 0 {
			return protocolErrorf("peer sent a message before READY")
		}
		name, data := splitCommand(body)
		switch name {
		case "READY":
			props, err := parseProperties(data)
			if err != nil {
				return err
			}
			switch t := props["socket-type"]; t {
			case "ROUTER", "DEALER", "REP": // the types a DEALER may talk to
				return nil
			default:
				return protocolErrorf("peer socket type %q cannot talk to a DEALER", t)
			}
		case "ERROR":
			return protocolErrorf("peer refused the handshake: %s", errorReason(data))
		}
		// Unknown commands are ignored, as the spec asks.
	}
}

// recvMessage returns the last frame of the next message, answering any
// commands (PING) that arrive on the way. The ROUTER may or may not put an
// empty delimiter in front of the body; taking the last frame covers both.
func (z *zmtpConn) recvMessage() ([]byte, error) {
	var last []byte
	total := 0
	for {
		flags, body, err := z.readFrame()
		if err != nil {
			return nil, err
		}
		if flags&flagCommand != 0 {
			if err := z.handleCommand(body); err != nil {
				return nil, err
			}
			continue
		}
		if total += len(body); total > maxFrameSize {
			return nil, protocolErrorf("reply from core exceeds %d bytes", maxFrameSize)
		}
		last = body
		if flags&flagMore == 0 {
			return last, nil
		}
	}
}

func (z *zmtpConn) handleCommand(body []byte) error {
	name, data := splitCommand(body)
	switch name {
	case "PING":
		// libzmq drops peers that stay silent after its PING (heartbeatTimeout),
		// so answer at once, echoing the context as the spec requires.
		if len(data) < 2 {
			return protocolErrorf("malformed PING")
		}
		z.ttl = time.Duration(binary.BigEndian.Uint16(data[:2])) * 100 * time.Millisecond
		context := data[2:]
		if len(context) > 16 {
			context = context[:16]
		}
		return z.writeCommand("PONG", context)
	case "ERROR":
		return protocolErrorf("peer reported an error: %s", errorReason(data))
	}
	return nil // unknown commands (PONG, SUBSCRIBE, ...) are ignored
}

// send writes one single-frame message.
func (z *zmtpConn) send(body []byte) error {
	return z.writeFrame(0, body)
}

func (z *zmtpConn) writeCommand(name string, data []byte) error {
	body := make([]byte, 0, 1+len(name)+len(data))
	body = append(body, byte(len(name)))
	body = append(body, name...)
	body = append(body, data...)
	return z.writeFrame(flagCommand, body)
}

func (z *zmtpConn) writeFrame(flags byte, body []byte) error {
	var hdr []byte
	if len(body) <= 255 {
		hdr = []byte{flags, byte(len(body))}
	} else {
		hdr = make([]byte, 9)
		hdr[0] = flags | flagLong
		binary.BigEndian.PutUint64(hdr[1:], uint64(len(body)))
	}
	// writev: no copy of a large request just to prepend nine bytes.
	bufs := net.Buffers{hdr, body}
	_, err := bufs.WriteTo(z.conn)
	return err
}

func (z *zmtpConn) readFrame() (flags byte, body []byte, err error) {
	z.setReadDeadline()
	if flags, err = z.r.ReadByte(); err != nil {
		return 0, nil, err
	}
	var size uint64
	if flags&flagLong != 0 {
		var b [8]byte
		if _, err = io.ReadFull(z.r, b[:]); err != nil {
			return 0, nil, err
		}
		size = binary.BigEndian.Uint64(b[:])
	} else {
		b, err := z.r.ReadByte()
		if err != nil {
			return 0, nil, err
		}
		size = uint64(b)
	}
	if size > maxFrameSize {
		return 0, nil, protocolErrorf("frame of %d bytes from core exceeds %d", size, maxFrameSize)
	}
	body = make([]byte, size)
	if _, err = io.ReadFull(z.r, body); err != nil {
		return 0, nil, err
	}
	return flags, body, nil
}

// setReadDeadline bounds the next read by the overall deadline and, if the
// peer announced a heartbeat TTL, by that TTL: a peer that has gone silent
// longer than it promised is treated as a dropped connection.
func (z *zmtpConn) setReadDeadline() {
	d := z.deadline
	if z.ttl > 0 {
		if t := time.Now().Add(z.ttl); t.Before(d) {
			d = t
		}
	}
	z.conn.SetReadDeadline(d)
}

// splitCommand splits a command frame into its name and data.
func splitCommand(body []byte) (string, []byte) {
	if len(body) == 0 || int(body[0]) > len(body)-1 {
		return "", nil
	}
	n := int(body[0])
	return string(body[1 : 1+n]), body[1+n:]
}

func property(name, value string) []byte {
	p := []byte{byte(len(name))}
	p = append(p, name...)
	p = binary.BigEndian.AppendUint32(p, uint32(len(value)))
	return append(p, value...)
}

// parseProperties decodes READY metadata; names are case-insensitive.
func parseProperties(data []byte) (map[string]string, error) {
	props := map[string]string{}
	for len(data) > 0 {
		n := int(data[0])
		if len(data) < 1+n+4 {
			return nil, protocolErrorf("malformed READY")
		}
		name := strings.ToLower(string(data[1 : 1+n]))
		size := binary.BigEndian.Uint32(data[1+n:])
		data = data[1+n+4:]
		if uint64(size) > uint64(len(data)) {
			return nil, protocolErrorf("malformed READY")
		}
		props[name] = string(data[:size])
		data = data[size:]
	}
	return props, nil
}

// errorReason extracts the reason of an ERROR command, made safe to print.
func errorReason(data []byte) string {
	if len(data) == 0 || int(data[0]) > len(data)-1 {
		return "(no reason)"
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return '?'
		}
		return r
	}, string(data[1:1+int(data[0])]))
}
