//! Type C: "multiply and retry" (spec §10.4), OB-UDPST's fast search.
//!
//! Below the high-speed threshold H the row doubles on every second GOOD
//! trial interval (0 → 1 → 2 → 4 … → 512 → 1000), so a clean path
//! reaches 1 Gb/s in about a second.  Congestion is handled as in Type B
//! (−1 row, −3Δ on the S-th BAD), but every slow move counts toward a
//! retry: after `retry_lim` of them the congestion count is cleared, which
//! re-opens the fast path below H; a retry taken on a GOOD raises the limit
//! by 5.

use super::{Class, Limits, Search, RETRY_LIMIT_START, RETRY_LIMIT_STEP};

/// Type C's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TypeC {
    /// idx: the current row.
    pub idx: u32,
    /// cong: BAD trial intervals since the congestion count was last cleared.
    pub cong: u32,
    /// retry: slow moves since the last retry.
    pub retry: u32,
    /// retry_lim: slow moves before a retry (starts at 5).
    pub retry_lim: u32,
    /// half: set on the first of two GOODs; the second doubles the row.
    pub half: bool,
}

impl Default for TypeC {
    fn default() -> Self {
        TypeC {
            idx: 0,
            cong: 0,
            retry: 0,
            retry_lim: RETRY_LIMIT_START,
            half: false,
        }
    }
}

