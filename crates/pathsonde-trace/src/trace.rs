//! A latency trace and its file formats.
//!
//! A trace is one constant-rate stream: packet `i` was sent at
//! `sent_ns[i]` (relative to the first) and took `latency_ns[i]` one way, or
//! was lost ([`LOST`]).  Formats (full layout in `docs/trace.md`):
//!
//! - **binary** (`.pstrace`): 12-byte preamble (magic `PSTRACE\0`, version,
//!   header length), a 40-byte little-endian header (rate, packet size,
//!   flags, nominal interval, clock, resolution, record count), then 16-byte
//!   records (send offset ns, latency ns or `i64::MIN` for a loss).  Reading
//!   checks the magic, version, header length, the count against a bound and
//!   against the file's length before allocating, and every record's values:
//!   untrusted input yields an error, never a panic or a huge allocation.
//! - **CSV**: our export `seq,sent_s,latency_s` (a loss is an empty
//!   latency), or any file of one latency per line in seconds with an
//!   optional header line — so traces from other instruments can be analysed.

use crate::error::{Result, TraceError};
use pathsonde_core::{BitRate, Bytes, ClockSource, DurationNs};
use serde::Serialize;
use std::io::{BufRead, Read, Write};

/// The latency value that marks a lost packet.
pub const LOST: i64 = i64::MIN;

/// Most records a trace may hold (320 MB of binary records): a bound on
/// what an untrusted file can make us allocate.
pub const MAX_RECORDS: u64 = 20_000_000;

/// Longest CSV line accepted.
const MAX_CSV_LINE: usize = 4096;

pub const MAGIC: [u8; 8] = *b"PSTRACE\0";
pub const VERSION: u16 = 1;
/// Header bytes after the 12-byte preamble in version 1.
pub const HEADER_LEN: u16 = 40;
const PREAMBLE_LEN: usize = 12;
const RECORD_LEN: u64 = 16;

/// Flag bit: latencies are true one-way delays (sender and receiver read one
/// clock, as in the lab); without it they carry an unknown constant offset.
pub const FLAG_ABSOLUTE: u32 = 1;
/// Flag bit: the records' send offsets are measured (else nominal or absent).
pub const FLAG_SEND_TIMES: u32 = 2;

/// What is known about how a trace was taken.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TraceMeta {
    /// Offered load; `None` when unknown (a CSV of latencies).
    pub rate: Option<BitRate>,
    /// IP size of every packet; `None` when unknown.
    pub packet_size: Option<Bytes>,
    /// Nominal spacing of the stream; `None` when unknown.
    pub interval: Option<DurationNs>,
    /// Which clock took the stamps; `None` when unknown.
    pub clock: Option<ClockSource>,
    /// Smallest step of that clock; `None` when unknown.
    pub resolution: Option<DurationNs>,
    /// Latencies are true one-way delays (one clock at both ends).
    pub absolute: bool,
    /// `sent_ns` holds measured send offsets.
    pub measured_send_times: bool,
}

impl TraceMeta {
    /// Nothing known: what a plain CSV of latencies gives.
    pub fn unknown() -> Self {
        TraceMeta {
            rate: None,
            packet_size: None,
            interval: None,
            clock: None,
            resolution: None,
            absolute: false,
            measured_send_times: false,
        }
    }
}

/// One stream's per-packet latencies.
#[derive(Debug, Clone, PartialEq)]
pub struct Trace {
    pub meta: TraceMeta,
    /// Send time of each packet relative to the first, ns (empty when unknown).
    pub sent_ns: Vec<i64>,
    /// One-way latency of each packet in ns, or [`LOST`].
    pub latency_ns: Vec<i64>,
}

impl Trace {
    /// A trace of latencies (ns, [`LOST`] for a loss) at a nominal spacing.
    pub fn from_latencies(meta: TraceMeta, latency_ns: Vec<i64>) -> Trace {
        Trace {
            meta,
            sent_ns: Vec::new(),
            latency_ns,
        }
    }

    pub fn len(&self) -> usize {
        self.latency_ns.len()
    }
    pub fn is_empty(&self) -> bool {
        self.latency_ns.is_empty()
    }
    pub fn lost(&self) -> usize {
        self.latency_ns.iter().filter(|&&l| l == LOST).count()
    }

    /// Received latencies in microseconds, in order (losses skipped).
    pub fn received_us(&self) -> Vec<f64> {
        self.latency_ns
            .iter()
            .filter(|&&l| l != LOST)
            .map(|&l| l as f64 / 1e3)
            .collect()
    }

