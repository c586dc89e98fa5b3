//! Raw data (observations, truth series) as gzip-compressed JSON, bounded.

use crate::{ArchiveError, Result};
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use flate2::Compression;
use std::io::{Read, Write};

/// The most compressed raw bytes one run may keep (8 MiB).  Above it the run
/// is archived without its raw data and says why; the result is always kept.
pub const MAX_RAW_BYTES: usize = 8 << 20;

/// The most a raw blob may expand to when read back (256 MiB): an archive
/// edited by hand or damaged must not make `plot` exhaust memory.
pub const MAX_RAW_UNCOMPRESSED: u64 = 256 << 20;

/// Raw data of one or more runs' observations, in the archive's raw format
/// (`docs/archive.md`): `{"format": "pathsonde-raw/1", "runs": [{"run",
/// "observations"}]}`.
pub fn runs<T: serde::Serialize>(runs: &[(u32, &[T])]) -> serde_json::Value {
    serde_json::json!({
        "format": "pathsonde-raw/1",
        "runs": runs.iter().map(|(run, obs)| serde_json::json!({ "run": run, "observations": obs })).collect::<Vec<_>>(),
    })
}

/// The wall-clock start of a run that took `duration` and just ended, as a
/// [`crate::Record`]'s `started`.
pub fn started_ago(duration: std::time::Duration) -> std::time::SystemTime {
    std::time::SystemTime::now()
        .checked_sub(duration)
        .unwrap_or(std::time::UNIX_EPOCH)
}

/// Serializes and compresses `value`.
pub fn compress(value: &serde_json::Value) -> Result<Vec<u8>> {
    let json = serde_json::to_vec(value).map_err(|e| ArchiveError::Invalid(e.to_string()))?;
    let mut enc = GzEncoder::new(Vec::with_capacity(json.len() / 4), Compression::default());
    enc.write_all(&json)
        .and_then(|()| enc.finish())
        .map_err(|e| ArchiveError::Invalid(format!("compressing raw data: {e}")))
}

/// Decompresses and parses a blob written by [`compress`], refusing to
/// expand beyond [`MAX_RAW_UNCOMPRESSED`].
pub fn decompress(blob: &[u8]) -> Result<serde_json::Value> {
    let mut out = Vec::new();
    GzDecoder::new(blob)
        .take(MAX_RAW_UNCOMPRESSED + 1)
        .read_to_end(&mut out)
        .map_err(|e| ArchiveError::Invalid(format!("raw data is damaged: {e}")))?;
    if out.len() as u64 > MAX_RAW_UNCOMPRESSED {
        return Err(ArchiveError::Invalid(format!(
            "raw data expands beyond {MAX_RAW_UNCOMPRESSED} bytes"
        )));
    }
    serde_json::from_slice(&out)
        .map_err(|e| ArchiveError::Invalid(format!("raw data is damaged: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_damage() {
        let v = serde_json::json!({"observations": [1, 2, 3], "s": "x".repeat(10_000)});
        let b = compress(&v).unwrap();
        assert!(b.len() < 1000, "{}", b.len());
        assert_eq!(decompress(&b).unwrap(), v);
        assert!(decompress(&b[..b.len() / 2]).is_err());
        assert!(decompress(b"not gzip").is_err());
    }
}
