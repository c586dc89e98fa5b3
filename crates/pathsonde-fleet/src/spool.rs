//! The spool: results and skips an agent could not write (the database is
//! down, restarting, unreachable) kept on local disk, and written when it
//! returns, exactly once.
//!
//! One file per run or skip, `MS-UUID.json` (the slot's time first, so
//! they are written back in order), made as `….tmp`, synced, renamed into
//! place and the directory synced: a file is either whole or absent, and a
//! leftover `.tmp` (the agent was killed while writing it) is removed on
//! open.  Flushing writes each entry keyed by its run UUID (the archive's
//! unique `runs.run_uuid`, `skips.run_uuid`) and only then removes the file,
//! so an agent killed between the commit and the removal, or a commit whose
//! acknowledgement was lost, writes it again harmlessly: the database keeps
//! one copy.

use crate::lease::{FleetDb, Skip};
use crate::{FleetError, Result};
use pathsonde_archive::{RawBlob, RunData};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};

/// A run as spooled: every column of the archive's run, raw bytes included.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpooledRun {
    pub kind: String,
    pub target: String,
    pub method: Option<String>,
    pub started_unix_ms: i64,
    pub duration_s: f64,
    pub summary: String,
    pub software: String,
    pub result_json: String,
    pub raw_note: Option<String>,
    pub run_uuid: String,
    pub raw: Option<SpooledRaw>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpooledRaw {
    pub encoding: String,
    pub uncompressed_bytes: i64,
    pub data: Vec<u8>,
}

/// What a spool file holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "entry", rename_all = "snake_case")]
pub enum SpoolEntry {
    Run(SpooledRun),
    Skip(Skip),
}

impl SpoolEntry {
    /// A run to keep; it must carry its run UUID (that is what makes the
    /// write idempotent).
    pub fn run(run: &RunData) -> SpoolEntry {
        SpoolEntry::Run(SpooledRun {
            kind: run.kind.clone(),
            target: run.target.clone(),
            method: run.method.clone(),
            started_unix_ms: run.started_unix_ms,
            duration_s: run.duration_s,
            summary: run.summary.clone(),
            software: run.software.clone(),
            result_json: run.result_json.clone(),
            raw_note: run.raw_note.clone(),
            run_uuid: run
                .run_uuid
                .clone()
                .expect("a fleet run carries its run UUID"),
            raw: run.raw.as_ref().map(|b| SpooledRaw {
                encoding: b.encoding.clone(),
                uncompressed_bytes: b.uncompressed_bytes,
                data: b.data.clone(),
            }),
        })
    }

    pub fn run_uuid(&self) -> &str {
        match self {
            SpoolEntry::Run(r) => &r.run_uuid,
            SpoolEntry::Skip(s) => &s.run_uuid,
        }
    }

    fn at_ms(&self) -> i64 {
        match self {
            SpoolEntry::Run(r) => r.started_unix_ms,
            SpoolEntry::Skip(s) => s.scheduled.0,
        }
    }

    fn run_data(r: &SpooledRun) -> RunData {
        RunData {
            kind: r.kind.clone(),
            target: r.target.clone(),
            method: r.method.clone(),
            started_unix_ms: r.started_unix_ms,
            duration_s: r.duration_s,
            summary: r.summary.clone(),
            software: r.software.clone(),
            result_json: r.result_json.clone(),
            raw_note: r.raw_note.clone(),
            agent: None,
            run_uuid: Some(r.run_uuid.clone()),
            raw: r.raw.as_ref().map(|b| RawBlob {
                encoding: b.encoding.clone(),
                uncompressed_bytes: b.uncompressed_bytes,
                data: b.data.clone(),
            }),
        }
    }

    /// Writes this entry to the database: `true` when written now, `false`
    /// when its UUID was there already.
    pub fn write(&self, db: &mut FleetDb) -> Result<bool> {
        match self {
            SpoolEntry::Run(r) => Ok(db.archive().save_run(&SpoolEntry::run_data(r))?.1),
            SpoolEntry::Skip(s) => db.record_skip(s),
        }
    }
}