    /// The series in microseconds with each loss replaced by the previous
    /// received latency (the first received one for leading losses): the
    /// evenly spaced series spectra and models need.
    pub fn filled_us(&self) -> Vec<f64> {
        let first = self
            .latency_ns
            .iter()
            .find(|&&l| l != LOST)
            .map_or(0.0, |&l| l as f64 / 1e3);
        let mut last = first;
        self.latency_ns
            .iter()
            .map(|&l| {
                if l != LOST {
                    last = l as f64 / 1e3;
                }
                last
            })
            .collect()
    }

    /// The stream's spacing: nominal if known, else the measured mean
    /// spacing of the send offsets, else `None`.
    pub fn interval(&self) -> Option<DurationNs> {
        if let Some(i) = self.meta.interval.filter(|i| i.ns() > 0) {
            return Some(i);
        }
        if self.sent_ns.len() >= 2 {
            let span = self.sent_ns[self.sent_ns.len() - 1] - self.sent_ns[0];
            if span > 0 {
                return Some(DurationNs::from_ns(span / (self.sent_ns.len() as i64 - 1)));
            }
        }
        None
    }

    /// The middle `n` packets (the paper takes a 30 000-packet slice from the
    /// middle of each capture to avoid edge effects).
    pub fn middle(&self, n: usize) -> Trace {
        if n >= self.len() {
            return self.clone();
        }
        let start = (self.len() - n) / 2;
        let base = self.sent_ns.get(start).copied().unwrap_or(0);
        Trace {
            meta: self.meta.clone(),
            sent_ns: if self.sent_ns.len() == self.len() {
                self.sent_ns[start..start + n]
                    .iter()
                    .map(|s| s - base)
                    .collect()
            } else {
                Vec::new()
            },
            latency_ns: self.latency_ns[start..start + n].to_vec(),
        }
    }

    // ---------------------------------------------------------------- binary

    /// Writes the binary format.
    pub fn write_binary(&self, w: &mut dyn Write) -> Result<()> {
        let io = |e| TraceError::io("writing the trace", e);
        let mut head = Vec::with_capacity(PREAMBLE_LEN + HEADER_LEN as usize);
        head.extend_from_slice(&MAGIC);
        head.extend_from_slice(&VERSION.to_le_bytes());
        head.extend_from_slice(&HEADER_LEN.to_le_bytes());
        let m = &self.meta;
        head.extend_from_slice(&m.rate.map_or(0.0, |r| r.bps()).to_le_bytes());
        head.extend_from_slice(
            &(m.packet_size
                .map_or(0, |b| b.get().min(u64::from(u32::MAX))) as u32)
                .to_le_bytes(),
        );
        let has_sent = self.sent_ns.len() == self.len() && m.measured_send_times;
        let flags =
            if m.absolute { FLAG_ABSOLUTE } else { 0 } | if has_sent { FLAG_SEND_TIMES } else { 0 };
        head.extend_from_slice(&flags.to_le_bytes());
        head.extend_from_slice(&m.interval.map_or(0, |i| i.ns()).to_le_bytes());
        head.push(clock_code(m.clock));
        head.extend_from_slice(&[0, 0, 0]);
        head.extend_from_slice(
            &(m.resolution
                .map_or(0, |r| r.ns().clamp(0, i64::from(u32::MAX))) as u32)
                .to_le_bytes(),
        );
        head.extend_from_slice(&(self.len() as u64).to_le_bytes());
        w.write_all(&head).map_err(io)?;
        let mut buf = Vec::with_capacity(16 * 4096);
        let interval = m.interval.map_or(0, |i| i.ns());
        for (i, &lat) in self.latency_ns.iter().enumerate() {
            let sent = if self.sent_ns.len() == self.len() {
                self.sent_ns[i]
            } else {
                interval.saturating_mul(i as i64)
            };
            buf.extend_from_slice(&sent.to_le_bytes());
            buf.extend_from_slice(&lat.to_le_bytes());
            if buf.len() >= 16 * 4096 {
                w.write_all(&buf).map_err(io)?;
                buf.clear();
            }
        }
        w.write_all(&buf).map_err(io)?;
        Ok(())
    }

