//! Finding the end of a run of plain string content in JSON text eight bytes at a time: string
//! bodies are most of a dataset's bytes, and a byte-by-byte loop over them was the largest cost
//! of parsing text in scripts other than English. The same scan writes strings escaped.

/// The index of the first byte at or after `from` that a JSON string body cannot hold as it is:
/// `"`, `\` or a control character (below 0x20); `bytes.len()` when there is none.
pub fn string_special(bytes: &[u8], from: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let mut i = from;
    while let Some(word) = bytes.get(i..i + 8) {
        let w = u64::from_le_bytes(word.try_into().unwrap_or([0; 8]));
        // A byte's high bit is set in `hit` where the byte is below 0x20, or equals `"` or `\`
        // (a zero after the xor). Borrows can only mark bytes after the first true one, which
        // is the one taken.
        let below = w.wrapping_sub(ONES * 0x20);
        let quote = (w ^ (ONES * u64::from(b'"'))).wrapping_sub(ONES) & !(w ^ (ONES * u64::from(b'"')));
        let slash = (w ^ (ONES * u64::from(b'\\'))).wrapping_sub(ONES) & !(w ^ (ONES * u64::from(b'\\')));
        let hit = ((below & !w) | quote | slash) & HIGHS;
        if hit != 0 {
            return i + (hit.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while let Some(&b) = bytes.get(i) {
        if b == b'"' || b == b'\\' || b < 0x20 {
            return i;
        }
        i += 1;
    }
    bytes.len()
}

/// Appends `text` as a JSON string, with its quotes, escaped as `serde_json` and RFC 8785
/// escape it: `\"`, `\\`, the short forms `\b \f \n \r \t`, `\u00xx` in lowercase for the other
/// control characters, everything else as it is. Runs of plain text are found eight bytes at a
/// time ([`string_special`]) and copied whole.
pub fn write_escaped(text: &str, out: &mut Vec<u8>) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let bytes = text.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let mut at = 0;
    loop {
        let special = string_special(bytes, at);
        out.extend_from_slice(&bytes[at..special]);
        let Some(&b) = bytes.get(special) else { break };
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0C => out.extend_from_slice(b"\\f"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            _ => out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                DIGITS[usize::from(b >> 4)],
                DIGITS[usize::from(b & 15)],
            ]),
        }
        at = special + 1;
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_as_serde_json_does() {
        let mut every_byte = String::new();
        for c in (0u8..0x80).map(char::from) {
            every_byte.push(c);
            every_byte.push('é');
        }
        for text in ["", "plain", "a\"b\\c\nd\re\tf\u{8}g\u{c}h\u{1}\u{1f}\u{7f}", "\"\"", "中文 \n 😀", &every_byte]
        {
            let mut out = Vec::new();
            write_escaped(text, &mut out);
            assert_eq!(String::from_utf8(out).unwrap(), serde_json::to_string(text).unwrap(), "{text:?}");
        }
    }

    fn slow(bytes: &[u8], from: usize) -> usize {
        bytes[from..].iter().position(|&b| b == b'"' || b == b'\\' || b < 0x20).map_or(bytes.len(), |i| from + i)
    }

    #[test]
    fn finds_the_same_byte_as_a_plain_loop() {
        // Every position of every special byte among plain ASCII and multi-byte characters.
        let plain = "aé中😀 ~\u{7f}\u{80}".as_bytes().to_vec();
        for special in [b'"', b'\\', 0u8, 0x1f, b'\n'] {
            for at in 0..40 {
                let mut bytes: Vec<u8> = plain.iter().cycle().take(40).copied().collect();
                bytes[at] = special;
                bytes.extend_from_slice(b"\"tail");
                for from in [0, 1, 7, 8, 9, at] {
                    assert_eq!(string_special(&bytes, from), slow(&bytes, from), "{special} at {at} from {from}");
                }
            }
        }
        assert_eq!(string_special(b"plain text", 0), 10);
        assert_eq!(string_special(b"", 0), 0);
    }
}
