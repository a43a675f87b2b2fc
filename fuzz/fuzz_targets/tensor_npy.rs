//! .npy files (numpy's header dict and raw data), as import reads them: the reader, then the
//! writer that import runs to decide whether the file can be rebuilt from its columns.
//!
//! Property: any input is either read or rejected with an error; nothing panics, aborts or
//! runs out of memory (a small file must not make the reader allocate what its header claims).
#![no_main]

use libfuzzer_sys::fuzz_target;
use probelake_msprobe::tensor_file::{read_tensor_file, write_tensor_file};

fuzz_target!(|bytes: &[u8]| {
    if let Ok((data, meta)) = read_tensor_file("fuzz.npy", bytes) {
        let _ = write_tensor_file(&data, &meta);
    }
});
