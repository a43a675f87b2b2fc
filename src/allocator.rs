//! The binary's allocator: jemalloc, with options chosen for a command's short, bursty life.
//!
//! glibc's malloc gave the large buffers of every unit back to the kernel and faulted them in
//! again for the next; jemalloc keeps them. Import, export and queries all gain
//! (docs/performance.md, "The allocator"). The library crates leave the choice to their users.

#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[cfg(all(target_os = "linux", not(target_env = "msvc")))]
mod options {
    use std::cell::UnsafeCell;
    use std::ffi::{c_char, CStr};
    use std::sync::atomic::{AtomicPtr, Ordering};

    /// What every command asks of jemalloc. A command's memory is mostly fresh pages, written
    /// once: a comparison of two 10.7 MB dump.json files took ~49,000 page faults, half its CPU
    /// time in the kernel. Transparent huge pages, asked for where the kernel leaves them to
    /// `madvise`, take that to ~8,500 faults and the comparison's wall time down by a fifth.
    /// Buffers of 8 MiB and more (a dump file, its leaves, a unit's rows) are otherwise kept in
    /// an arena of their own that gives their pages back to the kernel as soon as they are
    /// freed, so the next such buffer faults them in and zeroes them again:
    /// `oversize_threshold:0` keeps them with the rest (a comparison 0.96x the wall time;
    /// docs/performance.md, "The allocator").
    const OPTIONS_C: &CStr = c"thp:always,metadata_thp:always,oversize_threshold:0";
    /// [`OPTIONS_C`] without its NUL, to build on.
    const OPTIONS: &[u8] = OPTIONS_C.to_bytes();

    /// jemalloc's options, read once when it starts (`_RJEM_MALLOC_CONF` in the environment
    /// overrides them): [`OPTIONS_C`] alone until [`choose_arenas`] adds the arena count.
    #[export_name = "_rjem_malloc_conf"]
    static MALLOC_CONF: AtomicPtr<c_char> = AtomicPtr::new(OPTIONS_C.as_ptr().cast_mut());

    /// Room for [`OPTIONS`], `,narenas:` and a count.
    const TEXT_LEN: usize = 96;

    /// The options with the arena count, written once by [`choose_arenas`].
    struct OptionsText(UnsafeCell<[u8; TEXT_LEN]>);
    // SAFETY: written only by `choose_arenas`, which runs before `main` on the one thread there
    // is, and read only after that.
    unsafe impl Sync for OptionsText {}
    static OPTIONS_TEXT: OptionsText = OptionsText(UnsafeCell::new([0; TEXT_LEN]));

    /// Runs before `main` (and before the first allocation of Rust's runtime), from the
    /// executable's initializers.
    #[used]
    #[link_section = ".init_array"]
    static CHOOSE_ARENAS: extern "C" fn() = choose_arenas;

    /// One arena per CPU this process may run on, rather than jemalloc's four: a huge page is
    /// zeroed whole when first touched, and threads spread over more arenas left more of them
    /// partly used (a comparison 0.92x the wall time, 10% less memory; docs/performance.md, "The
    /// allocator"). The count is the CPU affinity's, so a command confined to a few CPUs of a
    /// big machine (`taskset`, a batch scheduler's binding) gets as many arenas as it has CPUs.
    /// jemalloc's own per-CPU arenas (`percpu_arena`) were not used for this: where the
    /// affinity is not every CPU, it disables them and prints a warning on every run.
    ///
    /// Nothing here allocates: jemalloc reads its options on the first allocation.
    extern "C" fn choose_arenas() {
        // SAFETY: `cpu_set_t` is plain data; `sched_getaffinity` writes at most its size.
        let cpus = unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
                return;
            }
            libc::CPU_COUNT(&set)
        };
        let Ok(cpus) = u32::try_from(cpus) else { return };
        if cpus == 0 {
            return;
        }
        // SAFETY: see `OptionsText`: this is its one write, before anything reads it.
        let text = unsafe { &mut *OPTIONS_TEXT.0.get() };
        let Some(len) = write_options(text, cpus) else { return };
        debug_assert!(len < TEXT_LEN && text[len] == 0);
        MALLOC_CONF.store(text.as_mut_ptr().cast(), Ordering::Release);
    }

    /// Writes `thp:...,narenas:{arenas}` and a terminating NUL into `text`; the length without
    /// the NUL, or `None` if it does not fit.
    fn write_options(text: &mut [u8; TEXT_LEN], arenas: u32) -> Option<usize> {
        let mut digits = [0u8; 10];
        let mut n = arenas;
        let mut count = 0;
        loop {
            digits[count] = b'0' + (n % 10) as u8;
            count += 1;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        const KEY: &[u8] = b",narenas:";
        let len = OPTIONS.len() + KEY.len() + count;
        if len >= TEXT_LEN {
            return None;
        }
        text[..OPTIONS.len()].copy_from_slice(OPTIONS);
        text[OPTIONS.len()..OPTIONS.len() + KEY.len()].copy_from_slice(KEY);
        for (slot, digit) in text[OPTIONS.len() + KEY.len()..len].iter_mut().zip(digits[..count].iter().rev()) {
            *slot = *digit;
        }
        text[len] = 0;
        Some(len)
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn jemalloc_reads_the_options_and_an_arena_count() {
            // The initializer ran in this binary too, before the harness's first allocation.
            let conf = MALLOC_CONF.load(Ordering::Acquire);
            // SAFETY: `MALLOC_CONF` always points at a NUL-terminated static text.
            let text = unsafe { std::ffi::CStr::from_ptr(conf) }.to_str().expect("ascii");
            // SAFETY: as in `choose_arenas`.
            let cpus = unsafe {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                assert_eq!(libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set), 0);
                libc::CPU_COUNT(&set)
            };
            assert_eq!(text, format!("{},narenas:{cpus}", std::str::from_utf8(OPTIONS).expect("ascii")));
        }

        #[test]
        fn options_name_the_arena_count() {
            for (arenas, expected) in
                [(1, "narenas:1"), (2, "narenas:2"), (192, "narenas:192"), (u32::MAX, "narenas:4294967295")]
            {
                let mut text = [0xff; TEXT_LEN];
                let len = write_options(&mut text, arenas).expect("fits");
                let written = std::str::from_utf8(&text[..len]).expect("ascii");
                assert_eq!(written, format!("thp:always,metadata_thp:always,oversize_threshold:0,{expected}"));
                assert_eq!(text[len], 0);
            }
        }
    }
}
