//! The results archive from the command line: the hook every measurement
//! command calls ([`finish`] or [`save`]), and `history`, `show`, `export`,
//! `rm`, `plot`, `report` and `archive copy`.  The archive itself (a
//! SQLite file or a PostgreSQL database) is `pathsonde-archive`; this
//! module only hands it the location the user gave.
//!
//! Wiring a new command (see docs/archive.md): build a
//! [`pathsonde_archive::Record`] with the command's `--json` object as
//! `result` and call `archive_cmd::finish(record, || text_report)` where the
//! command used to print its result.  That one call archives the run (unless
//! `--no-save`), prints the result in the mode chosen (text, `--json`,
//! `--json-lines`) with the archive id added, and says where it was saved.

mod copy;

use crate::exit::Exit;
use crate::{html, output, plot, view, Failure};
use clap::{Subcommand, ValueEnum};
use pathsonde_archive::{Archive, ArchiveError, Location, Record, Stored};
use pathsonde_render::summary::{lab_summary, lab_target};
use pathsonde_render::{plot_files, show};
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

// `abw_summary` is named here too, for the commands that archive an abw run
// (`abw`, the agent, the mesh).
pub use pathsonde_render::summary::abw_summary;

/// Where to archive: the command's `--archive` / `--no-save` / `--no-raw`
/// ([`crate::args::SaveFlags`]), set once by `main`.
pub use crate::args::SaveFlags as Settings;

static SETTINGS: OnceLock<Settings> = OnceLock::new();

/// Called once by `main` with the command's archive flags.
pub fn init(settings: Settings) {
    let _ = SETTINGS.set(settings);
}

fn settings() -> Settings {
    SETTINGS.get().cloned().unwrap_or_default()
}

/// The archive a config file names (the agent's `archive = "…"`), set
/// once by the command that read it; `--archive` wins over it, and it over
/// `$PATHSONDE_ARCHIVE` and the default.
static CONFIG_ARCHIVE: OnceLock<PathBuf> = OnceLock::new();

/// Called by a command whose config names an archive, before it saves;
/// checked like `--archive` (a missing directory, a password in a URL).
pub fn use_config_archive(location: &str) -> Result<(), Failure> {
    let p = PathBuf::from(location);
    check_explicit(&p)?;
    let _ = CONFIG_ARCHIVE.set(p);
    Ok(())
}

/// The location given explicitly: `--archive`, else a config's `archive`.
fn explicit() -> Option<PathBuf> {
    settings().archive.or_else(|| CONFIG_ARCHIVE.get().cloned())
}

/// The archive in use: `--archive`, else a config's `archive`, else
/// `$PATHSONDE_ARCHIVE`, else the per-user default.  A SQLite file or a
/// PostgreSQL URL (docs/fleet.md); its `Display` shows no password.
pub fn archive_location() -> Result<Location, Failure> {
    match explicit() {
        Some(p) => Ok(Location::parse(p)),
        None => pathsonde_archive::default_path()
            .map(Location::parse)
            .map_err(archive_failure),
    }
}

/// Opens the archive in use: one the user named must be in a directory
/// that exists; the default location's directory is created.
fn open_archive(location: &Location) -> Result<Archive, ArchiveError> {
    if explicit().is_some() {
        Archive::open(location)
    } else {
        Archive::open_default(location)
    }
}

/// Why `--archive LOCATION` cannot be used, checked before a command runs
/// so that a typo costs no measurement: a file's directory must exist; a
/// PostgreSQL URL must parse and carry no password.
pub fn check_explicit(location: &Path) -> Result<(), Failure> {
    Archive::check_location(location).map_err(|e| Failure {
        exit: Exit::Usage,
        message: e.to_string(),
    })
}

pub fn archive_failure(e: ArchiveError) -> Failure {
    let exit = match e {
        ArchiveError::NoSuchRun(_)
        | ArchiveError::NoLocation(_)
        | ArchiveError::Foreign { .. }
        | ArchiveError::BadLocation { .. } => Exit::Usage,
        _ => Exit::Internal,
    };
    Failure {
        exit,
        message: e.to_string(),
    }
}

/// Where a run went: `{"id", "path"}`, `{"error"}`, or `None` under `--no-save`.
pub fn save(rec: &Record) -> Option<Value> {
    let settings = settings();
    if settings.no_save {
        return None;
    }
    let stripped;
    let rec = if settings.no_raw && rec.raw.is_some() {
        stripped = Record {
            raw: None,
            ..rec.clone()
        };
        &stripped
    } else {
        rec
    };
    let saved = archive_location().map_err(|f| f.message).and_then(|p| {
        open_archive(&p)
            .and_then(|mut a| a.save(rec))
            .map(|id| (id, p))
            .map_err(|e| e.to_string())
    });
    Some(match saved {
        Ok((id, p)) => {
            let v = json!({ "id": id, "path": p.to_string() });
            output::event("saved", v.clone());
            v
        }
        Err(e) => {
            // The measurement stands; losing the copy is worth a warning,
            // not a failed command.
            eprintln!("pathsonde: warning: the result was not archived: {e}");
            output::event("archive_error", json!({ "message": e }));
            json!({ "error": e })
        }
    })
}

