//! The buffers the kernel measurements run over, shared by this example and the root package's
//! criterion bench (`benches/writer.rs`, which includes this file by path), so both measure the
//! same bytes.

/// `len_bytes` of little-endian f32 values in [-4, 4), from a fixed xorshift sequence.
pub fn random_f32(len_bytes: usize) -> Vec<u8> {
    let mut state = 0x1234_5678_9abc_def0u64;
    let mut out = Vec::with_capacity(len_bytes);
    while out.len() < len_bytes {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let v = ((state >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 8.0;
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.truncate(len_bytes);
    out
}

/// `len_bytes` of bfloat16 (or float16) values: the f32 sequence rounded to nearest.
pub fn random_half(len_bytes: usize, bf16: bool) -> Vec<u8> {
    random_f32(len_bytes * 2)
        .as_chunks::<4>()
        .0
        .iter()
        .flat_map(|w| {
            let v = f32::from_le_bytes(*w);
            if bf16 {
                half::bf16::from_f32(v).to_le_bytes()
            } else {
                half::f16::from_f32(v).to_le_bytes()
            }
        })
        .collect()
}
