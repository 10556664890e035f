//! The correlation id: a random (version 4) UUID. The core matches its reply to
//! our request by this value, and a resend after a reconnect reuses it so the
//! core can recognise the duplicate.

use std::io::{self, Read};

extern "C" {
    // glibc's wrapper of getrandom(2); std has no public API for it.
    fn getrandom(buf: *mut u8, len: usize, flags: u32) -> isize;
}

pub fn new_v4() -> io::Result<String> {
    let mut b = [0u8; 16];
    random_bytes(&mut b)?;
    b[6] = b[6] & 0x0f | 0x40; // version 4
    b[8] = b[8] & 0x3f | 0x80; // RFC 4122 variant
    let mut s = String::with_capacity(36);
    for (i, byte) in b.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            s.push('-');
        }
        s.push(char::from(b"0123456789abcdef"[usize::from(byte >> 4)]));
        s.push(char::from(b"0123456789abcdef"[usize::from(byte & 0x0f)]));
    }
    Ok(s)
}

/// One getrandom(2) call (16 bytes never come back short once the pool is
/// initialised), falling back to /dev/urandom on kernels without it.
fn random_bytes(buf: &mut [u8]) -> io::Result<()> {
    // SAFETY: buf is valid for writes of buf.len() bytes.
    let n = unsafe { getrandom(buf.as_mut_ptr(), buf.len(), 0) };
    if n == buf.len() as isize {
        return Ok(());
    }
    std::fs::File::open("/dev/urandom")?.read_exact(buf)
}

#[cfg(test)]
mod tests {
    #[test]
    fn looks_like_a_v4_uuid() {
        let a = super::new_v4().unwrap();
        let b = a.as_bytes();
        assert_eq!(b.len(), 36);
        assert_eq!((b[8], b[13], b[14], b[18], b[23]), (b'-', b'-', b'4', b'-', b'-'));
        assert!(matches!(b[19], b'8' | b'9' | b'a' | b'b'));
        assert_ne!(a, super::new_v4().unwrap());
    }
}
