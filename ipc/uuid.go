package main

import (
	"crypto/rand"
	"fmt"
)

// newCorrelation returns a random (version 4) UUID. The core matches its reply
// to our request by this value, and a resend after a reconnect reuses it so the
// core can recognise the duplicate.
func newCorrelation() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // RFC 4122 variant
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), nil
}