    /// Reads the binary format.  `len` is the input's total length when
    /// known (a file's size): the record count must match it exactly.
    pub fn read_binary(r: &mut dyn Read, len: Option<u64>) -> Result<Trace> {
        let what = "trace file";
        let bad = |why: String| TraceError::format(what, why);
        let mut pre = [0u8; PREAMBLE_LEN];
        r.read_exact(&mut pre)
            .map_err(|_| bad("shorter than the 12-byte preamble".into()))?;
        if pre[..8] != MAGIC {
            return Err(bad("not a pathsonde trace (bad magic)".into()));
        }
        let version = u16::from_le_bytes([pre[8], pre[9]]);
        if version != VERSION {
            return Err(bad(format!(
                "format version {version}; this build reads version {VERSION}"
            )));
        }
        let hlen = u16::from_le_bytes([pre[10], pre[11]]);
        if hlen < HEADER_LEN {
            return Err(bad(format!(
                "header of {hlen} bytes, version 1 needs at least {HEADER_LEN}"
            )));
        }
        let mut head = vec![0u8; usize::from(hlen)];
        r.read_exact(&mut head)
            .map_err(|_| bad("header cut short".into()))?;
        let f64_at = |o: usize| f64::from_le_bytes(head[o..o + 8].try_into().expect("8 bytes"));
        let u32_at = |o: usize| u32::from_le_bytes(head[o..o + 4].try_into().expect("4 bytes"));
        let i64_at = |o: usize| i64::from_le_bytes(head[o..o + 8].try_into().expect("8 bytes"));
        let rate = f64_at(0);
        if !(rate.is_finite() && (0.0..=1e13).contains(&rate)) {
            return Err(bad(format!("rate {rate} b/s is not a rate")));
        }
        let size = u32_at(8);
        let flags = u32_at(12);
        let interval = i64_at(16);
        if !(0..=3_600_000_000_000).contains(&interval) {
            return Err(bad(format!("interval {interval} ns out of range")));
        }
        let clock = clock_of(head[24]).ok_or_else(|| bad(format!("clock code {}", head[24])))?;
        let resolution = u32_at(28);
        let count = u64::from_le_bytes(head[32..40].try_into().expect("8 bytes"));
        if count > MAX_RECORDS {
            return Err(bad(format!(
                "{count} records exceeds the limit of {MAX_RECORDS}"
            )));
        }
        if let Some(total) = len {
            let want = PREAMBLE_LEN as u64 + u64::from(hlen) + count * RECORD_LEN;
            if total != want {
                return Err(bad(format!(
                    "{total} bytes long, but the header promises {count} records ({want} bytes)"
                )));
            }
        }
        let mut sent_ns = Vec::with_capacity(count.min(1 << 20) as usize);
        let mut latency_ns = Vec::with_capacity(count.min(1 << 20) as usize);
        let mut rec = [0u8; RECORD_LEN as usize];
        for i in 0..count {
            r.read_exact(&mut rec)
                .map_err(|_| bad(format!("cut short at record {i} of {count}")))?;
            let s = i64::from_le_bytes(rec[..8].try_into().expect("8 bytes"));
            let l = i64::from_le_bytes(rec[8..].try_into().expect("8 bytes"));
            if l != LOST && !(-3_600_000_000_000..=3_600_000_000_000).contains(&l) {
                return Err(bad(format!("record {i}: latency {l} ns out of range")));
            }
            sent_ns.push(s);
            latency_ns.push(l);
        }
        let mut extra = [0u8; 1];
        if len.is_none() && matches!(r.read(&mut extra), Ok(n) if n > 0) {
            return Err(bad(format!("data after the {count} promised records")));
        }
        Ok(Trace {
            meta: TraceMeta {
                rate: (rate > 0.0).then(|| BitRate::from_bps(rate)),
                packet_size: (size > 0).then(|| Bytes(u64::from(size))),
                interval: (interval > 0).then(|| DurationNs::from_ns(interval)),
                clock,
                resolution: (resolution > 0).then(|| DurationNs::from_ns(i64::from(resolution))),
                absolute: flags & FLAG_ABSOLUTE != 0,
                measured_send_times: flags & FLAG_SEND_TIMES != 0,
            },
            sent_ns,
            latency_ns,
        })
    }

    // ------------------------------------------------------------------- CSV

    /// Writes `seq,sent_s,latency_s` with a header line; a loss has an
    /// empty latency.
    pub fn write_csv(&self, w: &mut dyn Write) -> Result<()> {
        let io = |e| TraceError::io("writing CSV", e);
        let mut out = std::io::BufWriter::new(w);
        writeln!(out, "seq,sent_s,latency_s").map_err(io)?;
        let interval = self.meta.interval.map_or(0, |i| i.ns());
        for (i, &l) in self.latency_ns.iter().enumerate() {
            let sent = self
                .sent_ns
                .get(i)
                .copied()
                .unwrap_or(interval.saturating_mul(i as i64));
            if l == LOST {
                writeln!(out, "{i},{:.9},", sent as f64 / 1e9).map_err(io)?;
            } else {
                writeln!(out, "{i},{:.9},{:.9}", sent as f64 / 1e9, l as f64 / 1e9).map_err(io)?;
            }
        }
        out.flush().map_err(io)?;
        Ok(())
    }

