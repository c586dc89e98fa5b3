//! The client's results (spec §11.3): one row per sub-interval, summed over
//! the test's connections, and the summary whose maximum is RFC 9097's
//! Maximum IP-Layer Capacity.
//!
//! Plain data with pathsonde's JSON keys (snake_case; rates as bits per
//! second under `_bps`, delays as seconds under `_s`, `null` where there
//! was no sample).  The reference's own key names and number formats
//! (`--format udpst-json`) are the CLI's business; every figure it prints
//! can be computed from these.

use super::rate_table::IpFamily;
use super::receiver::{SubIntervalStats, Variation};
use super::zero_loss::ZeroLoss;
use crate::units::{serde_secs, BitRate, Bytes, DurationNs};
use serde::{Deserialize, Serialize};

/// Ethernet bytes per datagram without FCS: 14 (header) + 20 (IPv4) + 8 (UDP).
/// Over IPv6 add [`IPV6_EXTRA_OVERHEAD`].
pub(crate) const ETH_NO_FCS_OVERHEAD: u64 = 42;
/// Ethernet bytes per datagram with the 4-byte FCS (IPv4).
pub(crate) const ETH_FCS_OVERHEAD: u64 = 46;
/// Ethernet bytes per datagram with FCS and a 4-byte VLAN tag (IPv4).
pub(crate) const ETH_FCS_VLAN_OVERHEAD: u64 = 50;
/// What IPv6 adds to each of the figures above (its header is 20 bytes longer).
pub const IPV6_EXTRA_OVERHEAD: u64 = 20;

/// The figures of one sub-interval, summed over connections.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubIntervalRow {
    /// 1, 2, … in the order the sub-intervals completed.
    pub interval: u32,
    /// From the first status feedback to the end of this sub-interval (accum_ms).
    #[serde(with = "serde_secs")]
    pub time_s: DurationNs,
    /// Connections that reported this sub-interval.
    pub active_connections: u32,
    pub rx_datagrams: u64,
    /// UDP payload bytes received.
    pub rx_bytes: Bytes,
    /// Received datagrams · 100 / sent (sent = received + lost); 0 when none were sent.
    pub delivered_percent: f64,
    pub loss_count: u64,
    pub reordered_count: u64,
    pub replicated_count: u64,
    /// loss / sent.
    pub loss_ratio: f64,
    /// reordered / sent.
    pub reordered_ratio: f64,
    /// duplicated / sent.
    pub replicated_ratio: f64,
    /// (extension) datagrams received with ECN CE.
    pub ce_count: u64,
    /// (extension) CE-marked datagrams · 100 / received.
    pub ce_percent_of_delivered: f64,
    /// One-way delay variation (above the test's minimum one-way delay):
    /// smallest, mean (rounded to whole ms), largest and their range;
    /// `null` with no sample.
    #[serde(with = "serde_secs::option")]
    pub pdv_min_s: Option<DurationNs>,
    #[serde(with = "serde_secs::option")]
    pub pdv_avg_s: Option<DurationNs>,
    #[serde(with = "serde_secs::option")]
    pub pdv_max_s: Option<DurationNs>,
    #[serde(with = "serde_secs::option")]
    pub pdv_range_s: Option<DurationNs>,
    /// RTT variation (above the test's minimum RTT): smallest, mean,
    /// largest and range; `null` with no sample.
    #[serde(with = "serde_secs::option")]
    pub rtt_var_min_s: Option<DurationNs>,
    #[serde(with = "serde_secs::option")]
    pub rtt_var_avg_s: Option<DurationNs>,
    #[serde(with = "serde_secs::option")]
    pub rtt_var_max_s: Option<DurationNs>,
    #[serde(with = "serde_secs::option")]
    pub rtt_var_range_s: Option<DurationNs>,
    /// The delivered IP-layer rate: (payload bytes + 28 or 48 per datagram)
    /// · 8 / the sub-interval's length, added over connections.
    pub ip_layer_capacity_bps: BitRate,
    /// Datagrams per second received, added over connections (turns the IP
    /// rate into the Ethernet rates).
    pub datagrams_per_sec: f64,
    /// The smallest one-way delay in the sub-interval: clock_delta_min + the
    /// PDV minimum.  Includes the offset between the two clocks, so only
    /// its changes mean anything unless the clocks are synchronised.
    #[serde(with = "serde_secs::option")]
    pub min_one_way_delay_s: Option<DurationNs>,
    /// clock_delta_min when the sub-interval closed (smallest over connections).
    #[serde(with = "serde_secs::option")]
    pub clock_delta_min_s: Option<DurationNs>,
    /// The smallest RTT of the test so far when the sub-interval closed.
    #[serde(with = "serde_secs::option")]
    pub rtt_min_s: Option<DurationNs>,
}

