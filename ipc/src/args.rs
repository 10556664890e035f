//! Checking the caller's input and building the one request frame. These
//! checks are a courtesy to the agent (clear errors early); the core enforces
//! its own limits independently.

use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::time::Duration;

use crate::{json, Failure, EXIT_USAGE};

const DEFAULT_ENDPOINT: &str = "ipc:///run/carapace/carapace.sock";
const DEFAULT_TIMEOUT_MS: u64 = 35_000; // must exceed the core's 30 s handler timeout
const MAX_TIMEOUT_MS: i64 = 24 * 60 * 60 * 1000;
const MAX_TOPIC_LEN: usize = 256;
const MAX_REQUEST_SIZE: usize = 1 << 20; // the whole request frame
/// Stdin may hold more than a request's worth of whitespace, but not this much.
const MAX_STDIN_SIZE: usize = 8 << 20;
/// sun_path is 108 bytes including the NUL.
const MAX_SOCKET_PATH: usize = 107;

pub fn usage(message: impl Into<String>) -> Failure {
    Failure::new("IPC_USAGE", message, false, EXIT_USAGE)
}

fn invalid_json(message: impl Into<String>) -> Failure {
    Failure::new("IPC_INVALID_JSON", message, false, EXIT_USAGE)
}

fn too_large(n: usize) -> Failure {
    let message = format!("request is {} bytes; the limit is {}", n, MAX_REQUEST_SIZE);
    Failure::new("REQUEST_TOO_LARGE", message, false, EXIT_USAGE)
}

/// Returns the topic as text once it is known to be printable ASCII.
pub fn check_topic(topic: &OsStr) -> Result<&str, Failure> {
    let bytes = topic.as_bytes();
    if bytes.is_empty() || bytes.len() > MAX_TOPIC_LEN {
        return Err(usage(format!("topic must be 1 to {} bytes long", MAX_TOPIC_LEN)));
    }
    match topic.to_str() {
        Some(t) if bytes.iter().all(|&b| (0x20..=0x7e).contains(&b)) => Ok(t),
        _ => Err(usage("topic must be printable ASCII")),
    }
}

/// Turns CARAPACE_IPC_ENDPOINT into a unix socket path. Only ipc:// makes
/// sense: the container has no network, only the mounted socket.
pub fn socket_path() -> Result<PathBuf, Failure> {
    let endpoint = std::env::var_os("CARAPACE_IPC_ENDPOINT")
        .filter(|e| !e.is_empty())
        .unwrap_or_else(|| OsString::from(DEFAULT_ENDPOINT));
    let path = match endpoint.as_bytes().strip_prefix(b"ipc://") {
        Some(p) if !p.is_empty() => p,
        _ => return Err(usage("CARAPACE_IPC_ENDPOINT must be an ipc:// endpoint")),
    };
    if path.len() > MAX_SOCKET_PATH {
        return Err(usage("CARAPACE_IPC_ENDPOINT path is too long for a unix socket"));
    }
    Ok(PathBuf::from(OsStr::from_bytes(path)))
}

pub fn timeout() -> Result<Duration, Failure> {
    let ms = match std::env::var_os("CARAPACE_IPC_TIMEOUT_MS").filter(|s| !s.is_empty()) {
        None => return Ok(Duration::from_millis(DEFAULT_TIMEOUT_MS)),
        // Like Go's strconv.Atoi: decimal, an optional sign, nothing else.
        Some(s) => s.to_str().and_then(|s| s.parse::<i64>().ok()),
    };
    match ms {
        Some(ms) if (1..=MAX_TIMEOUT_MS).contains(&ms) => Ok(Duration::from_millis(ms as u64)),
        _ => Err(usage(format!(
            "CARAPACE_IPC_TIMEOUT_MS must be an integer from 1 to {}",
            MAX_TIMEOUT_MS
        ))),
    }
}

