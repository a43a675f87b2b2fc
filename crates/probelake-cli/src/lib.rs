//! # probelake-cli
//!
//! The `probelake` command line. A thin shell: argument parsing, progress bars and error
//! reporting live here; every capability lives in the library crates and can be tested alone.
//!
//! Exit codes: `0` success, `1` the command ran and the answer is "they differ" (`compare`,
//! `divergence`), `2` an error or a usage mistake, `130` interrupted by Ctrl-C; each command's
//! `--help` says which it returns when, and docs/cli.md has the table.
#![warn(missing_docs)]

mod cmd;
mod damage;
mod exit;
mod output;
mod progress;
mod repl;
mod report;
mod unit_pairs;
mod uri;

use std::ffi::OsString;

use clap::{Parser, Subcommand};
pub use exit::ExitCode;

/// msprobe precision dumps as a columnar dataset you can query.
#[derive(Debug, Parser)]
#[command(name = "probelake", version, about, long_about = None, after_help = "\
Examples:
  probelake demo                          # make two toy runs, import them, show what is there
  probelake import ./dumps ./lake/run-a   # msprobe or verl dump tree -> dataset
  probelake info ./lake/run-a             # units, entries, leaves, bytes
  probelake export ./lake/run-a ./back    # dataset -> the original msprobe files, byte for byte
  probelake vacuum ./lake/run-a --dry-run # files a killed import left behind
  probelake synth ./dumps/big --layers 64 --ranks 32   # a large msprobe tree to try things on
  probelake sql --run target=./lake/bug --run golden=./lake/base -f sql/first_divergence.sql
  AWS_ENDPOINT=http://127.0.0.1:9000 AWS_ALLOW_HTTP=true probelake import ./dumps s3://bucket/run-a
  probelake plot divergence ./lake/bug ./lake/base   # divergence.svg and divergence.png
  probelake report ./lake/bug ./lake/base -o report.html   # one offline page: where they part
  probelake cluster scheduler --bind 0.0.0.0:50050   # then executors, then --cluster HOST:PORT

Exit codes: 0 success; 1 the runs differ (compare: some row is `error`; divergence: the runs
part), as diff does; 2 an error or a usage mistake; 130 interrupted by Ctrl-C. Each command's
--help says which it returns when.")]
pub struct Cli {
    /// Print no progress bars or notes (errors are still printed).
    #[arg(short, long, global = true)]
    pub quiet: bool,
    /// More log output on stderr (-v info, -vv debug); PROBELAKE_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// How to reach s3:// datasets.
    #[command(flatten)]
    pub storage: uri::StorageArgs,
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Import msprobe dumps into a dataset.
    Import(cmd::import::Args),
    /// Write a dataset back as msprobe files.
    Export(cmd::export::Args),
    /// Show what a dataset holds.
    Info(cmd::info::Args),
    /// Query runs with SQL (or open an interactive prompt).
    Sql(cmd::sql::Args),
    /// Compare a target run with a golden run, as `msprobe compare` does.
    Compare(cmd::compare::Args),
    /// Find where two runs first part, per step, stage and rank.
    Divergence(cmd::divergence::Args),
    /// Draw charts of runs (SVG and PNG): statistics across steps, divergence heatmaps.
    Plot(cmd::plot::Args),
    /// Write one offline HTML page that shows where two runs part.
    Report(cmd::report::Args),
    /// Remove files no commit names (left by killed or failed writes).
    Vacuum(cmd::vacuum::Args),
    /// Write a synthetic msprobe dump tree of any size (benchmarks, tests, trying things out).
    Synth(cmd::synth::Args),
    /// Make two toy msprobe runs (one with a numeric bug), import them and show them.
    Demo(cmd::demo::Args),
    /// List the committed files of a table (for Spark and other engines).
    Files(cmd::files::Args),
    /// Run a scheduler or an executor of a cluster (Ballista) for sql, compare and divergence.
    Cluster(cmd::cluster::Args),
}

/// Runs the command line on the process's arguments and returns its exit code.
pub fn run() -> std::process::ExitCode {
    run_with_args(std::env::args_os()).into()
}