    /// Reads CSV: a column named `latency_s` (our export) if the first line
    /// names one, else the last field of each line; one latency in seconds
    /// per line; an optional header line (a first line that is not a
    /// number); empty, `nan` or `lost` marks a loss.  Blank lines and lines
    /// starting with `#` are skipped.
    pub fn read_csv(r: &mut dyn BufRead) -> Result<Trace> {
        let what = "CSV trace";
        let bad = |why: String| TraceError::format(what, why);
        let mut latency_ns = Vec::new();
        let mut sent_ns = Vec::new();
        let mut column: Option<usize> = None;
        let mut sent_col: Option<usize> = None;
        let mut line = String::new();
        let mut lineno = 0u64;
        let mut first = true;
        loop {
            line.clear();
            let n = (&mut *r)
                .take(MAX_CSV_LINE as u64 + 1)
                .read_line(&mut line)
                .map_err(|e| TraceError::io("reading CSV", e))?;
            if n == 0 {
                break;
            }
            lineno += 1;
            if n > MAX_CSV_LINE && !line.ends_with('\n') {
                return Err(bad(format!(
                    "line {lineno} longer than {MAX_CSV_LINE} bytes"
                )));
            }
            let t = line.trim();
            if t.is_empty() || t.starts_with('#') {
                continue;
            }
            let fields: Vec<&str> = t.split([',', ';', '\t']).map(str::trim).collect();
            if first {
                first = false;
                let is_header = fields
                    .iter()
                    .any(|f| !f.is_empty() && f.parse::<f64>().is_err() && !is_loss(f));
                if is_header {
                    column = fields
                        .iter()
                        .position(|f| f.eq_ignore_ascii_case("latency_s"));
                    sent_col = fields.iter().position(|f| f.eq_ignore_ascii_case("sent_s"));
                    continue;
                }
            }
            let idx = column.unwrap_or(fields.len() - 1);
            let f = fields.get(idx).copied().unwrap_or("");
            if is_loss(f) {
                latency_ns.push(LOST);
            } else {
                let v: f64 = f.parse().map_err(|_| {
                    bad(format!("line {lineno}: '{f}' is not a latency in seconds"))
                })?;
                if !(v.is_finite() && v.abs() <= 3600.0) {
                    return Err(bad(format!("line {lineno}: latency {v} s out of range")));
                }
                latency_ns.push((v * 1e9).round() as i64);
            }
            if let Some(sc) = sent_col {
                let s: f64 = fields
                    .get(sc)
                    .and_then(|s| s.parse().ok())
                    .filter(|s: &f64| s.is_finite() && s.abs() <= 1e6)
                    .ok_or_else(|| bad(format!("line {lineno}: no send time in sent_s")))?;
                sent_ns.push((s * 1e9).round() as i64);
            }
            if latency_ns.len() as u64 > MAX_RECORDS {
                return Err(bad(format!("more than {MAX_RECORDS} values")));
            }
        }
        if latency_ns.is_empty() {
            return Err(bad("no latency values".into()));
        }
        let mut meta = TraceMeta::unknown();
        if sent_ns.len() == latency_ns.len() {
            meta.measured_send_times = true;
        } else {
            sent_ns.clear();
        }
        Ok(Trace {
            meta,
            sent_ns,
            latency_ns,
        })
    }

    /// Reads a file in either format (binary if it starts with the magic).
    pub fn read_path(path: &std::path::Path) -> Result<Trace> {
        let ctx = || format!("opening {}", path.display());
        let file = std::fs::File::open(path).map_err(|e| TraceError::io(ctx(), e))?;
        let len = file.metadata().map_err(|e| TraceError::io(ctx(), e))?.len();
        let mut r = std::io::BufReader::with_capacity(1 << 16, file);
        let head = r.fill_buf().map_err(|e| TraceError::io(ctx(), e))?;
        if head.starts_with(&MAGIC) {
            Trace::read_binary(&mut r, Some(len))
        } else if head.starts_with(b"PSTRACE") {
            Err(TraceError::format("trace file", "damaged magic"))
        } else {
            Trace::read_csv(&mut r)
        }
    }

    /// Writes the binary format to `path`.
    pub fn write_path(&self, path: &std::path::Path) -> Result<()> {
        let f = std::fs::File::create(path)
            .map_err(|e| TraceError::io(format!("creating {}", path.display()), e))?;
        let mut w = std::io::BufWriter::new(f);
        self.write_binary(&mut w)?;
        w.flush()
            .map_err(|e| TraceError::io(format!("writing {}", path.display()), e))
    }
}

