//! .pt files (torch's zip archive around a pickle), as import reads them: the reader, then the
//! writer that import runs to decide whether the file can be rebuilt from its columns.
//!
//! Property: any input is either read or rejected with an error; nothing panics, aborts or
//! runs out of memory (a small file must not make the reader allocate what its headers claim).
//! The entries' CRCs are fixed first so that mutations reach the pickle parser.
#![no_main]

use libfuzzer_sys::fuzz_target;
use probelake_msprobe::tensor_file::{read_tensor_file, write_tensor_file};
use probelake_fuzz::fix_zip_crcs;

fuzz_target!(|input: &[u8]| {
    let mut bytes = input.to_vec();
    fix_zip_crcs(&mut bytes);
    if let Ok((data, meta)) = read_tensor_file("fuzz.pt", &bytes) {
        let _ = write_tensor_file(&data, &meta);
    }
});