/// The one call a measurement command makes at its end: archive `rec`, then
/// print its result in the mode chosen, with `"archive": {"id", "path"}`
/// added to the JSON, and in text mode a last line saying where it went.
pub fn finish(rec: Record, text: impl FnOnce() -> String) {
    let saved = save(&rec);
    let mut result = rec.result;
    if let (Some(o), Some(s)) = (result.as_object_mut(), &saved) {
        o.insert("archive".into(), s.clone());
    }
    output::result(&result, || {
        let mut t = text();
        if let Some(id) = saved.as_ref().and_then(|s| s["id"].as_i64()) {
            let archive = explicit().map(Location::parse);
            let _ = writeln!(t, "\n{}", show::saved_hint(id, archive.as_ref()));
        }
        t
    });
}

pub use pathsonde_archive::{raw_runs as raw_observations, started_ago};

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ExportFormat {
    /// The run's facts, its result and its raw data, one JSON object.
    Json,
    /// The result's main table (runs, trains, ...) as CSV, header first.
    Csv,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq)]
pub enum PlotFormat {
    Png,
    Svg,
    Both,
}

#[derive(Subcommand)]
pub enum ArchiveCommand {
    /// List archived runs, newest first (docs/archive.md).
    History {
        #[command(flatten)]
        json: crate::args::JsonFlags,
        /// How many runs to list.
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// Only runs made by this command (abw, lab-run, demo, agent, ...).
        #[arg(long)]
        kind: Option<String>,
        #[command(flatten)]
        archive: crate::args::ArchiveFlag,
    },
    /// Show one archived run: its facts, headline figures and main table.
    Show {
        /// The run's id (from `history`).
        id: i64,
        #[command(flatten)]
        json: crate::args::JsonFlags,
        #[command(flatten)]
        archive: crate::args::ArchiveFlag,
    },
    /// Export one archived run as JSON (result and raw data) or CSV (main table).
    Export {
        /// The run's id (from `history`).
        id: i64,
        /// json: facts, result and raw data; csv: the main table.
        #[arg(long, value_enum, default_value = "json")]
        format: ExportFormat,
        /// Write to this file instead of stdout.
        #[arg(long, short)]
        output: Option<PathBuf>,
        #[command(flatten)]
        archive: crate::args::ArchiveFlag,
    },
    /// Remove one archived run and its raw data.
    Rm {
        /// The run's id (from `history`).
        id: i64,
        #[command(flatten)]
        json: crate::args::JsonFlags,
        #[command(flatten)]
        archive: crate::args::ArchiveFlag,
    },
    /// Plot one archived run (PNG and/or SVG files) without re-running it.
    Plot {
        /// The run's id (from `history`).
        id: i64,
        /// Directory for the files (`run<ID>-<plot>.png|svg`).
        #[arg(long, short, default_value = ".")]
        out: PathBuf,
        /// Which image formats to write.
        #[arg(long, value_enum, default_value = "both")]
        format: PlotFormat,
        #[command(flatten)]
        json: crate::args::JsonFlags,
        #[command(flatten)]
        archive: crate::args::ArchiveFlag,
    },
    /// Write one self-contained HTML page for an archived run: tables and
    /// inline plots, nothing fetched from anywhere.
    Report {
        /// The run's id (from `history`).
        id: i64,
        /// The HTML file to write.
        #[arg(long)]
        html: PathBuf,
        #[command(flatten)]
        json: crate::args::JsonFlags,
        #[command(flatten)]
        archive: crate::args::ArchiveFlag,
    },
    /// Whole archives: `archive copy FROM TO` (SQLite or PostgreSQL, either
    /// way), `archive init LOCATION`.
    Archive {
        #[command(subcommand)]
        command: copy::ArchiveAdmin,
    },
}

impl ArchiveCommand {
    /// The output flags and the archive to read.
    pub fn flags(&self) -> (crate::args::JsonFlags, Settings) {
        match self {
            ArchiveCommand::History { json, archive, .. }
            | ArchiveCommand::Show { json, archive, .. }
            | ArchiveCommand::Rm { json, archive, .. }
            | ArchiveCommand::Plot { json, archive, .. }
            | ArchiveCommand::Report { json, archive, .. } => (*json, archive.settings()),
            ArchiveCommand::Export { archive, .. } => (Default::default(), archive.settings()),
            ArchiveCommand::Archive { command } => (command.json(), Default::default()),
        }
    }
}

/// Opens the archive for reading; a missing file (a database without
/// pathsonde's tables) is an empty archive, not one to create.
fn open_existing() -> Result<Option<Archive>, Failure> {
    let p = archive_location()?;
    Archive::open_existing(&p).map_err(archive_failure)
}

