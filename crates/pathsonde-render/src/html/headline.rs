//! The card a reader of `report --html` sees first: the run's answer in
//! plain words.  For a measurement of available bandwidth, A with its band
//! (or "at least" when nothing bounds it from above or a host bounded it),
//! C and X when the method inferred them, the RTT, the verdict and the
//! advisory; for `capacity`, RFC 9097's maximum and the delay under it; for
//! `hops`, the tight and narrow links; for any other run, its one-line
//! summary.
//!
//! Which of these a result is, is found by its shape (`available_bps`,
//! `max_ip_layer_capacity_bps`, `hops`), as `show` finds its table.  The
//! fields are then read through typed views, as `archived` reads the plots'
//! fields: a field renamed or mistyped by a producer is a line in the card
//! naming it, where a lookup by key printed nothing and no error (and the
//! advisory, whose entries are objects, was read as strings and never shown).

use pathsonde_archive::Stored;
use pathsonde_core::{BitRate, DurationNs};
use serde::de::{Deserialize, DeserializeOwned, Deserializer};
use serde_json::Value;

/// A value the producer writes as `null` when it has none: the key must be
/// there (a missing key is an error), its value may be `null`.
fn nullable<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    Option::<T>::deserialize(d)
}

/// `rtt_s` and `rtt_echo_s` of `abw`'s result.
#[derive(serde::Deserialize)]
struct Rtt {
    median: f64,
}

/// One entry of `abw`'s `advisory`: a host limit, why, and what to do.
#[derive(serde::Deserialize)]
struct Advice {
    why: String,
    #[serde(deserialize_with = "nullable")]
    fix: Option<String>,
}

/// An available-bandwidth result (`pathsonde_render::report::abw_json`:
/// `abw`, `demo`, `agent`).
#[derive(serde::Deserialize)]
struct Abw {
    available_bps: f64,
    available_low_bps: f64,
    #[serde(deserialize_with = "nullable")]
    available_high_bps: Option<f64>,
    #[serde(deserialize_with = "nullable")]
    capacity_bps: Option<f64>,
    #[serde(deserialize_with = "nullable")]
    cross_traffic_bps: Option<f64>,
    rtt_s: Rtt,
    #[serde(deserialize_with = "nullable")]
    rtt_echo_s: Option<Rtt>,
    #[serde(deserialize_with = "nullable")]
    host_limited: Option<String>,
    advisory: Vec<Advice>,
}

/// `capacity`'s summary, as far as the card reads it.
#[derive(serde::Deserialize)]
struct CapacitySummary {
    #[serde(deserialize_with = "nullable")]
    pdv_min_s: Option<f64>,
    #[serde(deserialize_with = "nullable")]
    pdv_max_s: Option<f64>,
    #[serde(deserialize_with = "nullable")]
    min_rtt_s: Option<f64>,
}

/// A `capacity` result (`pathsonde_render::capacity::result_json`).
#[derive(serde::Deserialize)]
struct Capacity {
    #[serde(deserialize_with = "nullable")]
    max_ip_layer_capacity_bps: Option<f64>,
    #[serde(deserialize_with = "nullable")]
    max_time_s: Option<f64>,
    #[serde(deserialize_with = "nullable")]
    mean_ip_layer_capacity_bps: Option<f64>,
    #[serde(deserialize_with = "nullable")]
    summary: Option<CapacitySummary>,
    notes: Vec<String>,
}

/// One end of a link in `hops`' result.
#[derive(serde::Deserialize)]
struct Link {
    from_ttl: u64,
    #[serde(deserialize_with = "nullable")]
    from_address: Option<String>,
    to_ttl: u64,
    #[serde(deserialize_with = "nullable")]
    to_address: Option<String>,
}

/// `hops`' tight link.
#[derive(serde::Deserialize)]
struct Tight {
    #[serde(flatten)]
    link: Link,
    available_bps: f64,
    agreeing: u64,
    considered: u64,
}

/// `hops`' narrow link.
#[derive(serde::Deserialize)]
struct Narrow {
    #[serde(flatten)]
    link: Link,
    rate_bps: f64,
}

/// A `hops` result (`pathsonde_render::hops::to_json`).
#[derive(serde::Deserialize)]
struct Hops {
    #[serde(deserialize_with = "nullable")]
    tight_link: Option<Tight>,
    #[serde(deserialize_with = "nullable")]
    narrow_link: Option<Narrow>,
    silent: Vec<u64>,
    notes: Vec<String>,
}

fn rate(bps: f64) -> String {
    BitRate::from_bps(bps).to_string()
}

fn secs(s: f64) -> String {
    DurationNs::from_secs_f64(s).to_string()
}

/// Reads `r` as a `T`, or says which field could not be read.
fn view<T: DeserializeOwned>(r: &Value, what: &str) -> Result<T, String> {
    T::deserialize(r).map_err(|e| format!("this {what} result cannot be read: {e}"))
}

/// The card's lines (the answer first) and the advisory.
pub(super) fn lines(stored: &Stored) -> (Vec<String>, Vec<String>) {
    let r = &stored.result;
    let has = |k: &str| r.get(k).is_some();
    let read = if has("available_bps") {
        view::<Abw>(r, "available-bandwidth").map(abw)
    } else if has("max_ip_layer_capacity_bps") {
        view::<Capacity>(r, "capacity").map(|c| (capacity(c), Vec::new()))
    } else if r.get("hops").is_some_and(Value::is_array) {
        view::<Hops>(r, "hops").map(|h| (hops(h), Vec::new()))
    } else {
        Ok((vec![stored.summary.summary.clone()], Vec::new()))
    };
    read.unwrap_or_else(|e| (vec![stored.summary.summary.clone(), e], Vec::new()))
}

