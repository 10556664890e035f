//! The Lazy Pirate loop: keep trying until the deadline rather than hang or
//! fail on the first hiccup, because the core may be starting or restarting.

use std::collections::BTreeMap;
use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::value::RawValue;

use crate::zmtp::{self, Conn, Error};
use crate::{json, Failure, Outcome, EXIT_ERROR};

const MIN_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_secs(1);
/// After a dropped connection we resend, but only so often: a core that
/// drops every attempt is broken, not restarting.
const MAX_RESENDS: u32 = 3;

/// Sends `request` and waits for the reply carrying `correlation`.
/// The longest a pending confirmation may move the deadline (as CARAPACE_IPC_TIMEOUT_MS).
const MAX_WAIT: Duration = Duration::from_secs(24 * 60 * 60);

/// What the core sent us: the answer, or word that the request waits for a
/// person and how long the core may still take.
enum Reply {
    Done(Outcome),
    Pending(Duration),
}

pub fn call(path: &Path, request: &[u8], correlation: &str, timeout: Duration) -> Result<Outcome, Failure> {
    let started = Instant::now();
    let mut deadline = started + timeout;
    let timed_out = || {
        let message = format!("No response from core within {} ms", started.elapsed().as_millis());
        Failure::new("IPC_TIMEOUT", message, true, EXIT_ERROR)
    };
    let message = zmtp::message(request);
    let mut backoff = MIN_BACKOFF;
    let mut sends = 0;

    loop {
        let mut conn = match Conn::open(path, deadline) {
            Ok(conn) => conn,
            Err(e) => {
                fatal(e)?;
                // Socket missing, refused, or closed mid-handshake: the core is
                // probably (re)starting. Wait a little, then try again.
                if !sleep_until(backoff, deadline) {
                    return Err(timed_out());
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
                continue;
            }
        };

        sends += 1;
        match exchange(&mut conn, &message, correlation, &mut deadline) {
            Ok(outcome) => return Ok(outcome),
            Err(_) if Instant::now() >= deadline => return Err(timed_out()),
            Err(e) => fatal(e)?,
        }
        if sends > MAX_RESENDS {
            let message = format!("connection to core lost {} times", sends);
            return Err(Failure::new("IPC_TRANSPORT_ERROR", message, true, EXIT_ERROR));
        }
        // The connection dropped after the handshake: reconnect and resend at
        // once, with the same correlation.
        backoff = MIN_BACKOFF;
    }
}

/// Sends the request on an established connection and reads replies until
/// one carries our correlation. Others are stale (an earlier request's
/// answer) and are skipped.
/// A "pending" reply moves the deadline to what the core says it may still
/// take (never earlier, at most MAX_WAIT from now).
fn exchange(conn: &mut Conn, message: &[u8], correlation: &str, deadline: &mut Instant) -> Result<Outcome, Error> {
    conn.send(message)?;
    loop {
        let body = conn.recv_message()?;
        match parse_reply(&body, correlation) {
            Some(Ok(Reply::Done(outcome))) => return Ok(outcome),
            Some(Ok(Reply::Pending(wait))) => {
                let until = Instant::now() + wait.min(MAX_WAIT);
                if until > *deadline {
                    *deadline = until;
                    conn.extend(until);
                }
            }
            Some(Err(e)) => return Err(e),
            None => {}
        }
    }
}

/// The outcome a reply carries, or None if it is not a reply to us.
fn parse_reply(body: &[u8], correlation: &str) -> Option<Result<Reply, Error>> {
    // RawValue: check the JSON, but keep the exact bytes of what we print.
    // Option: a JSON null reads as absent.
    let envelope: BTreeMap<String, Option<&RawValue>> = serde_json::from_slice(body).ok()?;
    let theirs: String = serde_json::from_str(envelope.get("correlation").copied().flatten()?.get()).ok()?;
    if theirs != correlation {
        return None;
    }
    let payload = match envelope.get("payload").copied().flatten() {
        Some(p) => p,
        None if envelope.contains_key("pending") => return pending(envelope.get("pending").copied().flatten()),
        None => return Some(Err(Error::Protocol("reply from core has no payload".into()))),
    };
    let payload: BTreeMap<String, Option<&RawValue>> = serde_json::from_str(payload.get()).ok()?;
    let error = payload.get("error").copied().flatten();
    let raw = error.or_else(|| payload.get("result").copied().flatten()).map_or(&b"null"[..], |v| v.get().as_bytes());
    // Room for the newline it is printed with.
    let mut out = Vec::with_capacity(raw.len() + 1);
    json::compact(raw, &mut out);
    Some(Ok(Reply::Done(if error.is_some() { Outcome::Error(out) } else { Outcome::Result(out) })))
}

/// {"pending":{"wait_ms":N,...}}: the request waits for a person's confirmation.
fn pending(body: Option<&RawValue>) -> Option<Result<Reply, Error>> {
    let bad = || Some(Err(Error::Protocol("malformed pending notice from core".into())));
    let fields: BTreeMap<String, Option<&RawValue>> = match body.map(|b| serde_json::from_str(b.get())) {
        Some(Ok(fields)) => fields,
        _ => return bad(),
    };
    match fields.get("wait_ms").copied().flatten().map(|v| serde_json::from_str::<u64>(v.get())) {
        Some(Ok(ms)) => Some(Ok(Reply::Pending(Duration::from_millis(ms)))),
        _ => bad(),
    }
}

/// A failure for errors that retrying can't fix; Ok for those it might
/// (connection refused, reset, closed, heartbeat TTL expired).
fn fatal(e: Error) -> Result<(), Failure> {
    match e {
        Error::Protocol(message) => Err(Failure::new("IPC_TRANSPORT_ERROR", message, false, EXIT_ERROR)),
        Error::Io(_) => Ok(()),
    }
}

/// Sleeps for `d`, and reports false if the deadline comes first.
fn sleep_until(d: Duration, deadline: Instant) -> bool {
    let left = deadline.saturating_duration_since(Instant::now());
    thread::sleep(d.min(left));
    d < left
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(body: &str) -> Option<Result<Outcome, Error>> {
        parse_reply(body.as_bytes(), "c-1").map(|r| {
            r.and_then(|r| match r {
                Reply::Done(o) => Ok(o),
                Reply::Pending(_) => Err(Error::Protocol("pending".into())),
            })
        })
    }

    #[test]
    fn reads_a_pending_notice_and_refuses_a_malformed_one() {
        let wait = |body: &str| match parse_reply(body.as_bytes(), "c-1") {
            Some(Ok(Reply::Pending(d))) => Some(d),
            _ => None,
        };
        assert_eq!(wait(r#"{"correlation":"c-1","pending":{"confirmation":"x","wait_ms":330000}}"#), Some(Duration::from_millis(330_000)));
        assert!(parse_reply(br#"{"correlation":"c-2","pending":{"wait_ms":1}}"#, "c-1").is_none());
        for bad in [r#"{"correlation":"c-1","pending":{"wait_ms":-1}}"#, r#"{"correlation":"c-1","pending":5}"#, r#"{"correlation":"c-1","pending":null}"#] {
            assert!(matches!(parse_reply(bad.as_bytes(), "c-1"), Some(Err(Error::Protocol(_)))), "{}", bad);
        }
    }

    #[test]
    fn prints_exact_bytes_of_result_or_error() {
        match outcome(r#"{"correlation":"c-1","payload":{"result":{"n": 1e+21, "x":2.50},"error":null}}"#) {
            Some(Ok(Outcome::Result(r))) => assert_eq!(r, br#"{"n":1e+21,"x":2.50}"#),
            _ => panic!("want a result"),
        }
        match outcome(r#"{"payload":{"error":{"code":"E","message":"<&>"}},"correlation":"c-1"}"#) {
            Some(Ok(Outcome::Error(e))) => assert_eq!(e, br#"{"code":"E","message":"<&>"}"#),
            _ => panic!("want an error"),
        }
        match outcome(r#"{"correlation":"c-1","payload":{}}"#) {
            Some(Ok(Outcome::Result(r))) => assert_eq!(r, b"null"),
            _ => panic!("want a null result"),
        }
    }

    #[test]
    fn skips_what_is_not_ours_and_refuses_a_missing_payload() {
        for other in ["not json", "null", r#"{"correlation":"c-2","payload":{}}"#, r#"{"correlation":1}"#, r#"{"correlation":"c-1","payload":5}"#] {
            assert!(outcome(other).is_none(), "{}", other);
        }
        assert!(matches!(outcome(r#"{"correlation":"c-1"}"#), Some(Err(Error::Protocol(_)))));
        assert!(matches!(outcome(r#"{"correlation":"c-1","payload":null}"#), Some(Err(Error::Protocol(_)))));
    }
}
