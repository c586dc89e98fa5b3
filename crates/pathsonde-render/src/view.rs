//! Reading an archived result without knowing which command made it: its
//! headline figures and its main table, found by shape.  `show`, `export
//! --format csv` and `report --html` all use these, so a command that lands
//! later is shown, exported and reported without new code here.
//!
//! The rules: the headline is every scalar down to three levels of objects; the main table is the
//! first array of objects among `runs`, `trains`, `intervals`, `samples`,
//! `results` (or, failing those, the first such array at the top level); a
//! table's columns are the scalar fields of its rows, in order of first
//! appearance (its `run`/`train`/`peer`/`ttl`/`id` column first).  Keys carry their unit (`_bps`, `_s`, `_bytes`), and
//! [`format_value`] prints them that way.

use pathsonde_core::BitRate;
use serde_json::Value;

/// Preferred names for a result's main table, in order.
const TABLE_KEYS: &[&str] = &[
    "runs",
    "trains",
    "intervals",
    "sub_intervals",
    "samples",
    "results",
    "hops",
];

/// The scalars of a result, in order: the top level's, then those of its
/// objects as `object.field`, down to three levels (`tcp.streams.recommended`),
/// so a result made of sections (`measure`'s `general`, `udp`, `tcp`) shows
/// them all.  Arrays are tables, not headline figures.
pub fn headline(result: &Value) -> Vec<(String, Value)> {
    let Some(o) = result.as_object() else {
        return vec![("value".into(), result.clone())];
    };
    let mut out = Vec::new();
    for (k, v) in o {
        flatten(k, v, 1, &mut out);
    }
    out
}

fn flatten(key: &str, v: &Value, depth: usize, out: &mut Vec<(String, Value)>) {
    match v {
        Value::Object(inner) if depth < 3 => {
            for (f, x) in inner {
                flatten(&format!("{key}.{f}"), x, depth + 1, out);
            }
        }
        v if is_scalar(v) => out.push((key.to_string(), v.clone())),
        _ => {}
    }
}

/// A value printed in one cell: anything but an array or an object.
pub fn is_scalar(v: &Value) -> bool {
    !matches!(v, Value::Array(_) | Value::Object(_))
}

/// A result's main table: its name, columns and rows of scalars.
pub struct Table {
    /// The key the rows were found under (`runs`, `trains`, ...).
    pub name: String,
    /// The scalar fields of the rows, in order of first appearance.
    pub columns: Vec<String>,
    /// One value per column per row (`null` where a row lacks the field).
    pub rows: Vec<Vec<Value>>,
}

fn table_of(name: &str, rows: &[Value]) -> Option<Table> {
    if rows.is_empty() || !rows.iter().all(Value::is_object) {
        return None;
    }
    let mut columns: Vec<String> = Vec::new();
    for r in rows {
        for (k, v) in r.as_object().into_iter().flatten() {
            if is_scalar(v) && !columns.contains(k) {
                columns.push(k.clone());
            }
        }
    }
    // JSON objects come back with sorted keys: put the row's own name first.
    for key in ["ttl", "peer", "train", "run", "id"] {
        if let Some(i) = columns.iter().position(|c| c == key) {
            let c = columns.remove(i);
            columns.insert(0, c);
        }
    }
    let rows = rows
        .iter()
        .map(|r| {
            columns
                .iter()
                .map(|c| r.get(c).cloned().unwrap_or(Value::Null))
                .collect()
        })
        .collect();
    Some(Table {
        name: name.to_string(),
        columns,
        rows,
    })
}

/// The result's main table, if it has one.
pub fn main_table(result: &Value) -> Option<Table> {
    let o = result.as_object()?;
    for k in TABLE_KEYS {
        if let Some(t) = o
            .get(*k)
            .and_then(Value::as_array)
            .and_then(|a| table_of(k, a))
        {
            return Some(t);
        }
    }
    o.iter()
        .find_map(|(k, v)| v.as_array().and_then(|a| table_of(k, a)))
}

