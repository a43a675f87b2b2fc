//! The interactive prompt of `probelake sql`, modelled on datafusion-cli.

use crate::ExitCode;

use probelake_query::RunSession;
use rustyline::error::ReadlineError;
use rustyline::DefaultEditor;

use crate::output::{write_batches, OutputFormat};

const HELP: &str = "\
  \\d            list tables          \\d TABLE   describe a table (e.g. \\d base.dump)
  \\runs         list runs            \\q         quit
  statements end with ';' and may span lines; Ctrl-C clears the line or cancels a running
  statement, Ctrl-D quits";

/// Reads statements until `\q` or end of input.
pub async fn run(session: &RunSession, format: OutputFormat, maxrows: usize) -> anyhow::Result<ExitCode> {
    let mut editor = DefaultEditor::new()?;
    let history = std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".probelake_history"));
    if let Some(h) = &history {
        let _ = editor.load_history(h);
    }
    eprintln!("probelake sql: {} run(s); \\? for help", session.runs().len());
    let mut buffer = String::new();
    loop {
        let prompt = if buffer.is_empty() { "probelake> " } else { "        -> " };
        let line = match editor.readline(prompt) {
            Ok(line) => line,
            Err(ReadlineError::Interrupted) => {
                buffer.clear();
                continue;
            }
            Err(ReadlineError::Eof) => break,
            Err(e) => return Err(e.into()),
        };
        let trimmed = line.trim();
        if buffer.is_empty() && trimmed.starts_with('\\') {
            let _ = editor.add_history_entry(trimmed);
            if !meta_command(session, trimmed, format, maxrows).await {
                break;
            }
            continue;
        }
        if !buffer.is_empty() {
            buffer.push('\n');
        }
        buffer.push_str(&line);
        if !trimmed.ends_with(';') {
            continue;
        }
        let _ = editor.add_history_entry(buffer.as_str());
        let sql = std::mem::take(&mut buffer);
        let started = std::time::Instant::now();
        // Ctrl-C while a statement runs cancels it (its plan is dropped) and returns to the
        // prompt; at the prompt, the line editor reads it as a key and clears the line.
        let result = tokio::select! {
            result = session.collect(&sql) => result,
            _ = tokio::signal::ctrl_c() => {
                eprintln!("cancelled after {:.3}s", started.elapsed().as_secs_f64());
                continue;
            }
        };
        match result {
            Ok(batches) => {
                let mut out = std::io::stdout().lock();
                if let Err(e) = write_batches(&mut out, &batches, format, maxrows) {
                    eprintln!("probelake: {e:#}");
                }
                eprintln!("{:.3}s", started.elapsed().as_secs_f64());
            }
            Err(e) => eprintln!("probelake: {e}"),
        }
    }
    if let Some(h) = &history {
        let _ = editor.save_history(h);
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs a `\` command; false means quit.
async fn meta_command(session: &RunSession, command: &str, format: OutputFormat, maxrows: usize) -> bool {
    let mut words = command.split_whitespace();
    let sql = match (words.next(), words.next()) {
        (Some("\\q"), _) => return false,
        (Some("\\?" | "\\h"), _) => {
            eprintln!("{HELP}");
            return true;
        }
        (Some("\\runs"), _) => {
            for r in session.runs() {
                let files: usize = r.files.iter().map(|(_, n)| n).sum();
                println!("{:<12} {:>5} units {:>6} files  {}", r.name, r.units, files, r.location);
            }
            return true;
        }
        (Some("\\d"), None) => "SELECT table_schema AS run, table_name FROM information_schema.tables \
             WHERE table_schema <> 'information_schema' ORDER BY 1, 2"
            .to_string(),
        (Some("\\d"), Some(table)) => format!("DESCRIBE {table}"),
        _ => {
            eprintln!("unknown command {command}\n{HELP}");
            return true;
        }
    };
    match session.collect(&sql).await {
        Ok(batches) => {
            let mut out = std::io::stdout().lock();
            if let Err(e) = write_batches(&mut out, &batches, format, maxrows) {
                eprintln!("probelake: {e:#}");
            }
        }
        Err(e) => eprintln!("probelake: {e}"),
    }
    true
}
