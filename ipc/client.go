package main

// The Lazy Pirate loop: keep trying until the deadline rather than hang or
// fail on the first hiccup, because the core may be starting or restarting.

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

const (
	minBackoff = 50 * time.Millisecond
	maxBackoff = time.Second
	// After a dropped connection we resend, but only so often: a core that
	// drops every attempt is broken, not restarting.
	maxResends = 3
)

// payload is the part of the core's response envelope we print.
type payload struct {
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// call sends request and waits for the reply carrying correlation.
func call(socketPath string, request []byte, correlation string, timeout time.Duration) (*payload, *failure) {
	deadline := time.Now().Add(timeout)
	timedOut := &failure{"IPC_TIMEOUT",
		fmt.Sprintf("No response from core within %d ms", timeout.Milliseconds()), true, exitError}
	backoff := minBackoff
	sends := 0

	for {
		z, err := dialZMTP(socketPath, deadline)
		if err != nil {
			if f := transportFailure(err); f != nil {
				return nil, f
			}
			// Socket missing, refused, or closed mid-handshake: the core is
			// probably (re)starting. Wait a little, then try again.
			if !sleepUntil(backoff, deadline) {
				return nil, timedOut
			}
			if backoff *= 2; backoff > maxBackoff {
				backoff = maxBackoff
			}
			continue
		}

		sends++
		p, err := exchange(z, request, correlation)
		z.Close()
		if err == nil {
			return p, nil
		}
		if !time.Now().Before(deadline) {
			return nil, timedOut
		}
		if f := transportFailure(err); f != nil {
			return nil, f
		}
		if sends > maxResends {
			return nil, &failure{"IPC_TRANSPORT_ERROR",
				fmt.Sprintf("connection to core lost %d times", sends), true, exitError}
		}
		// The connection dropped after we sent: reconnect and resend at once
		// with the same correlation.
		backoff = minBackoff
	}
}

// exchange sends the request on an established connection and reads replies
// until one carries our correlation. Others are stale (an earlier request's
// answer) and are skipped.
func exchange(z *zmtpConn, request []byte, correlation string) (*payload, error) {
	if err := z.send(request); err != nil {
		return nil, err
	}
	for {
		body, err := z.recvMessage()
		if err != nil {
			return nil, err
		}
		var env struct {
			Correlation string   `json:"correlation"`
			Payload     *payload `json:"payload"`
		}
		if json.Unmarshal(body, &env) != nil || env.Correlation != correlation {
			continue
		}
		if env.Payload == nil {
			return nil, protocolErrorf("reply from core has no payload")
		}
		return env.Payload, nil
	}
}

// transportFailure returns a failure for errors that retrying can't fix, and
// nil for those it might (connection refused, reset, closed, heartbeat TTL).
func transportFailure(err error) *failure {
	var pe *protocolError
	if errors.As(err, &pe) {
		return &failure{"IPC_TRANSPORT_ERROR", pe.msg, false, exitError}
	}
	return nil
}

// sleepUntil sleeps for d, and reports false if the deadline comes first.
func sleepUntil(d time.Duration, deadline time.Time) bool {
	left := time.Until(deadline)
	if left <= 0 {
		return false
	}
	if d >= left {
		time.Sleep(left)
		return false
	}
	time.Sleep(d)
	return true
}
