//! `probelake vacuum DATASET`

use crate::ExitCode;
use std::io::Write as _;
use std::time::Duration;

use anyhow::{bail, Context as _};
use probelake_format::vacuum::{LeftoverKind, VacuumOptions, DEFAULT_GRACE};

use super::import::human_bytes;
use super::Context;
use crate::uri::open_existing;

/// Remove files no commit names (left by killed or failed writes).
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Deletes the data files under the table folders that no commit record names, and temporary files
of interrupted writes, once they are older than --older-than (default 24h). probelake itself
never reads such files, but plain Parquet readers (pandas, polars, DuckDB) of the folders do.

The grace period protects writers at work: a unit's files are uploaded before its commit, and
until then they look exactly like leftovers. Use --older-than 0s only when nothing is writing
to the dataset.

A folder with no _probelake/manifest.json (an import killed before its first commit) has no
records to tell its files apart, and neither does a mistyped path. There vacuum considers only
files at the exact paths of the dataset layout (<table>/step=N/stage=S/rank=R[/api=A]/<uuid>.parquet,
their temporaries, _probelake/schema/<table>.parquet), never anything else, and only lists them
unless --force is given.

Exit code: 0 when the vacuum ran (whether or not it removed anything, and for a listing), 2 on
an error (no dataset and no import's files there, a damaged manifest or commit record: nothing
was deleted), 130 when interrupted by Ctrl-C.

Examples:
  probelake vacuum ./lake/run-a --dry-run
  probelake vacuum s3://bucket/run-a --older-than 7d
  probelake vacuum ./lake/run-a --older-than 0s     # nothing is importing into it now
  probelake vacuum ./lake/killed --older-than 0s --force   # no manifest: remove the import's files")]
pub struct Args {
    /// The dataset: a folder, file:// or s3:// URL.
    pub dataset: String,
    /// Only remove files at least this old: 0s, 90s, 30m, 12h, 7d (a bare number is seconds).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub older_than: Option<Duration>,
    /// List what would be removed; remove nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Where there is no manifest (an import killed before its first commit), remove the files
    /// at the layout's paths instead of only listing them.
    #[arg(long)]
    pub force: bool,
}

/// `90`, `90s`, `30m`, `12h`, `7d` as a duration.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => text.split_at(i),
        None => (text, "s"),
    };
    let seconds_per = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(format!("`{text}`: use a number with s, m, h or d, e.g. 30m or 7d")),
    };
    let n: u64 = number.parse().map_err(|_| format!("`{text}`: use a number with s, m, h or d, e.g. 30m or 7d"))?;
    n.checked_mul(seconds_per).map(Duration::from_secs).ok_or_else(|| format!("`{text}` is too long"))
}

/// Runs the vacuum.
pub async fn run(ctx: &Context, args: Args) -> anyhow::Result<ExitCode> {
    let lake = open_existing(&args.dataset, &ctx.storage)?;
    let has_manifest = lake.manifest().await?.is_some();
    // Without a manifest nothing says which files are probelake's, and the path may be a
    // typo: only a listing unless asked for more.
    let listing_only = !has_manifest && !args.force && !args.dry_run;
    let options = VacuumOptions {
        older_than: args.older_than.unwrap_or(DEFAULT_GRACE),
        dry_run: args.dry_run || listing_only,
        without_manifest: !has_manifest,
    };
    let report = lake.vacuum(&options).await.with_context(|| format!("vacuuming {}", args.dataset))?;
    if report.without_manifest && report.removed.is_empty() && report.kept_recent == 0 {
        bail!(
            "{}: no probelake dataset here (no _probelake/manifest.json), and no files an interrupted import left \
             (none at the dataset layout's paths); nothing was deleted",
            args.dataset
        );
    }
    if report.without_manifest {
        ctx.note(&format!(
            "note: {} has no _probelake/manifest.json (no import committed into it): only files at the dataset \
             layout's exact paths are considered; the {} other file(s) and folder(s) under its table folders and \
             _probelake/ are kept",
            args.dataset, report.kept_foreign
        ));
    }
    let mut out = std::io::stdout().lock();
    for leftover in &report.removed {
        let kind = match leftover.kind {
            LeftoverKind::DataFile => "uncommitted",
            LeftoverKind::Temporary => "temporary",
            LeftoverKind::ReaderSchema => "reader schema",
        };
        writeln!(out, "{}{kind} {}", if report.dry_run { "would remove " } else { "removed " }, leftover.path)?;
    }
    writeln!(
        out,
        "{} {} file(s), {}; kept {} younger than {}",
        if report.dry_run { "would remove" } else { "removed" },
        report.removed.len(),
        human_bytes(report.bytes()),
        report.kept_recent,
        describe(options.older_than)
    )?;
    if listing_only && report.without_manifest && !report.removed.is_empty() {
        let mut again = format!("probelake vacuum {}", probelake_query::render::shell_word(&args.dataset));
        if let Some(older_than) = args.older_than {
            again.push_str(&format!(" --older-than {}", describe(older_than)));
        }
        writeln!(
            out,
            "nothing was removed: without a manifest vacuum only lists; to remove these, run: {again} --force"
        )?;
    }
    if report.kept_recent > 0 {
        ctx.note("note: files younger than --older-than may belong to a write in progress and are kept");
    }
    Ok(ExitCode::SUCCESS)
}

fn describe(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0 => "0s".into(),
        s if s % 86_400 == 0 => format!("{}d", s / 86_400),
        s if s % 3600 == 0 => format!("{}h", s / 3600),
        s if s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("30m"), Ok(Duration::from_secs(1800)));
        assert_eq!(parse_duration("7d"), Ok(Duration::from_secs(7 * 86_400)));
        for bad in ["", "h", "1.5h", "-1s", "3w", "99999999999999999999d"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        assert_eq!(describe(Duration::from_secs(86_400)), "1d");
    }
}