fn ratio(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

fn range(min: Option<DurationNs>, max: Option<DurationNs>) -> Option<DurationNs> {
    Some(max? - min?)
}

fn min_opt(it: impl Iterator<Item = Option<DurationNs>>) -> Option<DurationNs> {
    it.flatten().min()
}

fn max_opt(it: impl Iterator<Item = Option<DurationNs>>) -> Option<DurationNs> {
    it.flatten().max()
}

fn mean_opt(it: impl Iterator<Item = Option<DurationNs>>) -> Option<DurationNs> {
    let (sum, n) = it
        .flatten()
        .fold((0i128, 0i128), |(s, n), d| (s + d.ns() as i128, n + 1));
    (n > 0).then(|| DurationNs::from_ns((sum / n) as i64))
}

impl SubIntervalRow {
    /// The row for sub-interval `interval` from each connection's block.
    /// Rates of separate connections are added, each over its own length.
    pub fn from_connections(
        interval: u32,
        conns: &[SubIntervalStats],
        family: IpFamily,
    ) -> SubIntervalRow {
        let sum = |f: fn(&SubIntervalStats) -> u64| {
            conns.iter().fold(0u64, |a, c| a.saturating_add(f(c)))
        };
        let rx_datagrams = sum(|c| c.rx_datagrams);
        let loss = sum(|c| c.loss);
        let reorder = sum(|c| c.reorder);
        let dup = sum(|c| c.dup);
        let ce = sum(|c| c.ce_count);
        let sent = rx_datagrams.saturating_add(loss);
        let ip_bps: f64 = conns
            .iter()
            .filter_map(|c| c.ip_rate(family))
            .map(|r| r.bps())
            .sum();
        let dps: f64 = conns
            .iter()
            .filter(|c| c.elapsed.ns() > 0)
            .map(|c| c.rx_datagrams as f64 / c.elapsed.secs_f64())
            .sum();
        let owdv = conns
            .iter()
            .fold(Variation::default(), |a, c| a.merge(&c.owdv));
        let rttv = conns
            .iter()
            .fold(Variation::default(), |a, c| a.merge(&c.rttv));
        let pdv_min = owdv.min.filter(|_| owdv.count > 0);
        let pdv_max = owdv.max();
        // RTT variation: the block carries min and max even when the client
        // kept no sum (upstream, before any sample).
        let rtt_min = rttv.min;
        let rtt_max = rtt_min.map(|_| rttv.max);
        let min_owd = conns
            .iter()
            .filter_map(|c| Some(c.clock_delta_min? + c.owdv.min.filter(|_| c.owdv.count > 0)?))
            .min();
        SubIntervalRow {
            interval,
            time_s: conns.iter().map(|c| c.accum).max().unwrap_or_default(),
            active_connections: conns.len() as u32,
            rx_datagrams,
            rx_bytes: conns.iter().map(|c| c.rx_bytes).sum(),
            delivered_percent: 100.0 * ratio(rx_datagrams, sent),
            loss_count: loss,
            reordered_count: reorder,
            replicated_count: dup,
            loss_ratio: ratio(loss, sent),
            reordered_ratio: ratio(reorder, sent),
            replicated_ratio: ratio(dup, sent),
            ce_count: ce,
            ce_percent_of_delivered: 100.0 * ratio(ce, rx_datagrams),
            pdv_min_s: pdv_min,
            pdv_avg_s: owdv.mean_ms(),
            pdv_max_s: pdv_max,
            pdv_range_s: range(pdv_min, pdv_max),
            rtt_var_min_s: rtt_min,
            rtt_var_avg_s: rttv.mean(),
            rtt_var_max_s: rtt_max,
            rtt_var_range_s: range(rtt_min, rtt_max),
            ip_layer_capacity_bps: BitRate::from_bps(ip_bps),
            datagrams_per_sec: dps,
            min_one_way_delay_s: min_owd,
            clock_delta_min_s: min_opt(conns.iter().map(|c| c.clock_delta_min)),
            rtt_min_s: min_opt(conns.iter().map(|c| c.rtt_min)),
        }
    }

    /// The rate with `extra` bytes more per datagram than the IP layer counts.
    fn with_extra(&self, extra: u64) -> BitRate {
        BitRate::from_bps(
            self.ip_layer_capacity_bps.bps() + self.datagrams_per_sec * extra as f64 * 8.0,
        )
    }
    /// The Ethernet rate without FCS (42 bytes per datagram over IPv4, 62 over IPv6).
    pub fn eth_no_fcs(&self) -> BitRate {
        self.with_extra(ETH_NO_FCS_OVERHEAD - 28)
    }
    /// The Ethernet rate with FCS (46 / 66 bytes per datagram).
    pub(crate) fn eth_with_fcs(&self) -> BitRate {
        self.with_extra(ETH_FCS_OVERHEAD - 28)
    }
    /// The Ethernet rate with FCS and VLAN tag (50 / 70 bytes per datagram).
    pub(crate) fn eth_with_fcs_vlan(&self) -> BitRate {
        self.with_extra(ETH_FCS_VLAN_OVERHEAD - 28)
    }
}

/// The whole test's figures, and the maximum.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapacitySummary {
    /// Sub-intervals reported.
    pub intervals: u32,
    /// The most connections any sub-interval had.
    pub active_connections: u32,
    /// RFC 9097's Maximum IP-Layer Capacity: the highest sub-interval rate.
    pub max_ip_layer_capacity_bps: BitRate,
    /// Which sub-interval reached it (the first, on a tie) ...
    pub max_interval: u32,
    /// ... and when it ended, from the first status feedback.
    #[serde(with = "serde_secs")]
    pub max_time_s: DurationNs,
    /// The maximum as Ethernet rates (no FCS, with FCS, with FCS and VLAN).
    pub max_eth_no_fcs_bps: BitRate,
    pub max_eth_with_fcs_bps: BitRate,
    pub max_eth_with_fcs_vlan_bps: BitRate,
    /// The mean of the sub-interval rates.
    pub ip_layer_capacity_bps: BitRate,
    /// Totals over the test, and the ratios from the totals.
    pub delivered_percent: f64,
    pub loss_count: u64,
    pub reordered_count: u64,
    pub replicated_count: u64,
    pub loss_ratio: f64,
    pub reordered_ratio: f64,
    pub replicated_ratio: f64,
    pub ce_count: u64,
    pub ce_percent_of_delivered: f64,
    /// Delay variation: extremes over the sub-intervals, and the mean of
    /// their means (sub-intervals with no sample left out).
    #[serde(with = "serde_secs::option")]
    pub pdv_min_s: Option<DurationNs>,
    #[serde(with = "serde_secs::option")]
    pub pdv_avg_s: Option<DurationNs>,
    #[serde(with = "serde_secs::option")]
    pub pdv_max_s: Option<DurationNs>,
    #[serde(with = "serde_secs::option")]
    pub pdv_range_s: Option<DurationNs>,
    #[serde(with = "serde_secs::option")]
    pub rtt_var_min_s: Option<DurationNs>,
    #[serde(with = "serde_secs::option")]
    pub rtt_var_avg_s: Option<DurationNs>,
    #[serde(with = "serde_secs::option")]
    pub rtt_var_max_s: Option<DurationNs>,
    #[serde(with = "serde_secs::option")]
    pub rtt_var_range_s: Option<DurationNs>,
    /// The test's minimum of (receive − send) time: clock_delta_min, with
    /// the clock offset in it (no PDV term).
    #[serde(with = "serde_secs::option")]
    pub min_one_way_delay_s: Option<DurationNs>,
    /// The test's minimum RTT.
    #[serde(with = "serde_secs::option")]
    pub min_rtt_s: Option<DurationNs>,
    /// The sub-interval at the maximum, whole.
    pub at_max: SubIntervalRow,
}

