//! The values that go in and come out of an archive, whichever store holds
//! it: a [`Record`] to save, a [`Summary`] per `history` line, a whole
//! [`Stored`] run, and [`RunData`], a run exactly as stored (for copying
//! between archives with nothing lost).

use serde::Serialize;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// One measurement to keep: everything [`crate::Archive::save`] needs, in one value.
#[derive(Debug, Clone)]
pub struct Record {
    /// What made it: the command (`abw`, `lab-run`, `demo`, `agent`, ...).
    pub kind: String,
    /// What was measured: a server address, a lab's description.
    pub target: String,
    /// The method, when the command has one (`fac2`, ...).
    pub method: Option<String>,
    /// When the measurement started (wall clock).
    pub started: SystemTime,
    /// How long it took.
    pub duration: Duration,
    /// One line for `history` (e.g. "A 208.1 Mb/s, C 300 Mb/s").
    pub summary: String,
    /// The exact object the command prints under `--json`.
    pub result: serde_json::Value,
    /// Raw data for re-analysis and plots (observations, truth series), kept
    /// compressed when it fits [`crate::MAX_RAW_BYTES`].
    pub raw: Option<serde_json::Value>,
}

/// One line of `history`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Summary {
    pub id: i64,
    pub kind: String,
    pub target: String,
    pub method: Option<String>,
    /// Milliseconds since the Unix epoch.
    pub started_unix_ms: i64,
    pub duration_s: f64,
    pub summary: String,
    /// The PostgreSQL role that wrote the run (docs/fleet.md); absent in a
    /// SQLite file, where everything is the one user's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    pub raw: RawInfo,
}

/// Whether a run kept its raw data, how big it is, or why it has none.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RawInfo {
    pub present: bool,
    pub compressed_bytes: Option<u64>,
    pub uncompressed_bytes: Option<u64>,
    pub note: Option<String>,
}

/// A whole archived run.
#[derive(Debug, Clone, Serialize)]
pub struct Stored {
    #[serde(flatten)]
    pub summary: Summary,
    pub software: String,
    pub result: serde_json::Value,
}

/// A run exactly as a store keeps it, every column but the id: what
/// [`crate::Store::insert`] writes and [`crate::Store::fetch`] reads back.
/// Copying an archive moves these, so the result's JSON text, the software
/// that wrote it and the compressed raw bytes arrive unchanged.
#[derive(Debug, Clone, PartialEq)]
pub struct RunData {
    pub kind: String,
    pub target: String,
    pub method: Option<String>,
    pub started_unix_ms: i64,
    pub duration_s: f64,
    pub summary: String,
    /// `pathsonde X.Y.Z` of the writer.
    pub software: String,
    /// The result's JSON text, byte for byte as first written.
    pub result_json: String,
    /// Why the run has no raw data, when it has none for a reason.
    pub raw_note: Option<String>,
    /// The role that wrote it, when a PostgreSQL archive recorded one.  A
    /// run written without one gets the writing role on PostgreSQL and
    /// none in SQLite.
    pub agent: Option<String>,
    /// The run's UUID when its writer gave it one (a fleet agent does,
    /// docs/fleet.md): a second write of the same UUID stores nothing new,
    /// so a retry after a lost commit acknowledgement adds no duplicate.
    pub run_uuid: Option<String>,
    pub raw: Option<RawBlob>,
}

/// A run's raw data as stored: compressed bytes and how to read them.
#[derive(Clone, PartialEq)]
pub struct RawBlob {
    /// `json+gzip` today.
    pub encoding: String,
    pub uncompressed_bytes: i64,
    pub data: Vec<u8>,
}

impl std::fmt::Debug for RawBlob {
    /// Megabytes of gzip are no use in a panic message: their size is.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawBlob")
            .field("encoding", &self.encoding)
            .field("uncompressed_bytes", &self.uncompressed_bytes)
            .field("compressed_bytes", &self.data.len())
            .finish()
    }
}

impl RunData {
    /// The run as the stores keep it: the result serialized once (that
    /// text is what every later read returns) and the raw data compressed,
    /// or dropped with a note above [`crate::MAX_RAW_BYTES`].  Done before
    /// any transaction opens, so a store's write lock is held only for the
    /// inserts.
    pub fn from_record(rec: &Record) -> crate::Result<RunData> {
        let result_json = serde_json::to_string(&rec.result)
            .map_err(|e| crate::ArchiveError::Invalid(format!("result is not JSON: {e}")))?;
        let (raw, raw_note) = match &rec.raw {
            None => (None, None),
            Some(v) => {
                let uncompressed = serde_json::to_vec(v).map(|b| b.len()).unwrap_or(0);
                let data = crate::raw::compress(v)?;
                if data.len() > crate::MAX_RAW_BYTES {
                    let note = format!(
                        "raw data not kept: {} bytes compressed exceeds the {} byte bound",
                        data.len(),
                        crate::MAX_RAW_BYTES
                    );
                    (None, Some(note))
                } else {
                    let blob = RawBlob {
                        encoding: "json+gzip".into(),
                        uncompressed_bytes: uncompressed as i64,
                        data,
                    };
                    (Some(blob), None)
                }
            }
        };
        Ok(RunData {
            kind: rec.kind.clone(),
            target: rec.target.clone(),
            method: rec.method.clone(),
            started_unix_ms: unix_ms(rec.started),
            duration_s: rec.duration.as_secs_f64(),
            summary: rec.summary.clone(),
            software: format!("pathsonde {}", env!("CARGO_PKG_VERSION")),
            result_json,
            raw_note,
            agent: None,
            run_uuid: None,
            raw,
        })
    }
}

/// Milliseconds since the Unix epoch, negative before it.
pub(crate) fn unix_ms(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_millis().min(i64::MAX as u128) as i64,
        Err(e) => -(e.duration().as_millis().min(i64::MAX as u128) as i64),
    }
}

pub(crate) fn now_ms() -> i64 {
    unix_ms(SystemTime::now())
}

/// A [`Stored`] from its summary and the stored JSON text.
pub(crate) fn stored(
    summary: Summary,
    software: String,
    result_json: &str,
) -> crate::Result<Stored> {
    let result = serde_json::from_str(result_json).map_err(|e| {
        crate::ArchiveError::Invalid(format!("run {}'s result is damaged: {e}", summary.id))
    })?;
    Ok(Stored {
        summary,
        software,
        result,
    })
}

/// The summary's raw-data facts from the columns both stores return.
pub(crate) fn raw_info(
    compressed: Option<i64>,
    uncompressed: Option<i64>,
    note: Option<String>,
) -> RawInfo {
    RawInfo {
        present: compressed.is_some(),
        compressed_bytes: compressed.map(|b| b.max(0) as u64),
        uncompressed_bytes: uncompressed.map(|b| b.max(0) as u64),
        note,
    }
}
