//! The JSON work around serde_json: `ipc` passes JSON through, so it checks
//! and compacts it but never re-formats a token (a number such as 2.50 or
//! 12345678901234567890 must reach the other side byte for byte).

use serde_json::value::RawValue;

/// Checks that `text` is exactly one JSON value. Without building it: RawValue
/// only validates and remembers where the value is.
pub fn validate(text: &str) -> Result<(), serde_json::Error> {
    serde_json::from_str::<&RawValue>(text).map(|_| ())
}

/// The byte offset of a syntax error, as Go's SyntaxError.Offset gave it
/// (serde_json reports a line and a column counted in bytes).
pub fn error_offset(text: &str, e: &serde_json::Error) -> usize {
    let line_start: usize = text.split_inclusive('\n').take(e.line().saturating_sub(1)).map(str::len).sum();
    line_start + e.column()
}

/// Appends `raw`, which must be valid JSON, minus insignificant whitespace,
/// like Go's json.Compact: every token keeps its exact bytes.
pub fn compact(raw: &[u8], out: &mut Vec<u8>) {
    out.reserve(raw.len());
    let (mut in_string, mut escaped) = (false, false);
    let mut start = 0; // of the run of bytes not yet copied
    for (i, &b) in raw.iter().enumerate() {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b' ' | b'\t' | b'\n' | b'\r' => {
                out.extend_from_slice(&raw[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.extend_from_slice(&raw[start..]);
}

/// `s` as a JSON string, for our own failure lines.
pub fn string(s: &str) -> String {
    // Serializing a str cannot fail; the fallback keeps the line valid JSON anyway.
    serde_json::to_string(s).unwrap_or_else(|_| String::from("\"\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_keeps_tokens_and_string_whitespace() {
        let mut out = Vec::new();
        compact(b" { \"a b\" : [ 1.50 ,\t2e+21 ,\"\\\" x\" ] }\n", &mut out);
        assert_eq!(out, b"{\"a b\":[1.50,2e+21,\"\\\" x\"]}");
    }

    #[test]
    fn validate_refuses_what_go_refused() {
        for bad in ["", "{", "{} {}", "{\"a\":01}", "{\"a\":1.}", "{\"a\":\"\\q\"}", "{\"a\":\"\u{1}\"}", "[1,]", "nul"] {
            assert!(validate(bad).is_err(), "accepted {:?}", bad);
        }
        for good in ["{}", " {\"a\" : [1, -0.5e-3, true, null, \"\\ud800\"]} ", "\"x\"", "12345678901234567890"] {
            assert!(validate(good).is_ok(), "refused {:?}", good);
        }
    }

    #[test]
    fn error_offset_counts_bytes_across_lines() {
        let text = "{\n\"a\":\n}";
        let e = validate(text).unwrap_err();
        assert_eq!(error_offset(text, &e), 8); // Go: "after reading 8 bytes"
    }
}
