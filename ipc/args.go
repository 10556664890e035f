package main

// Checking the caller's input and building the one request frame. These
// checks are a courtesy to the agent (clear errors early); the core enforces
// its own limits independently.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

const (
	defaultEndpoint = "ipc:///run/carapace/carapace.sock"
	defaultTimeout  = 35 * time.Second // must exceed the core's 30 s handler timeout
	maxTimeoutMs    = 24 * 60 * 60 * 1000
	maxTopicLen     = 256
	maxRequestSize  = 1 << 20 // the whole request frame
	// Stdin may hold more than a request's worth of whitespace, but not this much.
	maxStdinSize = 8 << 20
)

func usageFailure(msg string) *failure {
	return &failure{"IPC_USAGE", msg, false, exitUsage}
}

func checkTopic(topic string) *failure {
	if topic == "" || len(topic) > maxTopicLen {
		return usageFailure(fmt.Sprintf("topic must be 1 to %d bytes long", maxTopicLen))
	}
	for i := 0; i < len(topic); i++ {
		if topic[i] < 0x20 || topic[i] > 0x7e {
			return usageFailure("topic must be printable ASCII")
		}
	}
	return nil
}

// socketPath turns CARAPACE_IPC_ENDPOINT into a unix socket path. Only ipc://
// makes sense: the container has no network, only the mounted socket.
func socketPath() (string, *failure) {
	endpoint := os.Getenv("CARAPACE_IPC_ENDPOINT")
	if endpoint == "" {
		endpoint = defaultEndpoint
	}
	path := strings.TrimPrefix(endpoint, "ipc://")
	if path == endpoint || path == "" {
		return "", usageFailure("CARAPACE_IPC_ENDPOINT must be an ipc:// endpoint")
	}
	if len(path) > 107 { // sun_path is 108 bytes including the NUL
		return "", usageFailure("CARAPACE_IPC_ENDPOINT path is too long for a unix socket")
	}
	return path, nil
}

func timeout() (time.Duration, *failure) {
	s := os.Getenv("CARAPACE_IPC_TIMEOUT_MS")
	if s == "" {
		return defaultTimeout, nil
	}
	ms, err := strconv.Atoi(s)
	if err != nil || ms < 1 || ms > maxTimeoutMs {
		return 0, usageFailure(fmt.Sprintf(
			"CARAPACE_IPC_TIMEOUT_MS must be an integer from 1 to %d", maxTimeoutMs))
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// readArguments returns the arguments JSON object from argv, or from stdin
// when the argument is "-" (one argv string is capped at 128 KiB on Linux).
func readArguments(arg string, stdin io.Reader) ([]byte, *failure) {
	raw := []byte(arg)
	if arg == "-" {
		var err error
		raw, err = io.ReadAll(io.LimitReader(stdin, maxStdinSize+1))
		if err != nil {
			return nil, &failure{"IPC_USAGE", "cannot read arguments from stdin", false, exitUsage}
		}
		if len(raw) > maxStdinSize {
			return nil, tooLarge(len(raw))
		}
	}
	raw = bytes.Trim(raw, " \t\r\n")
	if !json.Valid(raw) {
		msg := "arguments are not valid JSON"
		var v json.RawMessage
		if se, ok := json.Unmarshal(raw, &v).(*json.SyntaxError); ok {
			msg += fmt.Sprintf(" (error at byte %d)", se.Offset)
		}
		return nil, &failure{"IPC_INVALID_JSON", msg, false, exitUsage}
	}
	if raw[0] != '{' {
		return nil, &failure{"IPC_INVALID_JSON", "arguments must be a JSON object", false, exitUsage}
	}
	if !utf8.Valid(raw) {
		return nil, &failure{"IPC_INVALID_JSON", "arguments are not valid UTF-8", false, exitUsage}
	}
	// Compact only drops insignificant whitespace; every token, numbers
	// included, keeps its exact bytes.
	var buf bytes.Buffer
	buf.Grow(len(raw))
	if err := json.Compact(&buf, raw); err != nil {
		return nil, &failure{"IPC_INVALID_JSON", "arguments are not valid JSON", false, exitUsage}
	}
	return buf.Bytes(), nil
}

// buildRequest makes the wire message: {topic, correlation, arguments}. The
// core derives everything else (who we are, which group) from the connection.
func buildRequest(topic, correlation string, arguments []byte) ([]byte, *failure) {
	t, _ := json.Marshal(topic)
	req := make([]byte, 0, len(arguments)+len(t)+96)
	req = append(req, `{"topic":`...)
	req = append(req, t...)
	req = append(req, `,"correlation":"`...)
	req = append(req, correlation...)
	req = append(req, `","arguments":`...)
	req = append(req, arguments...)
	req = append(req, '}')
	if len(req) > maxRequestSize {
		return nil, tooLarge(len(req))
	}
	return req, nil
}

func tooLarge(n int) *failure {
	return &failure{"REQUEST_TOO_LARGE",
		fmt.Sprintf("request is %d bytes; the limit is %d", n, maxRequestSize), false, exitUsage}
}