/// Returns the arguments JSON object, compacted, from argv or from stdin when
/// the argument is "-" (one argv string is capped at 128 KiB on Linux).
pub fn read_arguments(arg: &OsStr) -> Result<Vec<u8>, Failure> {
    let stdin_buf;
    let raw = if arg == "-" {
        stdin_buf = read_stdin()?;
        &stdin_buf[..]
    } else {
        arg.as_bytes()
    };
    // Never quote the arguments in an error: they may hold secrets.
    let text = std::str::from_utf8(raw).map_err(|_| invalid_json("arguments are not valid UTF-8"))?;
    // JSON's whitespace only: str::trim would also drop other Unicode spaces.
    let text = text.trim_matches(&[' ', '\t', '\r', '\n'][..]);
    if let Err(e) = json::validate(text) {
        let at = json::error_offset(text, &e);
        return Err(invalid_json(format!("arguments are not valid JSON (error at byte {})", at)));
    }
    if !text.starts_with('{') {
        return Err(invalid_json("arguments must be a JSON object"));
    }
    let mut compacted = Vec::new();
    json::compact(text.as_bytes(), &mut compacted);
    Ok(compacted)
}

fn read_stdin() -> Result<Vec<u8>, Failure> {
    let mut buf = Vec::new();
    let limit = MAX_STDIN_SIZE as u64 + 1;
    if std::io::stdin().lock().take(limit).read_to_end(&mut buf).is_err() {
        return Err(usage("cannot read arguments from stdin"));
    }
    if buf.len() > MAX_STDIN_SIZE {
        return Err(too_large(buf.len()));
    }
    Ok(buf)
}

/// Makes the wire message: {topic, correlation, arguments}. The core derives
/// everything else (who we are, which group) from the connection.
pub fn build_request(topic: &str, correlation: &str, arguments: &[u8]) -> Result<Vec<u8>, Failure> {
    let mut req = Vec::with_capacity(arguments.len() + topic.len() + 96);
    req.extend_from_slice(b"{\"topic\":");
    quote_topic(topic, &mut req);
    req.extend_from_slice(b",\"correlation\":\"");
    req.extend_from_slice(correlation.as_bytes());
    req.extend_from_slice(b"\",\"arguments\":");
    req.extend_from_slice(arguments);
    req.push(b'}');
    if req.len() > MAX_REQUEST_SIZE {
        return Err(too_large(req.len()));
    }
    Ok(req)
}

/// Quotes a printable-ASCII topic exactly as Go's json.Marshal did, HTML
/// escapes included, so the core sees the same bytes as before.
fn quote_topic(topic: &str, out: &mut Vec<u8>) {
    out.push(b'"');
    for b in topic.bytes() {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'<' => out.extend_from_slice(b"\\u003c"),
            b'>' => out.extend_from_slice(b"\\u003e"),
            b'&' => out.extend_from_slice(b"\\u0026"),
            _ => out.push(b),
        }
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_keeps_argument_bytes_and_quotes_topic_like_go() {
        let args = read_arguments(OsStr::new(" {\"n\": 12345678901234567890, \"x\": 2.50}\n")).unwrap();
        let req = build_request("a\"<b>&\\", "c0ffee", &args).unwrap();
        assert_eq!(
            String::from_utf8(req).unwrap(),
            r#"{"topic":"a\"\u003cb\u003e\u0026\\","correlation":"c0ffee","arguments":{"n":12345678901234567890,"x":2.50}}"#
        );
    }

    #[test]
    fn arguments_must_be_one_object() {
        for (arg, code) in [("[1]", "IPC_INVALID_JSON"), ("\"x\"", "IPC_INVALID_JSON"), ("", "IPC_INVALID_JSON"), ("{} {}", "IPC_INVALID_JSON")] {
            let f = read_arguments(OsStr::new(arg)).unwrap_err();
            assert_eq!((f.code, f.exit), (code, EXIT_USAGE), "{:?}", arg);
        }
        let f = read_arguments(OsStr::new("{\"password\":\"hunter2\",")).unwrap_err();
        assert_eq!(f.message, "arguments are not valid JSON (error at byte 22)");
    }

    #[test]
    fn topic_checks() {
        assert!(check_topic(OsStr::new("tool.invoke.echo")).is_ok());
        for bad in ["", "tool\ninvoke", "caf\u{e9}", &"t".repeat(257)] {
            assert_eq!(check_topic(OsStr::new(bad)).unwrap_err().code, "IPC_USAGE");
        }
    }
}
