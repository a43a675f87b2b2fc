//! Reading a whole dump file into memory, a part per thread where it is large.
//!
//! Reading a 10 MB dump.json is a few milliseconds of one core before any parsing starts:
//! the kernel copies the file into pages the process touches for the first time, and zeroes
//! each of them first. Nothing else can run then, so on a machine with cores to spare the
//! parts of the file are read side by side, each into its own range of the buffer.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use crate::error::{MsprobeError, Result};

/// Files smaller than this are read on one thread: a thread costs more than it saves on them.
pub(crate) const MIN_PART_BYTES: usize = 2 << 20;

/// The whole of the file at `path`, read in up to `threads` parts side by side. The bytes are
/// those [`std::fs::read`] gives, also for a file that grows or shrinks while it is read (a
/// job still writing it): whatever the parts could not read whole is read again on one thread.
pub(crate) fn read_file(path: &Path, threads: usize) -> Result<Vec<u8>> {
    let io = |e| MsprobeError::io(path, e);
    let file = File::open(path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    let threads = if cfg!(unix) { threads } else { 1 };
    let parts = usize::try_from(len).map_or(1, |len| threads.min(len / MIN_PART_BYTES)).max(1);
    if parts < 2 {
        return read_to_end(&file, Vec::new()).map_err(io);
    }
    let len = usize::try_from(len).map_err(|_| io(std::io::ErrorKind::OutOfMemory.into()))?;
    // Zeroed here by the kernel as the pages are first touched, which the reads do anyway.
    let mut bytes = vec![0u8; len];
    let part_len = len.div_ceil(parts);
    let file = &file;
    let whole = std::thread::scope(|scope| {
        let mut parts = bytes.chunks_mut(part_len).enumerate();
        let first = parts.next();
        let others: Vec<_> = parts.map(|(i, part)| scope.spawn(move || fill(file, part, i * part_len))).collect();
        let mut whole = first.is_none_or(|(_, part)| fill(file, part, 0));
        for other in others {
            whole &= other.join().unwrap_or(false);
        }
        whole
    });
    if whole {
        // A file that grew since its length was read: the rest, as `std::fs::read` would.
        return read_to_end(file, bytes).map_err(io);
    }
    // The file shrank while it was read (or a part failed): once more, plainly.
    read_to_end(&File::open(path).map_err(io)?, Vec::new()).map_err(io)
}

/// Fills `part` from `file` at `offset`; false if the file ended first or a read failed.
#[cfg(unix)]
fn fill(file: &File, part: &mut [u8], offset: usize) -> bool {
    std::os::unix::fs::FileExt::read_exact_at(file, part, offset as u64).is_ok()
}

/// Where reads at an offset leave the file's position alone only on Unix, one part is read.
#[cfg(not(unix))]
fn fill(_file: &File, _part: &mut [u8], _offset: usize) -> bool {
    false
}

/// `bytes` followed by the rest of `file` from `bytes.len()` on.
fn read_to_end(file: &File, mut bytes: Vec<u8>) -> std::io::Result<Vec<u8>> {
    let mut reader = file;
    reader.seek(SeekFrom::Start(bytes.len() as u64))?;
    reader.read_to_end(&mut bytes)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_number_of_parts_reads_the_same_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dump.json");
        for len in [0, 1, MIN_PART_BYTES - 1, MIN_PART_BYTES * 2, MIN_PART_BYTES * 5 + 3] {
            let written: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
            std::fs::write(&path, &written).unwrap();
            for threads in [1, 2, 3, 8] {
                let read = read_file(&path, threads).unwrap();
                assert!(read == written, "{len} bytes on {threads} threads");
            }
        }
    }

    #[test]
    fn a_missing_file_is_named_in_the_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dump.json");
        let error = read_file(&path, 4).unwrap_err().to_string();
        assert!(error.contains(&path.display().to_string()), "{error}");
    }
}