fn is_loss(f: &str) -> bool {
    f.is_empty() || f.eq_ignore_ascii_case("nan") || f.eq_ignore_ascii_case("lost")
}

fn clock_code(c: Option<ClockSource>) -> u8 {
    match c {
        None => 0,
        Some(ClockSource::Hardware) => 1,
        Some(ClockSource::KernelSoftware) => 2,
        Some(ClockSource::UserSpace) => 3,
        Some(ClockSource::Simulated) => 4,
    }
}

fn clock_of(code: u8) -> Option<Option<ClockSource>> {
    Some(match code {
        0 => None,
        1 => Some(ClockSource::Hardware),
        2 => Some(ClockSource::KernelSoftware),
        3 => Some(ClockSource::UserSpace),
        4 => Some(ClockSource::Simulated),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> Trace {
        Trace {
            meta: TraceMeta {
                rate: Some(BitRate::from_mbps(300.0)),
                packet_size: Some(Bytes(1024)),
                interval: Some(DurationNs::from_ns(27_307)),
                clock: Some(ClockSource::KernelSoftware),
                resolution: Some(DurationNs::from_ns(1)),
                absolute: true,
                measured_send_times: true,
            },
            sent_ns: vec![0, 27_300, 54_610, 81_920],
            latency_ns: vec![33_000, LOST, 34_400, 35_800],
        }
    }

    #[test]
    fn binary_round_trip() {
        let t = sample();
        let mut buf = Vec::new();
        t.write_binary(&mut buf).unwrap();
        assert_eq!(buf.len(), 12 + 40 + 16 * 4);
        let back = Trace::read_binary(&mut &buf[..], Some(buf.len() as u64)).unwrap();
        assert_eq!(back, t);
    }

    #[test]
    fn csv_round_trip_and_foreign_csv() {
        let t = sample();
        let mut buf = Vec::new();
        t.write_csv(&mut buf).unwrap();
        let back = Trace::read_csv(&mut &buf[..]).unwrap();
        assert_eq!(back.latency_ns, t.latency_ns);
        assert_eq!(back.sent_ns, t.sent_ns);
        let foreign = "latency\n0.000033\n\n# comment\n0.0000344\nlost\n";
        let f = Trace::read_csv(&mut foreign.as_bytes()).unwrap();
        assert_eq!(f.latency_ns, vec![33_000, 34_400, LOST]);
        let bare = "3.3e-5\n3.44e-5\n";
        assert_eq!(Trace::read_csv(&mut bare.as_bytes()).unwrap().len(), 2);
        assert!(Trace::read_csv(&mut "a\nb\n".as_bytes()).is_err());
        assert!(Trace::read_csv(&mut "".as_bytes()).is_err());
        assert!(Trace::read_csv(&mut "1e300\n".as_bytes()).is_err());
    }

    #[test]
    fn damaged_binaries_are_refused() {
        let mut buf = Vec::new();
        sample().write_binary(&mut buf).unwrap();
        // Cut short, wrong length, bad magic, a huge count.
        assert!(
            Trace::read_binary(&mut &buf[..buf.len() - 1], Some(buf.len() as u64 - 1)).is_err()
        );
        assert!(Trace::read_binary(&mut &buf[..buf.len() - 1], None).is_err());
        let mut m = buf.clone();
        m[0] = b'X';
        assert!(Trace::read_binary(&mut &m[..], None).is_err());
        let mut c = buf.clone();
        c[44..52].copy_from_slice(&u64::MAX.to_le_bytes());
        let e = Trace::read_binary(&mut &c[..], None).unwrap_err();
        assert!(e.to_string().contains("limit"), "{e}");
        let mut v = buf.clone();
        v[8] = 9;
        assert!(Trace::read_binary(&mut &v[..], None).is_err());
        let mut extra = buf.clone();
        extra.push(0);
        assert!(Trace::read_binary(&mut &extra[..], None).is_err());
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let _ = Trace::read_binary(&mut &bytes[..], Some(bytes.len() as u64));
            let _ = Trace::read_binary(&mut &bytes[..], None);
            let _ = Trace::read_csv(&mut &bytes[..]);
        }

        #[test]
        fn mutated_headers_never_panic(pos in 0usize..52, val in any::<u8>()) {
            let mut buf = Vec::new();
            sample().write_binary(&mut buf).unwrap();
            buf[pos] = val;
            let _ = Trace::read_binary(&mut &buf[..], Some(buf.len() as u64));
        }
    }
}
