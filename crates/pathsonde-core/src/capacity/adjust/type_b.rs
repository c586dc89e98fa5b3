//! Type B: the RFC 9097 / ITU-T Y.1540 Annex B search (spec §10.3), the
//! protocol's default.
//!
//! Below the high-speed threshold H (1 Gb/s) each GOOD trial interval adds
//! Δ rows (10 Mb/s) and clears the congestion count; each BAD one takes a
//! row off, except that the S-th BAD with no fast step between backs off
//! 3Δ rows.  From then on the congestion count stays at S or above, so the
//! search moves one row per trial interval for the rest of the test, as it
//! always does at and above H.

use super::{Class, Limits, Search};

/// Type B's state: the row and the congestion count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TypeB {
    /// idx: the current row.
    pub idx: u32,
    /// cong: BAD trial intervals since the last fast step.
    pub cong: u32,
}

impl Search for TypeB {
    fn name(&self) -> &'static str {
        "b"
    }
    fn row(&self) -> u32 {
        self.idx
    }
    fn set_row(&mut self, row: u32) {
        self.idx = row;
    }
    fn step(&mut self, class: Class, l: &Limits) {
        match class {
            Class::Good => {
                if self.idx < l.high_speed && self.cong < l.slow_adj_thresh {
                    // Fast ramp below 1 Gb/s.
                    self.idx = (self.idx + l.delta).min(l.high_speed);
                    self.cong = 0;
                } else if self.idx < l.max {
                    self.idx += 1;
                }
            }
            Class::Bad => {
                self.cong = self.cong.saturating_add(1);
                if self.idx < l.high_speed && self.cong == l.slow_adj_thresh {
                    self.idx = l.backoff(self.idx);
                } else if self.idx > 0 {
                    self.idx -= 1;
                }
            }
            Class::Hold => {}
        }
        self.idx = self.idx.min(l.max);
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::super::{adjuster, AdjustConfig, Algorithm, Feedback, LoadAdjust};
    use super::*;
    use crate::capacity::rate_table::{row_at_or_below, RowIndex, TableOptions};
    use crate::units::BitRate;

    fn b() -> Box<dyn LoadAdjust> {
        adjuster(AdjustConfig {
            algorithm: Algorithm::B,
            ..AdjustConfig::default()
        })
    }
    fn climb(a: &mut dyn LoadAdjust, n: usize) -> Vec<u16> {
        rows(a, &vec![good(); n])
    }

    #[test]
    fn a_clean_path_climbs_ten_rows_per_feedback_then_one() {
        let mut a = b();
        // The first status has no RTT sample: HOLD at row 0.
        assert_eq!(a.on_feedback(&first()).row, RowIndex::ZERO);
        let got = climb(a.as_mut(), 100);
        let want: Vec<u16> = (1..=100).map(|i| 10 * i).collect();
        assert_eq!(got, want);
        // At H: one row per GOOD, up to the top.
        let got = climb(a.as_mut(), 152);
        let want: Vec<u16> = (1001..=1152).collect();
        assert_eq!(got, want);
        // A path that never congests: the top, and it stays there.
        assert!(climb(a.as_mut(), 500).iter().all(|&r| r == 1152));
    }

    #[test]
    fn a_clean_path_stops_at_the_ceiling() {
        let ceiling = row_at_or_below(BitRate::from_mbps(255.0), TableOptions::default());
        let mut a = adjuster(AdjustConfig {
            ceiling,
            ..AdjustConfig::default()
        });
        let got = climb(a.as_mut(), 30);
        assert_eq!(
            &got[..26],
            &(1..=25).map(|i| 10 * i).chain([255]).collect::<Vec<u16>>()[..]
        );
        assert!(got[25..].iter().all(|&r| r == 255), "{got:?}");
    }

    #[test]
    fn a_loss_step_backs_off_thirty_rows_on_the_third_then_moves_by_one() {
        let mut a = b();
        climb(a.as_mut(), 50); // row 500
        assert_eq!(a.row().get(), 500);
        // Two losses: one row each; the third (S = 3): 3Δ = 30 rows; then one row each.
        assert_eq!(rows(a.as_mut(), &[loss(11); 5]), [499, 498, 468, 467, 466]);
        // Clean again: cong stays ≥ S, so +1 per GOOD, never +10 again.
        assert_eq!(rows(a.as_mut(), &[good(); 4]), [467, 468, 469, 470]);
        // Losses within the threshold are no congestion.
        assert_eq!(rows(a.as_mut(), &[loss(10); 2]), [471, 472]);
    }

    #[test]
    fn a_fast_step_between_congestion_events_clears_the_count() {
        let mut a = b();
        climb(a.as_mut(), 50);
        assert_eq!(
            rows(
                a.as_mut(),
                &[loss(20), loss(20), good(), loss(20), loss(20), loss(20)]
            ),
            [499, 498, 508, 507, 506, 476]
        );
    }

    #[test]
    fn a_delay_variation_step_backs_off_like_loss_and_between_thresholds_holds() {
        let mut a = b();
        climb(a.as_mut(), 30); // row 300
                               // Between the thresholds: HOLD, the row stays.
        assert_eq!(
            rows(a.as_mut(), &[rtt_var(30), rtt_var(60), rtt_var(90)]),
            [300, 300, 300]
        );
        // Above the upper threshold: BAD.
        assert_eq!(rows(a.as_mut(), &[rtt_var(91); 4]), [299, 298, 268, 267]);
        // Below the lower threshold: GOOD again (slow now).
        assert_eq!(rows(a.as_mut(), &[rtt_var(29); 2]), [268, 269]);
    }

    #[test]
    fn the_back_off_stops_at_row_zero_and_at_h_steps_are_single_rows() {
        let mut a = b();
        climb(a.as_mut(), 2); // row 20
        assert_eq!(rows(a.as_mut(), &[loss(99); 4]), [19, 18, 0, 0]);
        let mut a = b();
        climb(a.as_mut(), 110); // row 1010
        assert_eq!(a.row().get(), 1010);
        assert_eq!(rows(a.as_mut(), &[loss(99); 4]), [1009, 1008, 1007, 1006]);
    }

    #[test]
    fn on_a_300_mbps_path_it_settles_at_the_capacity() {
        let mut a = b();
        let got = run_path(a.as_mut(), 300, 400);
        // 10 rows per 50 ms: row 300 on the 31st feedback (1.55 s).
        assert_eq!(got.iter().position(|&r| r >= 300), Some(30));
        // Afterwards it stays within a back-off of the capacity, crossing it by one row.
        assert!(
            got[40..].iter().all(|&r| (268..=301).contains(&r)),
            "{got:?}"
        );
        assert!(got[300..].contains(&301) && got[300..].contains(&300));
    }

    #[test]
    fn the_state_is_plain() {
        let mut s = TypeB::default();
        let l = AdjustConfig::default().limits();
        s.step(Class::Bad, &l);
        assert_eq!(s, TypeB { idx: 0, cong: 1 });
        s.step(Class::Good, &l);
        assert_eq!(s, TypeB { idx: 10, cong: 0 });
        let _ = Feedback::default();
    }
}
