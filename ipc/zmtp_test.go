package main

// Edge cases that a well-behaved libzmq peer won't produce on demand; the
// interop tests in test/ipc.test.ts cover the normal paths.

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// fakeRouter does the peer's half of the handshake on the far end of a pipe.
func fakeRouter(t *testing.T, deadline time.Time) (*zmtpConn, *zmtpConn) {
	client, server := net.Pipe()
	peer := &zmtpConn{conn: server, r: bufio.NewReader(server), deadline: deadline}
	go func() {
		var g [64]byte
		io.ReadFull(peer.r, g[:])
		server.Write(g[:]) // our own greeting is an acceptable reply
		peer.readFrame()   // client's READY
		peer.writeCommand("READY", property("Socket-Type", "ROUTER"))
	}()
	z := &zmtpConn{conn: client, r: bufio.NewReader(client), deadline: deadline}
	if err := z.handshake(); err != nil {
		t.Fatalf("handshake: %v", err)
	}
	return z, peer
}

func TestPingGetsPongAndDelimiterIsSkipped(t *testing.T) {
	z, peer := fakeRouter(t, time.Now().Add(2*time.Second))
	go func() {
		peer.writeCommand("PING", []byte{0, 0, 'c', 't', 'x'})
		peer.writeCommand("HELLO", nil) // unknown: must be ignored
		peer.writeFrame(flagMore, nil)
		peer.writeFrame(0, []byte("body"))
	}()
	done := make(chan []byte)
	go func() { _, body, _ := peer.readFrame(); done <- body }()
	msg, err := z.recvMessage()
	if err != nil || string(msg) != "body" {
		t.Fatalf("got %q, %v", msg, err)
	}
	if pong := <-done; string(pong) != "\x04PONGctx" {
		t.Fatalf("pong = %q", pong)
	}
}

func TestSilenceBeyondPingTTLDropsConnection(t *testing.T) {
	deadline := time.Now().Add(5 * time.Second)
	z, peer := fakeRouter(t, deadline)
	go func() {
		peer.writeCommand("PING", []byte{0, 1}) // TTL 100 ms, then silence
		peer.readFrame()                        // swallow the PONG
	}()
	start := time.Now()
	_, err := z.recvMessage()
	if !errors.Is(err, os.ErrDeadlineExceeded) || time.Since(start) > time.Second {
		t.Fatalf("want TTL expiry after ~100ms, got %v after %v", err, time.Since(start))
	}
	if transportFailure(err) != nil {
		t.Fatal("TTL expiry must be retried, not fatal")
	}
}

func TestOversizedFrameIsRefused(t *testing.T) {
	z, peer := fakeRouter(t, time.Now().Add(2*time.Second))
	go func() {
		hdr := make([]byte, 9)
		hdr[0] = flagLong
		binary.BigEndian.PutUint64(hdr[1:], maxFrameSize+1)
		peer.conn.Write(hdr)
	}()
	_, err := z.recvMessage()
	if transportFailure(err) == nil {
		t.Fatalf("want a fatal protocol error, got %v", err)
	}
}
