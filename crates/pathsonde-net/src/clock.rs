//! Clock reads.  The pacing loop and every timestamp the client takes go
//! through here, so there is one place that says which clock is meant.

use pathsonde_core::{ClockInfo, ClockSource, DurationNs, TimeNs};
use std::time::Duration;

/// CLOCK_MONOTONIC: for pacing and the client's own stamps (never jumps).
pub fn monotonic() -> TimeNs {
    read(libc::CLOCK_MONOTONIC)
}

/// CLOCK_REALTIME: the clock the kernel's software receive stamps use, so
/// user-space fallback stamps on the server are on the same scale.
pub fn realtime() -> TimeNs {
    read(libc::CLOCK_REALTIME)
}

/// CLOCK_REALTIME − CLOCK_MONOTONIC in ns, from a realtime read bracketed by
/// two monotonic reads: shifts kernel stamps (realtime) onto the monotonic
/// timeline that pacing and the lab's truth use.
pub fn realtime_minus_monotonic() -> i64 {
    let a = monotonic().ns();
    let r = realtime().ns();
    let b = monotonic().ns();
    r - (a + (b - a) / 2)
}

/// CPU time the calling thread has run (CLOCK_THREAD_CPUTIME_ID), as ns
/// since the thread started: relay threads report their own cost with it,
/// which on a shared machine is not the wall time they spent waiting.
pub fn thread_cpu() -> DurationNs {
    DurationNs::from_ns(read(libc::CLOCK_THREAD_CPUTIME_ID).ns())
}

/// Sleeps until `deadline` on CLOCK_MONOTONIC with an absolute
/// `clock_nanosleep`, never spinning: for a thread that must give its core
/// back while it waits (unlike [`wait_until`]), and whose late wake-up must
/// not add to the next deadline.  EINTR just returns early; the caller
/// re-checks the time.
pub fn sleep_until(deadline: TimeNs) {
    let ns = deadline.ns();
    let ts = libc::timespec {
        tv_sec: ns / 1_000_000_000,
        tv_nsec: ns % 1_000_000_000,
    };
    // SAFETY: `ts` is a valid timespec; the remainder pointer may be null
    // with TIMER_ABSTIME.
    unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &ts,
            std::ptr::null_mut(),
        )
    };
}

fn read(id: libc::clockid_t) -> TimeNs {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec and `id` a clock the kernel knows.
    let rc = unsafe { libc::clock_gettime(id, &mut ts) };
    debug_assert_eq!(rc, 0, "clock_gettime failed");
    TimeNs::from_ns(ts.tv_sec * 1_000_000_000 + ts.tv_nsec)
}

/// The smallest step CLOCK_MONOTONIC shows from user space, measured by
/// reading it back to back until it changes (a few thousand reads at most).
pub fn monotonic_resolution() -> DurationNs {
    let mut best = i64::MAX;
    for _ in 0..200 {
        let a = monotonic();
        let mut b = monotonic();
        let mut spins = 0;
        while b == a && spins < 10_000 {
            b = monotonic();
            spins += 1;
        }
        let step = b.since(a).ns();
        if step > 0 {
            best = best.min(step);
        }
    }
    DurationNs::from_ns(if best == i64::MAX { 1 } else { best })
}

/// The client's send stamps: user-space reads of CLOCK_MONOTONIC, taken just
/// before each car is handed to the kernel.
pub fn sender_clock() -> ClockInfo {
    ClockInfo {
        source: ClockSource::UserSpace,
        resolution: monotonic_resolution(),
    }
}

/// Waits until `deadline` on CLOCK_MONOTONIC: sleeps while the wait is long
/// (so the other core stays free for the receiver), then busy-waits the last
/// stretch, because a sleeping thread wakes tens of microseconds late.
pub fn wait_until(deadline: TimeNs) {
    const SPIN_WINDOW_NS: i64 = 300_000;
    loop {
        let now = monotonic();
        let left = deadline.since(now).ns();
        if left <= 0 {
            return;
        }
        if left > SPIN_WINDOW_NS + 200_000 {
            std::thread::sleep(Duration::from_nanos((left - SPIN_WINDOW_NS) as u64));
        } else {
            std::hint::spin_loop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_moves_forward_and_resolution_is_positive() {
        let a = monotonic();
        let b = monotonic();
        assert!(b >= a);
        let r = monotonic_resolution();
        assert!(r.ns() >= 1 && r.ns() < 1_000_000, "resolution {r}");
    }

    #[test]
    fn wait_until_is_not_early() {
        let target = monotonic() + DurationNs::from_us(800);
        wait_until(target);
        assert!(monotonic() >= target);
    }
}
