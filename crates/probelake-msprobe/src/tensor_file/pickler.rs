//! CPython-compatible protocol-2 pickle writer: the subset torch tensor pickles need,
//! byte-for-byte as `pickle.Pickler(protocol=2)` writes it.

/// CPython-compatible protocol-2 writer (the subset torch tensor pickles need).
pub(crate) struct Pickler {
    /// Output bytes.
    pub out: Vec<u8>,
    next_memo: u32,
}

impl Pickler {
    /// Starts a protocol-2 pickle.
    pub fn new() -> Self {
        Pickler { out: vec![0x80, 2], next_memo: 0 }
    }
    /// Emits BINPUT/LONG_BINPUT for the next memo slot.
    pub fn memoize(&mut self) {
        let i = self.next_memo;
        self.next_memo += 1;
        if i < 256 {
            self.out.extend_from_slice(&[b'q', i as u8]);
        } else {
            self.out.push(b'r');
            self.out.extend_from_slice(&i.to_le_bytes());
        }
    }
    /// GLOBAL + memo.
    pub fn global(&mut self, module: &str, name: &str) {
        self.out.push(b'c');
        self.out.extend_from_slice(module.as_bytes());
        self.out.push(b'\n');
        self.out.extend_from_slice(name.as_bytes());
        self.out.push(b'\n');
        self.memoize();
    }
    /// BINUNICODE + memo.
    pub fn str(&mut self, s: &str) {
        self.out.push(b'X');
        self.out.extend_from_slice(&(s.len() as u32).to_le_bytes());
        self.out.extend_from_slice(s.as_bytes());
        self.memoize();
    }
    /// An int as CPython's `save_long` writes it (not memoized).
    pub fn int(&mut self, v: i64) {
        if (0..=0xFF).contains(&v) {
            self.out.extend_from_slice(&[b'K', v as u8]);
        } else if (0..=0xFFFF).contains(&v) {
            self.out.push(b'M');
            self.out.extend_from_slice(&(v as u16).to_le_bytes());
        } else if i32::try_from(v).is_ok() {
            self.out.push(b'J');
            self.out.extend_from_slice(&(v as i32).to_le_bytes());
        } else {
            // encode_long: minimal two's complement little-endian.
            let bytes = v.to_le_bytes();
            let mut n = 8;
            while n > 1 {
                let last = bytes.get(n - 1).copied().unwrap_or(0);
                let prev = bytes.get(n - 2).copied().unwrap_or(0);
                if (last == 0 && prev & 0x80 == 0) || (last == 0xFF && prev & 0x80 != 0) {
                    n -= 1;
                } else {
                    break;
                }
            }
            self.out.extend_from_slice(&[0x8a, n as u8]);
            self.out.extend_from_slice(bytes.get(..n).unwrap_or(&[]));
        }
    }
    /// NEWTRUE / NEWFALSE.
    pub fn bool(&mut self, v: bool) {
        self.out.push(if v { 0x88 } else { 0x89 });
    }
    /// MARK.
    pub fn mark(&mut self) {
        self.out.push(b'(');
    }
    /// Ends a tuple of `n` already-written items (MARK written before when n > 3), memoized
    /// unless empty — CPython's `save_tuple`.
    pub fn end_tuple(&mut self, n: usize) {
        match n {
            0 => self.out.push(b')'),
            1..=3 => {
                self.out.push(0x84 + n as u8);
                self.memoize();
            }
            _ => {
                self.out.push(b't');
                self.memoize();
            }
        }
    }
    /// A tuple of ints, as `save_tuple` writes it.
    pub fn int_tuple(&mut self, items: &[i64]) {
        if items.len() > 3 {
            self.mark();
        }
        for &v in items {
            self.int(v);
        }
        self.end_tuple(items.len());
    }
    /// Raw opcode bytes.
    pub fn raw(&mut self, b: &[u8]) {
        self.out.extend_from_slice(b);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor_file::pickle::{load, Value};

    #[test]
    fn ints_round_trip() {
        for v in [
            0i64,
            1,
            255,
            256,
            65535,
            65536,
            -1,
            -200,
            i32::MAX as i64,
            i32::MIN as i64,
            1 << 31,
            1 << 40,
            -(1 << 40),
            i64::MAX,
            i64::MIN,
            0x80,
            0x80_0000_0000,
        ] {
            let mut p = Pickler::new();
            p.int(v);
            p.raw(b".");
            assert_eq!(load(&p.out).expect("load"), Value::Int(v), "{v}");
        }
    }
}