impl Search for TypeC {
    fn name(&self) -> &'static str {
        "c"
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
                    // Fast: double on every second GOOD.
                    if 2 * self.idx > l.high_speed {
                        self.idx = l.high_speed;
                    } else {
                        if self.idx == 0 {
                            self.idx = 1;
                        }
                        if self.half {
                            self.idx *= 2;
                            self.half = false;
                        } else {
                            self.half = true;
                        }
                    }
                    self.cong = 0;
                } else {
                    // Slow, counting toward a retry.
                    if self.idx < l.max {
                        self.idx += 1;
                        self.retry += 1;
                    }
                    if self.retry >= self.retry_lim {
                        self.cong = 0;
                        self.retry = 0;
                        self.retry_lim = self.retry_lim.saturating_add(RETRY_LIMIT_STEP);
                    }
                }
            }
            Class::Bad => {
                self.cong = self.cong.saturating_add(1);
                if self.idx < l.high_speed && self.cong == l.slow_adj_thresh {
                    self.idx = l.backoff(self.idx);
                } else if self.idx > 0 {
                    self.idx -= 1;
                    self.retry += 1;
                    if self.retry >= self.retry_lim {
                        // The limit is not raised on a BAD.
                        self.cong = 0;
                        self.retry = 0;
                    }
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
    use super::super::{adjuster, AdjustConfig, Adjuster, Algorithm, LoadAdjust};
    use super::*;
    use crate::capacity::rate_table::{ip_rate, row_at_or_below, RowIndex, TableOptions};
    use crate::units::BitRate;

    fn cfg() -> AdjustConfig {
        AdjustConfig {
            algorithm: Algorithm::C,
            ..AdjustConfig::default()
        }
    }
    fn c() -> Adjuster<TypeC> {
        Adjuster::with_search(cfg(), TypeC::default())
    }

    #[test]
    fn a_clean_path_doubles_every_second_feedback_then_climbs_by_one() {
        let mut a = c();
        let got = rows(&mut a, &[vec![first()], vec![good(); 25]].concat());
        // §10.4's verified sequence.
        let want = [
            0, 1, 2, 2, 4, 4, 8, 8, 16, 16, 32, 32, 64, 64, 128, 128, 256, 256, 512, 1000, 1001,
            1002, 1003, 1004, 1005, 1006,
        ];
        assert_eq!(got, want);
        // 1 Gb/s after 19 feedbacks: under a second at 50 ms each.
        assert!(got.iter().position(|&r| r == 1000).unwrap() * 50 <= 1000);
        // A path that never congests: the top, then it stays.
        let got = rows(&mut a, &[good(); 300]);
        assert_eq!(got[145], 1152);
        assert!(got[145..].iter().all(|&r| r == 1152));
    }

    #[test]
    fn it_reaches_300_mbps_within_two_seconds() {
        let r300 = row_at_or_below(BitRate::from_mbps(300.0), TableOptions::default());
        // On a 300 Mb/s path ...
        let mut a = adjuster(cfg());
        let got = run_path(a.as_mut(), 300, 400);
        let first_at = got.iter().position(|&r| r >= r300.get()).unwrap();
        // (feedback 18: 0, 1, 2, 2, … 256, 256, 512), well within 40 feedbacks (2 s).
        assert_eq!(first_at, 18);
        assert!(first_at <= 40);
        // ... and with a 300 Mb/s ceiling it holds the ceiling once there.
        let mut a = adjuster(AdjustConfig {
            ceiling: r300,
            ..cfg()
        });
        let got = run_path(a.as_mut(), 1152, 60);
        assert_eq!(got.iter().position(|&r| r == 300), Some(18));
        assert!(got[18..].iter().all(|&r| r == 300), "{got:?}");
        assert!((ip_rate(r300, TableOptions::default()).mbps() - 300.0).abs() < 1e-9);
    }

    #[test]
    fn on_a_300_mbps_path_it_overshoots_and_comes_back() {
        let mut a = adjuster(cfg());
        let got = run_path(a.as_mut(), 300, 600);
        // Multiply and retry: once a retry clears the congestion count at
        // the capacity, two GOODs double the row (300 → 600); it then walks
        // back one row per BAD, with a 3Δ back-off every few.  It never runs
        // away: no row above twice the capacity, and every 150 feedbacks
        // (7.5 s) it is back at the capacity at least once.
        assert!(got.iter().all(|&r| r <= 600), "{got:?}");
        for window in got[20..].chunks(150) {
            assert!(
                window.iter().any(|&r| (298..=301).contains(&r)),
                "{window:?}"
            );
        }
        // The walk back after an overshoot only goes down.
        let top = 20 + got[20..].iter().position(|&r| r == 600).unwrap();
        let back = top + got[top..].iter().position(|&r| r <= 300).unwrap();
        assert!(
            got[top..=back].windows(2).all(|w| w[1] < w[0]),
            "{:?}",
            &got[top..=back]
        );
    }

    #[test]
    fn a_loss_step_backs_off_and_a_retry_reopens_the_fast_path() {
        let mut a = c();
        rows(&mut a, &[vec![first()], vec![good(); 18]].concat());
        assert_eq!(a.row().get(), 512);
        assert!(!a.search().half);
        // BAD ×3: −1, −1 (retry 1, 2), then the 3Δ back-off.
        assert_eq!(rows(&mut a, &[loss(11); 3]), [511, 510, 480]);
        // Slow GOODs: +1 each, retry 3, 4, 5 = limit: cong cleared, limit 10.
        assert_eq!(rows(&mut a, &[good(); 3]), [481, 482, 483]);
        assert_eq!(
            (a.search().cong, a.search().retry, a.search().retry_lim),
            (0, 0, 10)
        );
        // The fast path again: half, then double, then 2·966 > H: H.
        assert_eq!(rows(&mut a, &[good(); 3]), [483, 966, 1000]);
    }

    #[test]
    fn a_retry_on_a_bad_keeps_the_limit() {
        let mut a = c();
        rows(&mut a, &[vec![first()], vec![good(); 18]].concat()); // 512
                                                                   // BAD: 511 (r1), 510 (r2), 480 (back-off, no retry), 479 (r3), 478 (r4), 477 (r5 → reset)
        assert_eq!(rows(&mut a, &[loss(11); 6]), [511, 510, 480, 479, 478, 477]);
        assert_eq!(
            (a.search().cong, a.search().retry, a.search().retry_lim),
            (0, 0, 5)
        );
        // cong counts again from 0: the next back-off comes on the third BAD.
        assert_eq!(rows(&mut a, &[loss(11); 3]), [476, 475, 445]);
    }

    #[test]
    fn a_delay_variation_step() {
        let mut a = c();
        rows(&mut a, &[vec![first()], vec![good(); 16]].concat());
        assert_eq!(a.row().get(), 256);
        // HOLD between the thresholds: nothing moves, the half toggle included.
        assert_eq!(rows(&mut a, &[rtt_var(45); 3]), [256, 256, 256]);
        assert_eq!(rows(&mut a, &[rtt_var(150); 3]), [255, 254, 224]);
        assert_eq!(rows(&mut a, &[rtt_var(5); 2]), [225, 226]);
    }

    #[test]
    fn at_and_above_h_steps_are_single_rows() {
        let mut a = c();
        rows(&mut a, &[vec![first()], vec![good(); 22]].concat());
        assert_eq!(a.row().get(), 1003);
        assert_eq!(rows(&mut a, &[loss(50); 4]), [1002, 1001, 1000, 999]);
        assert_eq!(a.row(), RowIndex::new(999).unwrap());
    }
}
