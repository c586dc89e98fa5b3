//! CPU: model, logical CPUs, physical cores and frequency, from
//! /proc/cpuinfo and (where the kernel has a cpufreq driver) sysfs.

use super::{read_trimmed, Known};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Cpu {
    /// "model name" of the first processor in /proc/cpuinfo.
    pub model: Known<String>,
    /// Processors the kernel lists in /proc/cpuinfo.
    pub logical_cpus: Known<u32>,
    /// Distinct (physical id, core id) pairs, else "cpu cores".
    pub physical_cores: Known<u32>,
    /// "cpu MHz" of the first processor (the kernel's estimate, in Hz).
    pub cpuinfo_frequency_hz: Known<f64>,
    /// cpufreq of cpu0: current, minimum and maximum frequency, governor.
    pub cpufreq: Known<CpuFreq>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CpuFreq {
    pub current_hz: Known<f64>,
    pub min_hz: Known<f64>,
    pub max_hz: Known<f64>,
    pub governor: Known<String>,
    pub driver: Known<String>,
}

/// What /proc/cpuinfo says.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CpuinfoSummary {
    pub model: Option<String>,
    pub processors: u32,
    pub cores: Option<u32>,
    pub mhz: Option<f64>,
}

/// Parses /proc/cpuinfo text (x86 layout; on other architectures the
/// model falls back to "Hardware" or "CPU part" lines).
pub fn parse_cpuinfo(text: &str) -> CpuinfoSummary {
    let mut s = CpuinfoSummary::default();
    let mut pairs = BTreeSet::new();
    let mut physical: Option<String> = None;
    let mut cpu_cores: Option<u32> = None;
    let mut sockets = BTreeSet::new();
    let mut fallback_model = None;
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let (key, value) = (key.trim(), value.trim());
        match key {
            "processor" => s.processors += 1,
            "model name" if s.model.is_none() => s.model = Some(value.to_string()),
            "Hardware" | "CPU part" if fallback_model.is_none() => {
                fallback_model = Some(value.to_string())
            }
            "cpu MHz" if s.mhz.is_none() => s.mhz = value.parse().ok(),
            "physical id" => {
                physical = Some(value.to_string());
                sockets.insert(value.to_string());
            }
            "core id" => {
                pairs.insert((physical.clone().unwrap_or_default(), value.to_string()));
            }
            "cpu cores" if cpu_cores.is_none() => cpu_cores = value.parse().ok(),
            _ => {}
        }
    }
    if s.model.is_none() {
        s.model = fallback_model;
    }
    s.cores = if !pairs.is_empty() {
        Some(pairs.len() as u32)
    } else {
        cpu_cores.map(|c| c * sockets.len().max(1) as u32)
    };
    s
}

pub fn probe() -> Cpu {
    let (model, logical_cpus, physical_cores, freq) = match std::fs::read_to_string("/proc/cpuinfo")
    {
        Ok(text) => {
            let s = parse_cpuinfo(&text);
            (
                s.model
                    .map(Known::Value)
                    .unwrap_or_else(|| Known::unavailable("no model name in /proc/cpuinfo")),
                if s.processors > 0 {
                    Known::Value(s.processors)
                } else {
                    Known::unavailable("no processor lines in /proc/cpuinfo")
                },
                s.cores.map(Known::Value).unwrap_or_else(|| {
                    Known::unavailable("no core id or cpu cores in /proc/cpuinfo")
                }),
                s.mhz
                    .map(|m| Known::Value(m * 1e6))
                    .unwrap_or_else(|| Known::unavailable("no cpu MHz in /proc/cpuinfo")),
            )
        }
        Err(e) => {
            let why = format!("/proc/cpuinfo: {e}");
            (
                Known::unavailable(why.clone()),
                Known::unavailable(why.clone()),
                Known::unavailable(why.clone()),
                Known::unavailable(why),
            )
        }
    };
    Cpu {
        model,
        logical_cpus,
        physical_cores,
        cpuinfo_frequency_hz: freq,
        cpufreq: cpufreq(),
    }
}

fn cpufreq() -> Known<CpuFreq> {
    const DIR: &str = "/sys/devices/system/cpu/cpu0/cpufreq";
    if !std::path::Path::new(DIR).is_dir() {
        return Known::unavailable(
            "no cpufreq in sysfs (/sys/devices/system/cpu/cpu0/cpufreq absent: no frequency-scaling driver, usual in a VM)",
        );
    }
    let khz = |file: &str| -> Known<f64> {
        read_trimmed(&format!("{DIR}/{file}"))
            .and_then(|s| s.parse::<f64>().map_err(|e| format!("{file}: {e}")))
            .map(|k| k * 1e3)
            .into()
    };
    Known::Value(CpuFreq {
        current_hz: khz("scaling_cur_freq"),
        min_hz: khz("cpuinfo_min_freq"),
        max_hz: khz("cpuinfo_max_freq"),
        governor: read_trimmed(&format!("{DIR}/scaling_governor")).into(),
        driver: read_trimmed(&format!("{DIR}/scaling_driver")).into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO_VCPU: &str = "processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 85
model name\t: Intel(R) Xeon(R) Processor
stepping\t: 7
cpu MHz\t\t: 2599.998
cache size\t: 16384 KB
physical id\t: 0
siblings\t: 2
core id\t\t: 0
cpu cores\t: 2

processor\t: 1
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Processor
cpu MHz\t\t: 2599.998
physical id\t: 0
siblings\t: 2
core id\t\t: 1
cpu cores\t: 2
";

    const HYPERTHREADED: &str = "processor\t: 0
model name\t: AMD EPYC 7B13
cpu MHz\t\t: 3049.998
physical id\t: 0
core id\t\t: 0
cpu cores\t: 1

processor\t: 1
model name\t: AMD EPYC 7B13
cpu MHz\t\t: 3049.998
physical id\t: 0
core id\t\t: 0
cpu cores\t: 1
";

    const ARM: &str = "processor\t: 0
BogoMIPS\t: 48.00
CPU implementer\t: 0x41
CPU part\t: 0xd0c

processor\t: 1
BogoMIPS\t: 48.00
CPU part\t: 0xd0c
";

    #[test]
    fn parses_a_two_vcpu_xeon() {
        let s = parse_cpuinfo(TWO_VCPU);
        assert_eq!(s.model.as_deref(), Some("Intel(R) Xeon(R) Processor"));
        assert_eq!(s.processors, 2);
        assert_eq!(s.cores, Some(2));
        assert_eq!(s.mhz, Some(2599.998));
    }

    #[test]
    fn hyperthreads_share_a_core() {
        let s = parse_cpuinfo(HYPERTHREADED);
        assert_eq!(s.processors, 2);
        assert_eq!(s.cores, Some(1));
    }

    #[test]
    fn arm_has_no_model_name_or_mhz() {
        let s = parse_cpuinfo(ARM);
        assert_eq!(s.processors, 2);
        assert_eq!(s.model.as_deref(), Some("0xd0c"));
        assert_eq!(s.mhz, None);
        assert_eq!(s.cores, None);
    }
}