impl CapacitySummary {
    /// The summary of `rows`; `None` when there are none.
    pub fn of(rows: &[SubIntervalRow]) -> Option<CapacitySummary> {
        let first = rows.first()?;
        let at_max = rows.iter().fold(first, |best, r| {
            if r.ip_layer_capacity_bps.bps() > best.ip_layer_capacity_bps.bps() {
                r
            } else {
                best
            }
        });
        let total =
            |f: fn(&SubIntervalRow) -> u64| rows.iter().fold(0u64, |a, r| a.saturating_add(f(r)));
        let rx = total(|r| r.rx_datagrams);
        let loss = total(|r| r.loss_count);
        let reorder = total(|r| r.reordered_count);
        let dup = total(|r| r.replicated_count);
        let ce = total(|r| r.ce_count);
        let sent = rx.saturating_add(loss);
        let pdv_min = min_opt(rows.iter().map(|r| r.pdv_min_s));
        let pdv_max = max_opt(rows.iter().map(|r| r.pdv_max_s));
        let rtt_min = min_opt(rows.iter().map(|r| r.rtt_var_min_s));
        let rtt_max = max_opt(rows.iter().map(|r| r.rtt_var_max_s));
        let mean_rate = rows
            .iter()
            .map(|r| r.ip_layer_capacity_bps.bps())
            .sum::<f64>()
            / rows.len() as f64;
        Some(CapacitySummary {
            intervals: rows.len() as u32,
            active_connections: rows.iter().map(|r| r.active_connections).max().unwrap_or(0),
            max_ip_layer_capacity_bps: at_max.ip_layer_capacity_bps,
            max_interval: at_max.interval,
            max_time_s: at_max.time_s,
            max_eth_no_fcs_bps: at_max.eth_no_fcs(),
            max_eth_with_fcs_bps: at_max.eth_with_fcs(),
            max_eth_with_fcs_vlan_bps: at_max.eth_with_fcs_vlan(),
            ip_layer_capacity_bps: BitRate::from_bps(mean_rate),
            delivered_percent: 100.0 * ratio(rx, sent),
            loss_count: loss,
            reordered_count: reorder,
            replicated_count: dup,
            loss_ratio: ratio(loss, sent),
            reordered_ratio: ratio(reorder, sent),
            replicated_ratio: ratio(dup, sent),
            ce_count: ce,
            ce_percent_of_delivered: 100.0 * ratio(ce, rx),
            pdv_min_s: pdv_min,
            pdv_avg_s: mean_opt(rows.iter().map(|r| r.pdv_avg_s)),
            pdv_max_s: pdv_max,
            pdv_range_s: range(pdv_min, pdv_max),
            rtt_var_min_s: rtt_min,
            rtt_var_avg_s: mean_opt(rows.iter().map(|r| r.rtt_var_avg_s)),
            rtt_var_max_s: rtt_max,
            rtt_var_range_s: range(rtt_min, rtt_max),
            min_one_way_delay_s: min_opt(rows.iter().map(|r| r.clock_delta_min_s)),
            min_rtt_s: min_opt(rows.iter().map(|r| r.rtt_min_s)),
            at_max: at_max.clone(),
        })
    }
}