/// Where an entry went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Written {
    /// In the database (`fresh` false: it was there already).
    Stored { fresh: bool },
    /// On local disk, because the database said `reason`.
    Spooled { path: PathBuf, reason: String },
}

/// What a flush did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FlushReport {
    /// Entries written now.
    pub written: u64,
    /// Entries the database had already (a retry after a lost ack).
    pub already_there: u64,
    /// Files that were not a spool entry, renamed `….bad` and left.
    pub damaged: u64,
    /// Entries the database refused for good (their data, not the
    /// connection: [`FleetError::refused_for_good`]), renamed
    /// `….rejected` and left on disk with why, so one bad entry does not
    /// hold back the rest.
    pub rejected: Vec<(PathBuf, String)>,
}

/// A spool directory.
#[derive(Debug, Clone)]
pub struct Spool {
    dir: PathBuf,
}

fn io_err(path: &Path, what: &str, e: std::io::Error) -> FleetError {
    FleetError::Spool {
        path: path.display().to_string(),
        message: format!("{what}: {e}"),
    }
}

impl Spool {
    /// Opens (creating) the spool at `dir`, removing half-written files.
    pub fn open(dir: &Path) -> Result<Spool> {
        std::fs::create_dir_all(dir).map_err(|e| io_err(dir, "creating", e))?;
        for f in std::fs::read_dir(dir).map_err(|e| io_err(dir, "listing", e))? {
            let p = f.map_err(|e| io_err(dir, "listing", e))?.path();
            if p.extension().is_some_and(|x| x == "tmp") {
                std::fs::remove_file(&p).map_err(|e| io_err(&p, "removing", e))?;
            }
        }
        Ok(Spool {
            dir: dir.to_path_buf(),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Keeps `entry` durably: a whole file or none.
    pub fn put(&self, entry: &SpoolEntry) -> Result<PathBuf> {
        let name = format!("{:013}-{}.json", entry.at_ms().max(0), entry.run_uuid());
        let path = self.dir.join(&name);
        let tmp = self.dir.join(format!("{name}.tmp"));
        let text = serde_json::to_vec(entry).map_err(|e| FleetError::Spool {
            path: path.display().to_string(),
            message: format!("encoding: {e}"),
        })?;
        let mut f = std::fs::File::create(&tmp).map_err(|e| io_err(&tmp, "creating", e))?;
        f.write_all(&text)
            .and_then(|_| f.sync_all())
            .map_err(|e| io_err(&tmp, "writing", e))?;
        drop(f);
        std::fs::rename(&tmp, &path).map_err(|e| io_err(&path, "renaming into place", e))?;
        self.sync_dir()?;
        Ok(path)
    }

    fn sync_dir(&self) -> Result<()> {
        std::fs::File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| io_err(&self.dir, "syncing", e))
    }

    /// The entries waiting, oldest first.
    pub fn pending(&self) -> Result<Vec<PathBuf>> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(&self.dir)
            .map_err(|e| io_err(&self.dir, "listing", e))?
            .filter_map(|f| f.ok().map(|f| f.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        v.sort();
        Ok(v)
    }

    fn first_slots_path(&self) -> PathBuf {
        self.dir.join("first-slots.state")
    }

    /// The first slot this host's agent ever scheduled for each test id,
    /// kept beside the spool: where the record of a test starts when the
    /// agent was killed in its very first slot, before the archive had any
    /// run or skip of it.
    pub fn first_slots(&self) -> std::collections::BTreeMap<String, crate::UnixMs> {
        std::fs::read(self.first_slots_path())
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    /// Remembers `slot` as the first slot of `test` unless one is known.
    pub fn remember_first_slot(&self, test: &str, slot: crate::UnixMs) -> Result<()> {
        let mut all = self.first_slots();
        if all.contains_key(test) {
            return Ok(());
        }
        all.insert(test.to_string(), slot);
        let path = self.first_slots_path();
        let tmp = path.with_extension("state.tmp");
        let text = serde_json::to_vec(&all).expect("a map of times is JSON");
        let mut f = std::fs::File::create(&tmp).map_err(|e| io_err(&tmp, "creating", e))?;
        f.write_all(&text)
            .and_then(|_| f.sync_all())
            .map_err(|e| io_err(&tmp, "writing", e))?;
        std::fs::rename(&tmp, &path).map_err(|e| io_err(&path, "renaming into place", e))?;
        self.sync_dir()
    }

    /// Writes every waiting entry to `db`, oldest first, removing each
    /// file once its write is committed.  Stops at the first database
    /// error (the rest stay for the next flush).
    pub fn flush(&self, db: &mut FleetDb) -> Result<FlushReport> {
        let mut report = FlushReport::default();
        for p in self.pending()? {
            let text = std::fs::read(&p).map_err(|e| io_err(&p, "reading", e))?;
            let entry: SpoolEntry = match serde_json::from_slice(&text) {
                Ok(e) => e,
                Err(_) => {
                    let bad = p.with_extension("bad");
                    std::fs::rename(&p, &bad).map_err(|e| io_err(&p, "setting aside", e))?;
                    report.damaged += 1;
                    continue;
                }
            };
            match entry.write(db) {
                Ok(true) => report.written += 1,
                Ok(false) => report.already_there += 1,
                Err(e) if e.refused_for_good() => {
                    let aside = p.with_extension("rejected");
                    std::fs::rename(&p, &aside).map_err(|e| io_err(&p, "setting aside", e))?;
                    report.rejected.push((aside, e.to_string()));
                    continue;
                }
                Err(e) => return Err(e),
            }
            std::fs::remove_file(&p).map_err(|e| io_err(&p, "removing", e))?;
        }
        if report.written + report.already_there > 0 || !report.rejected.is_empty() {
            self.sync_dir()?;
        }
        Ok(report)
    }

    /// Writes `entry` to the database at `url` (connecting first when
    /// `db` is `None`, dropping the connection when it fails) or, when it
    /// cannot, keeps it here.  Only a spool that cannot be written is an
    /// error: a result is never dropped silently.
    pub fn write_or_spool(
        &self,
        db: &mut Option<FleetDb>,
        url: &str,
        entry: &SpoolEntry,
    ) -> Result<Written> {
        let attempt = (|| {
            if db.is_none() {
                *db = Some(FleetDb::connect(url)?);
            }
            entry.write(db.as_mut().expect("connected"))
        })();
        match attempt {
            Ok(fresh) => Ok(Written::Stored { fresh }),
            Err(e) => {
                *db = None;
                let path = self.put(entry)?;
                Ok(Written::Spooled {
                    path,
                    reason: e.to_string(),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A spool file reads back as what was put, whole, in slot order.
    #[test]
    fn entries_round_trip_through_files() {
        let dir = std::env::temp_dir().join(format!("pathsonde-spool-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let spool = Spool::open(&dir).unwrap();
        let run = SpooledRun {
            kind: "mesh".into(),
            target: "a->b".into(),
            method: Some("fac2".into()),
            started_unix_ms: 2_000,
            duration_s: 1.5,
            summary: "A 1 Mb/s".into(),
            software: "pathsonde 0".into(),
            result_json: "{\"x\":1}".into(),
            raw_note: None,
            run_uuid: crate::new_run_uuid(),
            raw: Some(SpooledRaw {
                encoding: "json+gzip".into(),
                uncompressed_bytes: 3,
                data: vec![0, 255, 7],
            }),
        };
        let skip = Skip {
            run_uuid: crate::new_run_uuid(),
            test: "t/a->b".into(),
            source: "a".into(),
            destination: "b".into(),
            scheduled: crate::UnixMs(1_000),
            recorded: crate::UnixMs(1_500),
            reason: "busy".into(),
        };
        spool.put(&SpoolEntry::Run(run.clone())).unwrap();
        spool.put(&SpoolEntry::Skip(skip.clone())).unwrap();
        let back: Vec<SpoolEntry> = spool
            .pending()
            .unwrap()
            .iter()
            .map(|p| serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap())
            .collect();
        assert_eq!(back, vec![SpoolEntry::Skip(skip), SpoolEntry::Run(run)]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
