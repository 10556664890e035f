//! The small part of ZMTP 3.1 (https://rfc.zeromq.org/spec/37/) that a DEALER
//! needs to talk to the core's libzmq ROUTER with the NULL mechanism: greeting,
//! READY, frames, and PING/PONG. Written here rather than linking libzmq so the
//! binary stays small, static and quick to start.
//!
//! Our half of the handshake (greeting and READY) goes out in one write
//! before we read anything: the NULL mechanism has nothing to negotiate, so
//! this saves the round trip a step-by-step handshake waits for. The request
//! itself must wait for the peer's READY: libzmq drops a connection whose
//! first message arrives before it has sent its own READY (it takes the
//! message for a second handshake command).

use std::io::{self, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

const FLAG_MORE: u8 = 0x01;
const FLAG_LONG: u8 = 0x02;
const FLAG_COMMAND: u8 = 0x04;

/// Replies are at most ~1.1 MiB (1 MB payload plus envelope); anything far
/// beyond that is a broken or hostile peer, so don't allocate for it.
const MAX_FRAME_SIZE: u64 = 8 << 20;

const MECHANISM_NULL: [u8; 20] = *b"NULL\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0";

#[derive(Debug)]
pub enum Error {
    /// Refused, reset, closed, timed out: the core may be (re)starting, so
    /// the caller tries again.
    Io(io::Error),
    /// The peer broke the protocol. Reconnecting to the same peer won't help,
    /// so the caller gives up instead of retrying.
    Protocol(String),
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Error {
        Error::Io(e)
    }
}

/// Our half of the handshake: greeting (signature, version 3.1, mechanism
/// NULL, as-server 0, zero filler: 64 bytes) and READY as a DEALER.
fn hello() -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + 30);
    out.extend_from_slice(&[0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0x7f, 3, 1]);
    out.extend_from_slice(&MECHANISM_NULL);
    out.resize(64, 0);
    push_frame(&mut out, FLAG_COMMAND, &command("READY", &property("Socket-Type", "DEALER")));
    out
}

/// `body` as a single-frame message on the wire, built once and resent as is.
pub fn message(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(9 + body.len());
    push_frame(&mut out, 0, body);
    out
}

/// The socket, every read and write bounded by the caller's overall deadline,
/// reads also by the heartbeat TTL of the peer's last PING: a peer that stays
/// silent longer than it promised is treated as a dropped connection.
struct Link {
    sock: UnixStream,
    deadline: Instant,
    ttl: Option<Duration>,
}

impl Link {
    fn time_left(&self) -> io::Result<Duration> {
        match self.deadline.checked_duration_since(Instant::now()) {
            Some(left) if !left.is_zero() => Ok(left),
            _ => Err(io::ErrorKind::TimedOut.into()),
        }
    }
}

impl Read for Link {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.time_left()?;
        let wait = self.ttl.map_or(left, |ttl| ttl.min(left));
        self.sock.set_read_timeout(Some(wait))?;
        self.sock.read(buf)
    }
}

impl Write for Link {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.sock.set_write_timeout(Some(self.time_left()?))?;
        self.sock.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

pub struct Conn {
    link: BufReader<Link>,
}

impl Conn {
    /// Connects to the unix socket at `path` and completes the handshake as
    /// a DEALER.
    pub fn open(path: &Path, deadline: Instant) -> Result<Conn, Error> {
        Conn::start(UnixStream::connect(path)?, deadline)
    }

    fn start(sock: UnixStream, deadline: Instant) -> Result<Conn, Error> {
        let mut conn = Conn { link: BufReader::new(Link { sock, deadline, ttl: None }) };
        conn.link.get_mut().write_all(&hello())?;
        conn.handshake()?;
        Ok(conn)
    }

    /// Moves the deadline every read and write is bounded by (a request
    /// pending a person's confirmation waits longer).
    pub fn extend(&mut self, deadline: Instant) {
        self.link.get_mut().deadline = deadline;
    }

    /// Sends a message made by `message`.
    pub fn send(&mut self, message: &[u8]) -> Result<(), Error> {
        Ok(self.link.get_mut().write_all(message)?)
    }

    fn handshake(&mut self) -> Result<(), Error> {
        let mut peer = [0u8; 64];
        self.link.read_exact(&mut peer)?;
        if peer[0] != 0xff || peer[9] != 0x7f {
            return protocol("peer is not speaking ZMTP".into());
        }
        if peer[10] < 3 {
            return protocol(format!("peer speaks ZMTP {}.{}, need 3.x", peer[10], peer[11]));
        }
        if peer[12..32] != MECHANISM_NULL {
            let name = String::from_utf8_lossy(&peer[12..32]);
            let name = name.trim_end_matches('\0');
            return protocol(format!("peer wants security mechanism {:?}, we only speak NULL", name));
        }

        // Wait for the peer's READY; nothing else may come first but commands.
        loop {
            let (flags, body) = self.read_frame()?;
            if flags & FLAG_COMMAND == 0 {
                return protocol("peer sent a message before READY".into());
            }
            match split_command(&body) {
                ("READY", data) => {
                    return match socket_type(data)?.as_str() {
                        "ROUTER" | "DEALER" | "REP" => Ok(()), // the types a DEALER may talk to
                        t => protocol(format!("peer socket type {:?} cannot talk to a DEALER", t)),
                    };
                }
                ("ERROR", data) => {
                    return protocol(format!("peer refused the handshake: {}", error_reason(data)));
                }
                _ => {} // unknown commands are ignored, as the spec asks
            }
        }
    }