/// Every sub-interval row and the summary: what `pathsonde capacity --json` reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapacityReport {
    pub sub_intervals: Vec<SubIntervalRow>,
    /// `None` when no sub-interval completed.
    pub summary: Option<CapacitySummary>,
    /// pathsonde's reading beside the RFC's maximum: the delivered rate at
    /// zero loss, fitted over the test's trial intervals.
    pub zero_loss: ZeroLoss,
}

impl CapacityReport {
    /// The report of `rows`, keeping the first `planned` (duration /
    /// sub-interval; rows past it are dropped, spec §11.1).
    pub fn new(mut rows: Vec<SubIntervalRow>, planned: u32, zero_loss: ZeroLoss) -> CapacityReport {
        rows.truncate(planned as usize);
        let summary = CapacitySummary::of(&rows);
        CapacityReport {
            sub_intervals: rows,
            summary,
            zero_loss,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::capacity::zero_loss::Unclear;

    const MS: i64 = 1_000_000;

    fn no_fit() -> ZeroLoss {
        ZeroLoss::Unclear {
            reason: Unclear::NoLoss,
            congested_windows: 0,
            windows: 0,
            slope_t: None,
        }
    }

    fn ms(n: i64) -> DurationNs {
        DurationNs::from_ms(n)
    }
    fn var(min: i64, max: i64, sum: i64, count: u64) -> Variation {
        Variation {
            min: Some(ms(min)),
            max: ms(max),
            sum: ms(sum),
            count,
        }
    }
    /// A connection's second at `mbps` with 1222-byte payloads (1250 B at IPv4's IP layer).
    fn block(mbps: u64, loss: u64, accum_s: i64) -> SubIntervalStats {
        let n = mbps * 100; // 1250 B · 8 · 100 = 1 Mb
        SubIntervalStats {
            rx_datagrams: n,
            rx_bytes: Bytes(n * 1222),
            elapsed: DurationNs::from_secs(1),
            loss,
            reorder: 2,
            dup: 1,
            owdv: var(0, 12, 3 * n as i64, n),
            rttv: var(1, 9, 0, 0),
            accum: DurationNs::from_secs(accum_s),
            ce_count: 0,
            clock_delta_min: Some(ms(-40)),
            rtt_min: Some(ms(20)),
        }
    }

    #[test]
    fn a_row_adds_connections() {
        let a = block(100, 100, 1);
        let mut b = block(50, 0, 1);
        b.elapsed = DurationNs::from_ms(500); // its rate: 100 Mb/s over half a second
        b.owdv = var(2, 30, 10, 4);
        b.clock_delta_min = Some(ms(-45));
        let row = SubIntervalRow::from_connections(1, &[a, b], IpFamily::V4);
        assert_eq!(row.active_connections, 2);
        assert!((row.ip_layer_capacity_bps.mbps() - 200.0).abs() < 1e-9);
        assert_eq!(row.rx_datagrams, 15_000);
        assert_eq!(
            (row.loss_count, row.reordered_count, row.replicated_count),
            (100, 4, 2)
        );
        assert!((row.delivered_percent - 100.0 * 15_000.0 / 15_100.0).abs() < 1e-9);
        assert!((row.loss_ratio - 100.0 / 15_100.0).abs() < 1e-12);
        assert_eq!(
            (row.pdv_min_s, row.pdv_max_s, row.pdv_range_s),
            (Some(ms(0)), Some(ms(30)), Some(ms(30)))
        );
        // (30000 + 10) / 10004 = 2.999 → 3 ms.
        assert_eq!(row.pdv_avg_s, Some(ms(3)));
        assert_eq!(
            (row.rtt_var_min_s, row.rtt_var_max_s),
            (Some(ms(1)), Some(ms(9)))
        );
        assert_eq!(row.rtt_var_avg_s, None); // no samples kept
                                             // clock_delta_min + PDV min, the smaller over connections: −40 + 0 vs −45 + 2.
        assert_eq!(row.min_one_way_delay_s, Some(ms(-43)));
        assert_eq!(row.time_s, DurationNs::from_secs(1));
        // Over IPv6 each datagram counts 48 bytes of headers (same payloads here).
        let v6 = SubIntervalRow::from_connections(1, &[a, b], IpFamily::V6);
        assert!((v6.ip_layer_capacity_bps.mbps() - 200.0 * 1270.0 / 1250.0).abs() < 1e-9);
    }

    #[test]
    fn a_row_without_samples_says_so() {
        let empty = SubIntervalStats {
            elapsed: DurationNs::from_secs(1),
            ..SubIntervalStats::default()
        };
        let row = SubIntervalRow::from_connections(3, &[empty], IpFamily::V4);
        assert_eq!(row.ip_layer_capacity_bps, BitRate::ZERO);
        assert_eq!((row.delivered_percent, row.loss_ratio), (0.0, 0.0));
        assert_eq!(
            (row.pdv_min_s, row.pdv_avg_s, row.pdv_max_s, row.pdv_range_s),
            (None, None, None, None)
        );
        assert_eq!(
            (
                row.rtt_var_min_s,
                row.rtt_var_max_s,
                row.min_one_way_delay_s
            ),
            (None, None, None)
        );
        let none = SubIntervalRow::from_connections(4, &[], IpFamily::V4);
        assert_eq!(none.active_connections, 0);
        assert_eq!(none.ip_layer_capacity_bps, BitRate::ZERO);
    }

    fn rows() -> Vec<SubIntervalRow> {
        [(100, 0), (250, 10), (300, 40), (290, 5)]
            .iter()
            .enumerate()
            .map(|(i, &(mbps, loss))| {
                let mut b = block(mbps, loss, i as i64 + 1);
                b.owdv = var(i as i64, 10 * (i as i64 + 1), 4 * (i as i64 + 1), 2);
                b.clock_delta_min = Some(ms(-40 - i as i64));
                SubIntervalRow::from_connections(i as u32 + 1, &[b], IpFamily::V4)
            })
            .collect()
    }

    #[test]
    fn the_summary_and_its_maximum() {
        let s = CapacitySummary::of(&rows()).unwrap();
        assert_eq!(s.intervals, 4);
        assert!((s.max_ip_layer_capacity_bps.mbps() - 300.0).abs() < 1e-9);
        assert_eq!(
            (s.max_interval, s.max_time_s),
            (3, DurationNs::from_secs(3))
        );
        assert_eq!(s.at_max.interval, 3);
        assert!((s.ip_layer_capacity_bps.mbps() - 235.0).abs() < 1e-9);
        // 30 000 datagrams/s at the maximum: +14, +18, +22 bytes each.
        assert!((s.max_eth_no_fcs_bps.mbps() - (300.0 + 30_000.0 * 14.0 * 8.0 / 1e6)).abs() < 1e-6);
        assert!(
            (s.max_eth_with_fcs_bps.mbps() - (300.0 + 30_000.0 * 18.0 * 8.0 / 1e6)).abs() < 1e-6
        );
        assert!(
            (s.max_eth_with_fcs_vlan_bps.mbps() - (300.0 + 30_000.0 * 22.0 * 8.0 / 1e6)).abs()
                < 1e-6
        );
        assert_eq!(s.loss_count, 55);
        let rx = (100 + 250 + 300 + 290) * 100;
        assert!((s.delivered_percent - 100.0 * rx as f64 / (rx + 55) as f64).abs() < 1e-9);
        assert_eq!((s.reordered_count, s.replicated_count), (8, 4));
        // PDV: the extremes, and the mean of the means (2, 4, 6, 8 ms).
        assert_eq!(
            (s.pdv_min_s, s.pdv_max_s, s.pdv_range_s),
            (Some(ms(0)), Some(ms(40)), Some(ms(40)))
        );
        assert_eq!(s.pdv_avg_s, Some(ms(5)));
        assert_eq!(s.min_one_way_delay_s, Some(ms(-43)));
        assert_eq!(s.min_rtt_s, Some(ms(20)));
        assert!(CapacitySummary::of(&[]).is_none());
    }

    #[test]
    fn the_first_maximum_wins_a_tie_and_extra_rows_are_dropped() {
        let mut r = rows();
        r.push(SubIntervalRow {
            interval: 5,
            ..r[2].clone()
        });
        let report = CapacityReport::new(r.clone(), 5, no_fit());
        assert_eq!(report.summary.as_ref().unwrap().max_interval, 3);
        let report = CapacityReport::new(r, 2, no_fit());
        assert_eq!(report.sub_intervals.len(), 2);
        assert!((report.summary.unwrap().max_ip_layer_capacity_bps.mbps() - 250.0).abs() < 1e-9);
        assert_eq!(CapacityReport::new(vec![], 10, no_fit()).summary, None);
    }

    #[test]
    fn json_keys_and_units() {
        let report = CapacityReport::new(rows(), 10, no_fit());
        let v = serde_json::to_value(&report).unwrap();
        let s = &v["summary"];
        assert_eq!(
            s["max_ip_layer_capacity_bps"].as_f64().unwrap().round(),
            300e6
        );
        assert_eq!(s["max_interval"], 3);
        assert_eq!(s["max_time_s"].as_f64().unwrap(), 3.0);
        assert_eq!(s["pdv_max_s"].as_f64().unwrap(), 0.04);
        assert_eq!(s["min_one_way_delay_s"].as_f64().unwrap(), -0.043);
        let row = &v["sub_intervals"][0];
        assert_eq!(
            row["ip_layer_capacity_bps"].as_f64().unwrap().round(),
            100e6
        );
        assert_eq!(row["rx_bytes"], 10_000 * 1222);
        assert!(row["rtt_var_avg_s"].is_null());
        for key in [
            "delivered_percent",
            "loss_ratio",
            "reordered_ratio",
            "replicated_ratio",
            "pdv_avg_s",
            "rtt_var_range_s",
        ] {
            assert!(row.get(key).is_some(), "{key}");
        }
        // It reads back.
        let back: CapacityReport = serde_json::from_value(v).unwrap();
        assert_eq!(back.sub_intervals.len(), 4);
        let _ = MS;
    }
}
