//! Network interfaces: from /sys/class/net (speed, MTU, driver, state) and,
//! where `ethtool` is installed, offloads (`-k`), interrupt coalescing
//! (`-c`) and timestamping capabilities (`-T`).  The coalescing settings
//! are turned into the bunching a receiver would show via the paper's
//! interrupt interval I_time ([`pathsonde_core::hostmodel`]).

use super::{read_trimmed, Known};
use pathsonde_core::hostmodel::coalescing_bunch;
use pathsonde_core::{BitRate, Bytes};
use serde::{Deserialize, Serialize};
use std::process::Command;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Interface {
    pub name: String,
    pub operstate: Known<String>,
    /// Link speed from sysfs (Mb/s × 1e6).
    pub speed_bps: Known<BitRate>,
    pub mtu_bytes: Known<u64>,
    pub driver: Known<String>,
    pub offloads: Known<Offloads>,
    pub coalescing: Known<Coalescing>,
    pub timestamping: Known<Timestamping>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Offloads {
    /// generic-segmentation-offload
    pub gso: Known<bool>,
    /// generic-receive-offload
    pub gro: Known<bool>,
    /// tcp-segmentation-offload
    pub tso: Known<bool>,
    /// large-receive-offload
    pub lro: Known<bool>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Coalescing {
    pub adaptive_rx: Known<bool>,
    pub rx_usecs: Known<u32>,
    pub rx_frames: Known<u32>,
    pub tx_usecs: Known<u32>,
    pub tx_frames: Known<u32>,
    /// What these settings make a receiver see for back-to-back 1500-byte
    /// packets at `bunch_line_speed_bps`: the interrupt period (the earlier
    /// of rx-usecs and I_time(rx-frames)) and packets per interrupt.
    pub bunch_interval_ns: Known<i64>,
    pub bunch_packets: Known<u32>,
    /// The line speed the bunch is computed at: the link's, or 1 Gb/s
    /// assumed when the link does not report one (`bunch_speed_assumed`).
    pub bunch_line_speed_bps: BitRate,
    pub bunch_speed_assumed: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Timestamping {
    pub hardware_transmit: bool,
    pub hardware_receive: bool,
    pub software_transmit: bool,
    pub software_receive: bool,
    /// PTP hardware clock index (/dev/ptpN), if any.
    pub phc_index: Known<i32>,
    /// Capability lines as ethtool prints them.
    pub capabilities: Vec<String>,
}

/// Parses `ethtool -k` output.
pub fn parse_features(text: &str) -> Offloads {
    let get = |name: &str| -> Known<bool> {
        for line in text.lines() {
            if let Some((k, v)) = line.trim().split_once(':') {
                if k.trim() == name {
                    return Known::Value(v.trim().starts_with("on"));
                }
            }
        }
        Known::unavailable(format!("ethtool -k: no {name}"))
    };
    Offloads {
        gso: get("generic-segmentation-offload"),
        gro: get("generic-receive-offload"),
        tso: get("tcp-segmentation-offload"),
        lro: get("large-receive-offload"),
    }
}

/// Parses `ethtool -c` output; the bunch is filled in by [`with_bunch`].
pub fn parse_coalesce(text: &str) -> Coalescing {
    let get = |name: &str| -> Known<u32> {
        for line in text.lines() {
            if let Some((k, v)) = line.trim().split_once(':') {
                if k.trim() == name {
                    let v = v.trim();
                    return v.parse().map(Known::Value).unwrap_or_else(|_| {
                        Known::unavailable(format!("ethtool -c: {name} is '{v}' on this driver"))
                    });
                }
            }
        }
        Known::unavailable(format!("ethtool -c: no {name}"))
    };
    let adaptive_rx = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Adaptive RX:"))
        .map(|rest| match rest.split_whitespace().next() {
            Some("on") => Known::Value(true),
            Some("off") => Known::Value(false),
            other => Known::unavailable(format!("ethtool -c: Adaptive RX {other:?}")),
        })
        .unwrap_or_else(|| Known::unavailable("ethtool -c: no Adaptive RX line"));
    Coalescing {
        adaptive_rx,
        rx_usecs: get("rx-usecs"),
        rx_frames: get("rx-frames"),
        tx_usecs: get("tx-usecs"),
        tx_frames: get("tx-frames"),
        bunch_interval_ns: Known::unavailable("not computed"),
        bunch_packets: Known::unavailable("not computed"),
        bunch_line_speed_bps: BitRate::ZERO,
        bunch_speed_assumed: false,
    }
}

/// Fills in the receive bunching from rx-usecs / rx-frames at `speed`
/// (or 1 Gb/s when unknown), for 1500-byte packets.
pub fn with_bunch(mut c: Coalescing, speed: Option<BitRate>) -> Coalescing {
    let (line, assumed) = match speed {
        Some(s) if s.bps() > 0.0 => (s, false),
        _ => (BitRate::from_bps(1e9), true),
    };
    c.bunch_line_speed_bps = line;
    c.bunch_speed_assumed = assumed;
    if c.rx_usecs.value().is_none() && c.rx_frames.value().is_none() {
        let why = "neither rx-usecs nor rx-frames is reported";
        c.bunch_interval_ns = Known::unavailable(why);
        c.bunch_packets = Known::unavailable(why);
        return c;
    }
    match coalescing_bunch(
        c.rx_usecs.value().copied(),
        c.rx_frames.value().copied(),
        Bytes(1500),
        line,
    ) {
        Some(b) => {
            c.bunch_interval_ns = Known::Value(b.interval.ns());
            c.bunch_packets = Known::Value(b.packets);
        }
        None => {
            c.bunch_interval_ns = Known::unavailable("no line speed");
            c.bunch_packets = Known::unavailable("no line speed");
        }
    }
    c
}

/// Parses `ethtool -T` output.
pub fn parse_timestamping(text: &str) -> Timestamping {
    let mut caps = Vec::new();
    let mut in_caps = false;
    let mut phc = Known::unavailable("ethtool -T: no PTP Hardware Clock line");
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("Capabilities:") {
            in_caps = true;
            continue;
        }
        if let Some(rest) = t.strip_prefix("PTP Hardware Clock:") {
            let rest = rest.trim();
            phc = rest
                .parse::<i32>()
                .map(Known::Value)
                .unwrap_or_else(|_| Known::unavailable(format!("no PTP hardware clock ({rest})")));
        }
        if in_caps {
            if line.starts_with('\t') || line.starts_with(' ') {
                let cap = t.split_whitespace().next().unwrap_or("").to_string();
                if !cap.is_empty() {
                    caps.push(cap);
                }
            } else {
                in_caps = false;
            }
        }
    }
    let has = |c: &str| caps.iter().any(|x| x == c);
    Timestamping {
        hardware_transmit: has("hardware-transmit"),
        hardware_receive: has("hardware-receive"),
        software_transmit: has("software-transmit"),
        software_receive: has("software-receive"),
        phc_index: phc,
        capabilities: caps,
    }
}

/// Runs `ethtool ARGS IF`; the error is the reason the field is unknown.
fn ethtool(flag: &str, name: &str) -> Result<String, String> {
    let out = Command::new("ethtool")
        .args([flag, name])
        .output()
        .map_err(|e| format!("ethtool not runnable ({e})"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let err = err.trim();
        return Err(format!(
            "ethtool {flag}: {}",
            if err.is_empty() { "failed" } else { err }
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn ethtool_installed() -> bool {
    Command::new("ethtool")
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

pub fn probe() -> Vec<Interface> {
    let mut names: Vec<String> = match std::fs::read_dir("/sys/class/net") {
        Ok(d) => d
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => return Vec::new(),
    };
    names.sort();
    let have_ethtool = ethtool_installed();
    names.into_iter().map(|n| one(&n, have_ethtool)).collect()
}

fn one(name: &str, have_ethtool: bool) -> Interface {
    let dir = format!("/sys/class/net/{name}");
    let speed_bps = match read_trimmed(&format!("{dir}/speed")) {
        Ok(s) => match s.parse::<i64>() {
            Ok(mbps) if mbps > 0 => Known::Value(BitRate::from_bps(mbps as f64 * 1e6)),
            Ok(_) => Known::unavailable(format!(
                "speed: the driver reports {s} (unknown; usual for virtio and veth)"
            )),
            Err(e) => Known::unavailable(format!("speed '{s}': {e}")),
        },
        Err(_) => {
            Known::unavailable("speed: not reported in sysfs (virtual interface or link down)")
        }
    };
    let mtu_bytes = read_trimmed(&format!("{dir}/mtu"))
        .and_then(|s| s.parse::<u64>().map_err(|e| e.to_string()))
        .into();
    let driver = match std::fs::read_link(format!("{dir}/device/driver")) {
        Ok(p) => Known::Value(
            p.file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default(),
        ),
        Err(_) => Known::unavailable("no device/driver link in sysfs (a virtual interface)"),
    };
    let no_ethtool = || "ethtool not installed".to_string();
    let (offloads, coalescing, timestamping) = if have_ethtool {
        let speed = speed_bps.value().copied();
        (
            ethtool("-k", name).map(|t| parse_features(&t)).into(),
            ethtool("-c", name)
                .map(|t| with_bunch(parse_coalesce(&t), speed))
                .into(),
            ethtool("-T", name).map(|t| parse_timestamping(&t)).into(),
        )
    } else {
        (
            Known::unavailable(no_ethtool()),
            Known::unavailable(no_ethtool()),
            Known::unavailable(no_ethtool()),
        )
    };
    Interface {
        name: name.to_string(),
        operstate: read_trimmed(&format!("{dir}/operstate")).into(),
        speed_bps,
        mtu_bytes,
        driver,
        offloads,
        coalescing,
        timestamping,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FEATURES: &str = "Features for eth0:
rx-checksumming: on [fixed]
tx-checksumming: on
tcp-segmentation-offload: on
\ttx-tcp-segmentation: on
\ttx-tcp-ecn-segmentation: off [fixed]
generic-segmentation-offload: on
generic-receive-offload: off
large-receive-offload: off [fixed]
";

    const COALESCE_VIRTIO: &str = "Coalesce parameters for eth0:
Adaptive RX: off  TX: n/a
stats-block-usecs: n/a
sample-interval: n/a

rx-usecs: 0
rx-frames: 1
rx-usecs-irq: n/a
rx-frames-irq: n/a

tx-usecs: 0
tx-frames: 1
";

    const COALESCE_IGB: &str = "Coalesce parameters for enp3s0:
Adaptive RX: on  TX: on
rx-usecs: 125
rx-frames: n/a
tx-usecs: 3
tx-frames: n/a
";

    const TS_VIRTIO: &str = "Time stamping parameters for eth0:
Capabilities:
\tsoftware-transmit
\tsoftware-receive
\tsoftware-system-clock
PTP Hardware Clock: none
Hardware Transmit Timestamp Modes: none
Hardware Receive Filter Modes: none
";

    const TS_HW: &str = "Time stamping parameters for enp3s0:
Capabilities:
\thardware-transmit
\tsoftware-transmit
\thardware-receive
\tsoftware-receive
\tsoftware-system-clock
\thardware-raw-clock
PTP Hardware Clock: 0
Hardware Transmit Timestamp Modes:
\toff
\ton
Hardware Receive Filter Modes:
\tnone
\tall
";

    #[test]
    fn parses_offloads() {
        let o = parse_features(FEATURES);
        assert_eq!(o.tso, Known::Value(true));
        assert_eq!(o.gso, Known::Value(true));
        assert_eq!(o.gro, Known::Value(false));
        assert_eq!(o.lro, Known::Value(false));
        assert!(parse_features("Features for x:\n").gso.reason().is_some());
    }

    #[test]
    fn parses_coalescing_and_derives_the_bunch() {
        let c = with_bunch(parse_coalesce(COALESCE_VIRTIO), None);
        assert_eq!(c.adaptive_rx, Known::Value(false));
        assert_eq!(c.rx_usecs, Known::Value(0));
        assert_eq!(c.rx_frames, Known::Value(1));
        assert_eq!(c.bunch_packets, Known::Value(1));
        assert_eq!(c.bunch_interval_ns, Known::Value(12_000));
        assert!(c.bunch_speed_assumed);

        let c = with_bunch(parse_coalesce(COALESCE_IGB), Some(BitRate::from_bps(1e9)));
        assert_eq!(c.adaptive_rx, Known::Value(true));
        assert_eq!(c.rx_usecs, Known::Value(125));
        assert!(c.rx_frames.reason().unwrap().contains("n/a"));
        assert_eq!(c.bunch_interval_ns, Known::Value(125_000));
        assert_eq!(c.bunch_packets, Known::Value(10));
        assert!(!c.bunch_speed_assumed);
    }

    #[test]
    fn parses_timestamping() {
        let t = parse_timestamping(TS_VIRTIO);
        assert!(t.software_receive && t.software_transmit);
        assert!(!t.hardware_receive && !t.hardware_transmit);
        assert!(t.phc_index.reason().is_some());
        let t = parse_timestamping(TS_HW);
        assert!(t.hardware_receive && t.hardware_transmit);
        assert_eq!(t.phc_index, Known::Value(0));
        assert_eq!(t.capabilities.len(), 6);
    }
}