fn abw(a: Abw) -> (Vec<String>, Vec<String>) {
    let mut lines = Vec::new();
    lines.push(match (&a.host_limited, a.available_high_bps) {
        (None, Some(hi)) => format!(
            "Available bandwidth {} (95 % band {} to {})",
            rate(a.available_bps),
            rate(a.available_low_bps),
            rate(hi)
        ),
        _ => format!("Available bandwidth at least {}", rate(a.available_bps)),
    });
    if let Some(c) = a.capacity_bps {
        lines.push(format!("Capacity {}", rate(c)));
    }
    if let Some(x) = a.cross_traffic_bps {
        lines.push(format!("Cross traffic {}", rate(x)));
    }
    let rtt = a.rtt_echo_s.unwrap_or(a.rtt_s);
    lines.push(format!("Round-trip time {}", secs(rtt.median)));
    lines.push(match &a.host_limited {
        Some(why) => format!("Host-limited: {why}"),
        None => "The path, not the hosts, set this result.".into(),
    });
    let advisory = a
        .advisory
        .into_iter()
        .map(|x| match x.fix {
            Some(fix) => format!("{} {fix}", x.why),
            None => x.why,
        })
        .collect();
    (lines, advisory)
}

fn capacity(c: Capacity) -> Vec<String> {
    let mut lines = Vec::new();
    let Some(max) = c.max_ip_layer_capacity_bps else {
        lines.push("No maximum IP-layer capacity: no sub-interval completed".into());
        lines.extend(c.notes.into_iter().map(|n| format!("Note: {n}")));
        return lines;
    };
    let at = c
        .max_time_s
        .map_or(String::new(), |t| format!(" at {}", secs(t)));
    lines.push(format!("Maximum IP-layer capacity {}{at}", rate(max)));
    if let Some(mean) = c.mean_ip_layer_capacity_bps {
        lines.push(format!("Mean over the test {}", rate(mean)));
    }
    if let Some(s) = c.summary {
        if let (Some(lo), Some(hi)) = (s.pdv_min_s, s.pdv_max_s) {
            lines.push(format!(
                "One-way delay variation under load {} to {}",
                secs(lo),
                secs(hi)
            ));
        }
        if let Some(rtt) = s.min_rtt_s {
            lines.push(format!("Minimum round-trip time {}", secs(rtt)));
        }
    }
    lines.extend(c.notes.into_iter().map(|n| format!("Note: {n}")));
    lines
}

/// `TTL 3 (10.0.3.1)`, or "this host" for TTL 0.
fn hop(ttl: u64, addr: &Option<String>) -> String {
    match (ttl, addr) {
        (0, _) => "this host".to_string(),
        (n, Some(a)) => format!("TTL {n} ({a})"),
        (n, None) => format!("TTL {n}"),
    }
}

/// Which link limits the path, in words, then the narrow link, the silent
/// hops and the run's notes.
fn hops(h: Hops) -> Vec<String> {
    let mut lines = Vec::new();
    lines.push(match &h.tight_link {
        Some(t) => format!(
            "Tight link {} → {}: available about {} ({} of {} trains agree)",
            hop(t.link.from_ttl, &t.link.from_address),
            hop(t.link.to_ttl, &t.link.to_address),
            rate(t.available_bps),
            t.agreeing,
            t.considered
        ),
        None => "Tight link not found".into(),
    });
    if let Some(n) = &h.narrow_link {
        lines.push(format!(
            "Narrow link {} → {}: capacity at least {}",
            hop(n.link.from_ttl, &n.link.from_address),
            hop(n.link.to_ttl, &n.link.to_address),
            rate(n.rate_bps)
        ));
    }
    if !h.silent.is_empty() {
        let ttls: Vec<String> = h.silent.iter().map(u64::to_string).collect();
        lines.push(format!("Silent hops: TTL {}", ttls.join(", ")));
    }
    lines.extend(h.notes.into_iter().map(|n| format!("Note: {n}")));
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn stored(result: Value) -> Stored {
        Stored {
            summary: pathsonde_archive::Summary {
                id: 1,
                kind: "abw".into(),
                target: "x".into(),
                method: Some("fac2".into()),
                started_unix_ms: 0,
                duration_s: 1.0,
                summary: "one line".into(),
                agent: None,
                raw: pathsonde_archive::RawInfo {
                    present: false,
                    compressed_bytes: None,
                    uncompressed_bytes: None,
                    note: None,
                },
            },
            software: "test".into(),
            result,
        }
    }

    #[test]
    fn a_renamed_field_is_named_not_skipped() {
        let mut abw = json!({
            "available_bps": 80e6, "available_low_bps": 70e6, "available_high_bps": 90e6,
            "capacity_bps": null, "cross_traffic_bps": null,
            "rtt_s": {"median": 0.001}, "rtt_echo_s": null, "host_limited": null,
            "advisory": [{"why": "The receiver dropped packets.", "fix": "Raise its buffer."}],
        });
        let (card, advisory) = lines(&stored(abw.clone()));
        assert_eq!(
            card[0],
            "Available bandwidth 80.00 Mb/s (95 % band 70.00 Mb/s to 90.00 Mb/s)"
        );
        assert_eq!(
            advisory,
            vec!["The receiver dropped packets. Raise its buffer."]
        );
        abw.as_object_mut().unwrap().remove("available_low_bps");
        let (card, _) = lines(&stored(abw));
        assert!(card[1].contains("available_low_bps"), "{card:?}");
    }
}