    /// Returns the last frame of the next message, answering any commands
    /// (PING) that arrive on the way. The ROUTER may or may not put an empty
    /// delimiter in front of the body; taking the last frame covers both.
    pub fn recv_message(&mut self) -> Result<Vec<u8>, Error> {
        let mut total = 0u64;
        loop {
            let (flags, body) = self.read_frame()?;
            if flags & FLAG_COMMAND != 0 {
                self.handle_command(&body)?;
                continue;
            }
            total += body.len() as u64;
            if total > MAX_FRAME_SIZE {
                return protocol(format!("reply from core exceeds {} bytes", MAX_FRAME_SIZE));
            }
            if flags & FLAG_MORE == 0 {
                return Ok(body);
            }
        }
    }

    fn handle_command(&mut self, body: &[u8]) -> Result<(), Error> {
        match split_command(body) {
            ("PING", data) => {
                // libzmq drops peers that stay silent after its PING
                // (heartbeatTimeout), so answer at once, echoing the context
                // as the spec requires.
                if data.len() < 2 {
                    return protocol("malformed PING".into());
                }
                let ttl = u64::from(u16::from_be_bytes([data[0], data[1]])) * 100;
                self.link.get_mut().ttl = Some(Duration::from_millis(ttl)).filter(|t| !t.is_zero());
                let context = &data[2..data.len().min(2 + 16)];
                let mut pong = Vec::with_capacity(2 + 5 + context.len());
                push_frame(&mut pong, FLAG_COMMAND, &command("PONG", context));
                self.link.get_mut().write_all(&pong)?;
                Ok(())
            }
            ("ERROR", data) => protocol(format!("peer reported an error: {}", error_reason(data))),
            _ => Ok(()), // unknown commands (PONG, SUBSCRIBE, ...) are ignored
        }
    }

    fn read_frame(&mut self) -> Result<(u8, Vec<u8>), Error> {
        let mut flags = [0u8; 1];
        self.link.read_exact(&mut flags)?;
        let flags = flags[0];
        let size = if flags & FLAG_LONG != 0 {
            let mut b = [0u8; 8];
            self.link.read_exact(&mut b)?;
            u64::from_be_bytes(b)
        } else {
            let mut b = [0u8; 1];
            self.link.read_exact(&mut b)?;
            u64::from(b[0])
        };
        if size > MAX_FRAME_SIZE {
            return protocol(format!("frame of {} bytes from core exceeds {}", size, MAX_FRAME_SIZE));
        }
        let mut body = vec![0u8; size as usize];
        self.link.read_exact(&mut body)?;
        Ok((flags, body))
    }
}

fn protocol<T>(message: String) -> Result<T, Error> {
    Err(Error::Protocol(message))
}

fn push_frame(out: &mut Vec<u8>, flags: u8, body: &[u8]) {
    match u8::try_from(body.len()) {
        Ok(short) => out.extend_from_slice(&[flags, short]),
        Err(_) => {
            out.push(flags | FLAG_LONG);
            out.extend_from_slice(&(body.len() as u64).to_be_bytes());
        }
    }
    out.extend_from_slice(body);
}

fn command(name: &str, data: &[u8]) -> Vec<u8> {
    let mut body = Vec::with_capacity(1 + name.len() + data.len());
    body.push(name.len() as u8);
    body.extend_from_slice(name.as_bytes());
    body.extend_from_slice(data);
    body
}

fn property(name: &str, value: &str) -> Vec<u8> {
    let mut p = vec![name.len() as u8];
    p.extend_from_slice(name.as_bytes());
    p.extend_from_slice(&(value.len() as u32).to_be_bytes());
    p.extend_from_slice(value.as_bytes());
    p
}

/// A length byte and that many bytes, then the rest; None if it is cut short.
fn short_string(data: &[u8]) -> Option<(&[u8], &[u8])> {
    let (&n, rest) = data.split_first()?;
    (usize::from(n) <= rest.len()).then(|| rest.split_at(usize::from(n)))
}

/// Splits a command frame into its name and data.
fn split_command(body: &[u8]) -> (&str, &[u8]) {
    match short_string(body) {
        Some((name, data)) => (std::str::from_utf8(name).unwrap_or(""), data),
        None => ("", &[]),
    }
}

/// The Socket-Type of READY metadata (property names are case-insensitive),
/// "" if there is none.
fn socket_type(mut data: &[u8]) -> Result<String, Error> {
    let mut found = String::new();
    while let Some((&n, rest)) = data.split_first() {
        let n = usize::from(n);
        if rest.len() < n + 4 {
            return protocol("malformed READY".into());
        }
        let (name, rest) = rest.split_at(n);
        let size = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        let rest = &rest[4..];
        if size > rest.len() {
            return protocol("malformed READY".into());
        }
        let (value, rest) = rest.split_at(size);
        if name.eq_ignore_ascii_case(b"Socket-Type") {
            found = String::from_utf8_lossy(value).into_owned();
        }
        data = rest;
    }
    Ok(found)
}

/// The reason of an ERROR command (a length byte, then text), made safe to print.
fn error_reason(data: &[u8]) -> String {
    match short_string(data) {
        Some((reason, _)) => String::from_utf8_lossy(reason)
            .chars()
            .map(|c| if (' '..='~').contains(&c) { c } else { '?' })
            .collect(),
        None => "(no reason)".into(),
    }
}

#[cfg(test)]
mod tests {
    //! Edge cases that a well-behaved libzmq peer won't produce on demand; the
    //! interop tests in test/ipc.test.ts cover the normal paths.
    use super::*;
    use std::thread;