/// Runs the command line on `args`, the first of which names the program (as in
/// `std::env::args_os`), and returns the exit code. The Python package's `probelake` command
/// enters here.
pub fn run_with_args<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { ExitCode::from(2) } else { ExitCode::SUCCESS };
        }
    };
    init_logging(cli.verbose);
    ignore_file_size_signal();
    // Deep plans recurse deeply where nothing grows the stack for them: a cluster's scheduler
    // and executors decode a plan's protobuf recursively, and a debug build of the scheduler
    // overflowed tokio's 2 MiB default on sql/first_divergence.sql. The stack is address space,
    // touched only as deep as it is used.
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().thread_stack_size(32 << 20).build() {
        Ok(rt) => rt,
        Err(e) => return report::error(&anyhow::Error::new(e)),
    };
    let storage = match cli.storage.options() {
        Ok(s) => s,
        Err(e) => return report::error(&e),
    };
    let ctx = cmd::Context { quiet: cli.quiet, storage };
    let own_interrupts = matches!(&cli.command, Command::Sql(args) if args.is_interactive());
    let command = async {
        match cli.command {
            Command::Import(args) => cmd::import::run(&ctx, args).await,
            Command::Export(args) => cmd::export::run(&ctx, args).await,
            Command::Info(args) => cmd::info::run(&ctx, args).await,
            Command::Sql(args) => cmd::sql::run(&ctx, args).await,
            Command::Compare(args) => cmd::compare::run(&ctx, args).await,
            Command::Divergence(args) => cmd::divergence::run(&ctx, args).await,
            Command::Plot(args) => cmd::plot::run(&ctx, args).await,
            Command::Report(args) => cmd::report::run(&ctx, args).await,
            Command::Vacuum(args) => cmd::vacuum::run(&ctx, args).await,
            Command::Synth(args) => cmd::synth::run(&ctx, args).await,
            Command::Demo(args) => cmd::demo::run(&ctx, args).await,
            Command::Files(args) => cmd::files::run(&ctx, args).await,
            Command::Cluster(args) => cmd::cluster::run(&ctx, args).await,
        }
    };
    // Ctrl-C drops the command's future: what it was writing through an `OutputTree` (export,
    // compare, `-o` files) is rolled back, and an import commits nothing.
    // The interactive prompt cancels a running statement on Ctrl-C and goes on.
    let interrupt = (!own_interrupts).then(ctrl_c_on_its_own_thread);
    let result = runtime.block_on(async {
        let Some(interrupt) = interrupt else {
            return Some(command.await);
        };
        tokio::select! {
            result = command => Some(result),
            () = interrupt => None,
        }
    });
    match result {
        Some(Ok(code)) => code,
        Some(Err(e)) => report::error(&e),
        None => {
            eprintln!("probelake: interrupted; the files it had written are removed");
            // Workers inside a long operator stop at its next yield; the process need not
            // wait for them.
            runtime.shutdown_background();
            ExitCode::from(130)
        }
    }
}

/// Resolves at the first Ctrl-C, seen by a thread of its own. A signal reaches a tokio runtime
/// through its I/O driver, which only a parked worker polls: while every worker computes a long
/// query (a join of many units, say), Ctrl-C given to the command's runtime would wait for the
/// query to end. Never resolves if the thread cannot be started.
fn ctrl_c_on_its_own_thread() -> impl std::future::Future<Output = ()> {
    let (seen, received) = tokio::sync::oneshot::channel();
    let watcher = std::thread::Builder::new().name("probelake-ctrl-c".into()).spawn(move || {
        let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
            return;
        };
        if runtime.block_on(tokio::signal::ctrl_c()).is_ok() {
            let _ = seen.send(());
        }
    });
    async move {
        if watcher.is_err() || received.await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// A write past the file-size limit (`ulimit -f`) then fails with an error naming the file,
/// which is reported and cleaned up like a full disk, instead of killing the process by
/// SIGXFSZ half way through a write.
fn ignore_file_size_signal() {
    #[cfg(unix)]
    // SAFETY: `signal` with SIG_IGN installs no handler code; it is called once, before any
    // thread of ours exists that could be writing.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}

fn init_logging(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    use tracing_subscriber::Layer as _;

    let filter = tracing_subscriber::EnvFilter::try_from_env("PROBELAKE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    // Ballista's client logs a failed cluster job at ERROR and returns the same text as its
    // error, which probelake prints as its one-line message: the log line would say it twice,
    // first. Its warnings (a scheduler of another version) still show.
    let job_failures = tracing_subscriber::filter::filter_fn(|meta| {
        !(*meta.level() == tracing::Level::ERROR && meta.target() == BALLISTA_JOB_LOG_TARGET)
    });
    let layer = tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_target(false);
    let _ = tracing_subscriber::registry().with(layer.with_filter(filter).with_filter(job_failures)).try_init();
}

/// Where Ballista's client logs a job that failed on the cluster.
const BALLISTA_JOB_LOG_TARGET: &str = "ballista_core::execution_plans::distributed_query";

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::Cli;

    /// Every command's `--help`, by its path (`plot trend`), subcommands included.
    fn long_helps() -> Vec<(String, String)> {
        fn walk(command: &mut clap::Command, path: &str, out: &mut Vec<(String, String)>) {
            out.push((path.to_string(), command.render_long_help().to_string()));
            let names: Vec<String> =
                command.get_subcommands().map(|c| c.get_name().to_string()).filter(|n| n != "help").collect();
            for name in names {
                let Some(sub) = command.find_subcommand_mut(&name) else { continue };
                walk(sub, &format!("{path} {name}"), out);
            }
        }
        let mut out = Vec::new();
        walk(&mut Cli::command(), "probelake", &mut out);
        out
    }

    #[test]
    fn every_commands_help_says_its_exit_codes() {
        let helps = long_helps();
        assert!(helps.len() >= 13, "{:?}", helps.iter().map(|(p, _)| p).collect::<Vec<_>>());
        for (path, help) in &helps {
            assert!(help.contains("Exit code"), "`{path} --help` does not say its exit codes:\n{help}");
        }
    }

    #[test]
    fn the_exit_code_table_lists_every_command() {
        let table = include_str!("../../../docs/cli.md");
        for (path, _) in long_helps() {
            let command = path.trim_start_matches("probelake").trim();
            if command.is_empty() {
                continue;
            }
            assert!(table.contains(&format!("| `{command}` |")), "docs/cli.md has no row for `{command}`");
        }
    }
}