/// A value for a person, in the unit its key names.
pub fn format_value(key: &str, v: &Value) -> String {
    // `rtt_s.min` takes its unit from `rtt_s`.
    if let Some((parent, field)) = key.rsplit_once('.') {
        let own = format_value(field, v);
        if own != format_value("", v) || !v.is_f64() {
            return own;
        }
        return format_value(parent, v);
    }
    match v {
        Value::Null => "-".into(),
        Value::Number(n) => {
            let Some(x) = n.as_f64() else {
                return n.to_string();
            };
            if key.ends_with("_bps") {
                BitRate::from_bps(x).to_string()
            } else if key.ends_with("_s") {
                secs(x)
            } else if key == "error" || key.ends_with("_fraction") || key.ends_with("_error") {
                signed_percent(x)
            } else if n.is_f64() {
                format!("{x:.4}")
            } else {
                n.to_string()
            }
        }
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Seconds in the unit a person would read them in.
fn secs(x: f64) -> String {
    let a = x.abs();
    if a >= 1.0 || a == 0.0 {
        format!("{x:.3} s")
    } else if a >= 1e-3 {
        format!("{:.3} ms", x * 1e3)
    } else {
        format!("{:.1} µs", x * 1e6)
    }
}

/// A CSV field: numbers raw, strings quoted when needed.
pub fn csv_field(v: &Value) -> String {
    let s = match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s
    }
}

/// The table as CSV, header first; without a table, `key,value` rows of the
/// headline.
pub fn csv(result: &Value) -> String {
    let mut out = String::new();
    match main_table(result) {
        Some(t) => {
            out.push_str(
                &t.columns
                    .iter()
                    .map(|c| csv_field(&Value::String(c.clone())))
                    .collect::<Vec<_>>()
                    .join(","),
            );
            out.push('\n');
            for r in &t.rows {
                out.push_str(&r.iter().map(csv_field).collect::<Vec<_>>().join(","));
                out.push('\n');
            }
        }
        None => {
            out.push_str("key,value\n");
            for (k, v) in headline(result) {
                out.push_str(&format!(
                    "{},{}\n",
                    csv_field(&Value::String(k)),
                    csv_field(&v)
                ));
            }
        }
    }
    out
}

/// Milliseconds since the epoch as `YYYY-MM-DD HH:MM:SS UTC`.
pub fn utc(unix_ms: i64) -> String {
    let secs = unix_ms.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        sod / 3600,
        sod / 60 % 60,
        sod % 60
    )
}

/// A signed share in percent with two decimals; one that rounds to zero is
/// `0.00 %`, not `+0.00 %` or `-0.00 %`.
pub fn signed_percent(x: f64) -> String {
    let p = x * 100.0;
    if p.abs() < 0.005 {
        "0.00 %".into()
    } else {
        format!("{p:+.2} %")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn utc_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(951_782_400_000), "2000-02-29 00:00:00 UTC");
        assert_eq!(utc(1_795_262_400_000), "2026-11-21 12:00:00 UTC");
    }

    #[test]
    fn tables_by_shape() {
        let r = json!({"method": "fac2", "available_bps": 1e8, "trains": [
            {"train": 0, "target_bps": 2e8, "car_rate_bps": {"min": 1}},
            {"train": 1, "target_bps": 1e8, "loss_fraction": 0.5}
        ]});
        let t = main_table(&r).unwrap();
        assert_eq!(t.name, "trains");
        assert_eq!(t.columns, ["train", "target_bps", "loss_fraction"]);
        assert_eq!(t.rows[0][2], Value::Null);
        assert_eq!(
            csv(&r),
            "train,target_bps,loss_fraction\n0,200000000.0,\n1,100000000.0,0.5\n"
        );
        assert_eq!(headline(&r).len(), 2);
        let nested = json!({"rtt_s": {"min": 0.001}, "summary": {"median_abs_error": 0.05}, "hosts": {"a": {"b": 1, "c": {"too": "deep"}}}});
        let h = headline(&nested);
        // Keys come back sorted; three levels deep at most.
        let keys: Vec<&str> = h.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            ["hosts.a.b", "rtt_s.min", "summary.median_abs_error"],
            "{h:?}"
        );
        let h = &h[1..];
        assert_eq!(format_value(&h[0].0, &h[0].1), "1.000 ms");
        assert_eq!(format_value("rtt_s.samples", &json!(10)), "10");
        assert_eq!(format_value("duration_s", &json!(2.5)), "2.500 s");
        assert_eq!(format_value("x_s", &json!(0.0000052)), "5.2 µs");
        assert_eq!(format_value(&h[1].0, &h[1].1), "+5.00 %");
        let flat = json!({"a": "x,y", "b": 2});
        assert_eq!(csv(&flat), "key,value\na,\"x,y\"\nb,2\n");
        assert_eq!(format_value("available_bps", &json!(1e8)), "100.00 Mb/s");
    }
}