    /// Reads one frame from the client, as the peer.
    fn peer_frame(s: &mut UnixStream) -> (u8, Vec<u8>) {
        let mut hdr = [0u8; 2];
        s.read_exact(&mut hdr).unwrap();
        assert_eq!(hdr[0] & FLAG_LONG, 0, "test frames are short");
        let mut body = vec![0u8; usize::from(hdr[1])];
        s.read_exact(&mut body).unwrap();
        (hdr[0], body)
    }

    fn peer_send(s: &mut UnixStream, flags: u8, body: &[u8]) {
        let mut out = Vec::new();
        push_frame(&mut out, flags, body);
        s.write_all(&out).unwrap();
    }

    /// Does the peer's half of the handshake on the far end of a socket pair.
    fn fake_router(timeout: Duration) -> (Conn, UnixStream) {
        let (client, mut server) = UnixStream::pair().unwrap();
        let peer = thread::spawn(move || {
            let mut g = [0u8; 64];
            server.read_exact(&mut g).unwrap();
            server.write_all(&g).unwrap(); // our own greeting is an acceptable reply
            let (flags, ready) = peer_frame(&mut server);
            assert_eq!(flags, FLAG_COMMAND);
            assert!(ready.starts_with(b"\x05READY"));
            peer_send(&mut server, FLAG_COMMAND, &command("READY", &property("socket-type", "ROUTER")));
            server
        });
        let conn = Conn::start(client, Instant::now() + timeout).unwrap();
        (conn, peer.join().unwrap())
    }

    #[test]
    fn ping_gets_pong_and_delimiter_is_skipped() {
        let (mut z, mut peer) = fake_router(Duration::from_secs(2));
        peer_send(&mut peer, FLAG_COMMAND, &command("PING", b"\0\0ctx"));
        peer_send(&mut peer, FLAG_COMMAND, &command("HELLO", b"")); // unknown: must be ignored
        peer_send(&mut peer, FLAG_MORE, b"");
        peer_send(&mut peer, 0, b"body");
        assert_eq!(z.recv_message().unwrap(), b"body");
        assert_eq!(peer_frame(&mut peer), (FLAG_COMMAND, b"\x04PONGctx".to_vec()));
    }

    #[test]
    fn silence_beyond_ping_ttl_drops_connection() {
        let (mut z, mut peer) = fake_router(Duration::from_secs(5));
        peer_send(&mut peer, FLAG_COMMAND, &command("PING", b"\0\x01")); // TTL 100 ms, then silence
        let start = Instant::now();
        match z.recv_message() {
            Err(Error::Io(_)) => {} // retried by the caller, not fatal
            _ => panic!("want an I/O error"),
        }
        let took = start.elapsed();
        assert!(took >= Duration::from_millis(90) && took < Duration::from_secs(1), "{:?}", took);
    }

    #[test]
    fn oversized_frame_is_refused() {
        let (mut z, mut peer) = fake_router(Duration::from_secs(2));
        let mut hdr = vec![FLAG_LONG];
        hdr.extend_from_slice(&(MAX_FRAME_SIZE + 1).to_be_bytes());
        peer.write_all(&hdr).unwrap();
        assert!(matches!(z.recv_message(), Err(Error::Protocol(_))));
    }

    #[test]
    fn wrong_peer_type_and_error_command_are_fatal() {
        assert!(matches!(socket_type(&property("Socket-Type", "PUB")), Ok(t) if t == "PUB"));
        assert!(matches!(socket_type(b"\x0bSocket-Type\0\0\0\x09ROUTER"), Err(Error::Protocol(_))));
        assert_eq!(error_reason(b"\x05bad\nx"), "bad?x");
        assert_eq!(error_reason(b"\x09short"), "(no reason)");
    }
}
