//! Scanning bytes eight at a time, a little-endian `u64` word per step: the parser's runs of
//! spaces and of plain string bytes, and `write_str`'s check for bytes to escape.

const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);

/// `byte` in every byte of a word.
pub(super) const fn splat(byte: u8) -> u64 {
    ONES * byte as u64
}

/// The high bit of each zero byte of `w`. A flag above a true one may be false (a borrow),
/// never one below it, so the lowest flag is exact.
pub(super) fn zero_bytes(w: u64) -> u64 {
    w.wrapping_sub(ONES) & !w & HIGHS
}

/// The high bit of each byte of `w` below 0x20, with the same caveat.
pub(super) fn control_bytes(w: u64) -> u64 {
    w.wrapping_sub(splat(0x20)) & !w & HIGHS
}

/// The high bit of each byte of `w` from 0x7f up (exact: no carries cross bytes).
pub(super) fn high_bytes(w: u64) -> u64 {
    (w | ((w & !HIGHS) + ONES)) & HIGHS
}

/// How many bytes from the start of `bytes` come before the first byte in which `flags`
/// sets a bit, scanning whole words only: where no whole word is left it stops short, and a
/// caller that needs the exact answer goes on byte by byte from there (within the last eight
/// bytes, `n + 8 > bytes.len()`; a flagged byte there stops such a loop at once).
pub(super) fn unflagged_prefix(bytes: &[u8], flags: impl Fn(u64) -> u64) -> usize {
    let mut n = 0;
    while let Some(word) = bytes.get(n..).and_then(<[u8]>::first_chunk::<8>) {
        let flagged = flags(u64::from_le_bytes(*word));
        if flagged != 0 {
            // Little-endian: the first flagged byte holds the lowest set bit.
            return n + (flagged.trailing_zeros() / 8) as usize;
        }
        n += 8;
    }
    n
}