fn open_run(id: i64) -> Result<(Archive, Stored), Failure> {
    let mut a = open_existing()?.ok_or_else(|| archive_failure(ArchiveError::NoSuchRun(id)))?;
    let s = a.get(id).map_err(archive_failure)?;
    Ok((a, s))
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), Failure> {
    std::fs::write(path, bytes).map_err(|e| Failure {
        exit: Exit::Internal,
        message: format!("writing {}: {e}", path.display()),
    })
}

pub fn run(cmd: ArchiveCommand) -> Result<(), Failure> {
    match cmd {
        ArchiveCommand::History { limit, kind, .. } => history(limit, kind.as_deref()),
        ArchiveCommand::Archive { command } => copy::run(command),
        ArchiveCommand::Show { id, .. } => {
            let (_, s) = open_run(id)?;
            output::result(&serde_json::to_value(&s).unwrap_or_default(), || {
                show::show_text(&s)
            });
            Ok(())
        }
        ArchiveCommand::Export {
            id, format, output, ..
        } => {
            let (mut a, s) = open_run(id)?;
            let text = match format {
                ExportFormat::Json => {
                    let raw = a.raw(id).map_err(archive_failure)?;
                    show::export_json(&s, raw)
                }
                ExportFormat::Csv => view::csv(&s.result),
            };
            match output {
                Some(p) => write_file(&p, text.as_bytes())?,
                None => print!("{text}"),
            }
            Ok(())
        }
        ArchiveCommand::Rm { id, .. } => {
            let mut a =
                open_existing()?.ok_or_else(|| archive_failure(ArchiveError::NoSuchRun(id)))?;
            a.remove(id).map_err(archive_failure)?;
            output::result(&json!({ "removed": id }), || format!("removed run {id}\n"));
            Ok(())
        }
        ArchiveCommand::Plot {
            id, out, format, ..
        } => {
            let (mut a, s) = open_run(id)?;
            let raw = a.raw(id).map_err(archive_failure)?;
            let plots = archived_plots(id, &s, raw.as_ref())?;
            if plots.is_empty() {
                return Err(Failure {
                    exit: Exit::Usage,
                    message: format!("run {id} ({}) has nothing to plot", s.summary.kind),
                });
            }
            let (svg, png) = (format != PlotFormat::Png, format != PlotFormat::Svg);
            let files = plot_files::write(&plots, id, &out, svg, png).map_err(|e| Failure {
                exit: Exit::Internal,
                message: e.to_string(),
            })?;
            let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
            output::result(&json!({ "id": id, "files": names }), || {
                names.iter().map(|n| format!("wrote {n}\n")).collect()
            });
            Ok(())
        }
        ArchiveCommand::Report { id, html: file, .. } => {
            let (mut a, s) = open_run(id)?;
            let raw = a.raw(id).map_err(archive_failure)?;
            let plots = archived_plots(id, &s, raw.as_ref())?;
            let page = html::report(&s, &plots).map_err(|e| plot_failure(&file, e))?;
            write_file(&file, page.as_bytes())?;
            output::result(
                &json!({ "id": id, "html": file.display().to_string(), "plots": plots.len() }),
                || format!("wrote {} ({} plots)\n", file.display(), plots.len()),
            );
            Ok(())
        }
    }
}

/// The pictures of an archived run; a field they need that cannot be read
/// (renamed, mistyped) fails the command, naming it.
fn archived_plots(id: i64, s: &Stored, raw: Option<&Value>) -> Result<Vec<plot::Plot>, Failure> {
    pathsonde_render::archived::plots(&s.summary.kind, &s.result, raw).map_err(|e| Failure {
        exit: Exit::Internal,
        message: format!("run {id}: {e}"),
    })
}

fn plot_failure(f: &Path, e: pathsonde_render::DrawError) -> Failure {
    Failure {
        exit: Exit::Internal,
        message: format!("drawing {}: {e}", f.display()),
    }
}

fn history(limit: usize, kind: Option<&str>) -> Result<(), Failure> {
    let path = archive_location()?;
    let runs = match open_existing()? {
        Some(mut a) => a.list(limit, kind).map_err(archive_failure)?,
        None => Vec::new(),
    };
    let v = json!({ "archive": path.to_string(), "runs": runs });
    output::result(&v, || show::history_text(&path, &runs));
    Ok(())
}

/// The archive record of a lab run (`lab run`, `demo`): the `--json` object
/// as result, every kept run's observations as raw data.
pub fn lab_record(
    kind: &str,
    r: &pathsonde_lab::run::LabRunReport,
    result: Value,
    duration: std::time::Duration,
) -> Record {
    let obs: Vec<(u32, &[pathsonde_core::Observation])> = r
        .runs
        .iter()
        .zip(&r.observations)
        .filter(|(_, o)| !o.is_empty())
        .map(|(rec, o)| (rec.run, o.as_slice()))
        .collect();
    Record {
        kind: kind.into(),
        target: lab_target(r),
        method: r.runs.first().map(|x| x.method.clone()),
        started: started_ago(duration),
        duration,
        summary: lab_summary(r),
        result,
        raw: (!obs.is_empty()).then(|| raw_observations(&obs)),
    }
}
