//! The binary confined to fewer CPUs than the machine has (`taskset`, a batch scheduler's
//! CPU binding): it prints what it prints elsewhere and nothing more.

#![cfg(target_os = "linux")]

use std::os::unix::process::CommandExt;
use std::process::Command;

#[test]
fn confined_to_one_cpu_it_prints_no_allocator_warning() {
    let mut command = Command::new(env!("CARGO_BIN_EXE_probelake"));
    command.arg("--version");
    // SAFETY: `sched_setaffinity` is async-signal-safe and only reads the set built here.
    unsafe {
        command.pre_exec(|| {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(0, &mut set);
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = command.output().expect("the probelake binary runs");
    assert!(out.status.success(), "probelake --version failed: {}", out.status);
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("probelake "));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "", "stderr of `probelake --version` on one CPU");
}
