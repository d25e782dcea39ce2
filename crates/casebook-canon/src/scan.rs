//! Finding the end of a run of plain string content in JSON text eight bytes at a time: string
//! bodies are most of a dataset's bytes, and a byte-by-byte loop over them was the largest cost
//! of parsing text in scripts other than English.

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

#[cfg(test)]
mod tests {
    use super::*;

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
