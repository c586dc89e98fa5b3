//! Real-time scheduling for the threads whose timing is the measurement.
//!
//! A paced train is read by when its cars left: a sender preempted for a
//! few hundred microseconds mid-train sends the cars it owes in one burst,
//! the burst queues itself at the tight link, and the train reads as a lower
//! available bandwidth.  On the lab's two shared cores, with two busy loops
//! beside it, FAC²'s demo read 26–58 % low (two of four bands missed the
//! truth) while its trains left at 0.4–1.5× their targets; the same demo
//! under SCHED_FIFO read within 2.5 % (docs/verdict.md, "Moving the limit
//! up").  So the pacer asks for SCHED_FIFO for the span of each train
//! ([`Boost`]) and gives it back after, and the lab's delay line holds it
//! for its life.
//!
//! The kernel refuses SCHED_FIFO to an unprivileged user without an
//! `RLIMIT_RTPRIO` allowance; a refusal is returned (and reported by the
//! caller), never hidden, and the thread stays as it was.  RT throttling
//! (`kernel.sched_rt_runtime_us`, 95 % by default) keeps a runaway FIFO
//! thread from taking a core for good.

use std::io;

/// SCHED_FIFO priority of the pacer during a train: below the lab's delay
/// line (50), whose releases are the path's timing, and above every normal
/// thread.
pub const PACER_PRIORITY: i32 = 40;

/// Puts the calling thread under SCHED_FIFO at `priority` (1–99); the
/// kernel's refusal (`EPERM` without the privilege) is the error.
pub fn set_fifo(priority: i32) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: `pthread_self()` is this live thread; `param` outlives the call.
    let rc = unsafe { libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &param) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(rc))
    }
}

/// The calling thread under SCHED_FIFO until dropped, when its earlier
/// policy and priority come back.
#[derive(Debug)]
pub struct Boost {
    policy: i32,
    param: libc::sched_param,
}

impl Boost {
    /// Raises the calling thread to SCHED_FIFO at `priority`.  A thread
    /// already under a real-time policy is left as it is (its owner chose
    /// that) and restored to it on drop all the same.
    pub fn new(priority: i32) -> io::Result<Boost> {
        let mut policy = 0;
        let mut param = libc::sched_param { sched_priority: 0 };
        // SAFETY: both out-pointers are to live locals; the thread is this one.
        let rc =
            unsafe { libc::pthread_getschedparam(libc::pthread_self(), &mut policy, &mut param) };
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        if policy != libc::SCHED_FIFO && policy != libc::SCHED_RR {
            set_fifo(priority)?;
        }
        Ok(Boost { policy, param })
    }
}

impl Drop for Boost {
    fn drop(&mut self) {
        // SAFETY: as in `new`; restoring what this thread had, which the
        // kernel accepted before, needs no privilege.
        unsafe { libc::pthread_setschedparam(libc::pthread_self(), self.policy, &self.param) };
    }
}

/// The calling thread's scheduling policy (`SCHED_OTHER`, `SCHED_FIFO`, …).
pub fn policy() -> i32 {
    let mut policy = 0;
    let mut param = libc::sched_param { sched_priority: 0 };
    // SAFETY: as in `Boost::new`.
    unsafe { libc::pthread_getschedparam(libc::pthread_self(), &mut policy, &mut param) };
    policy
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_root() -> bool {
        // SAFETY: geteuid has no preconditions.
        unsafe { libc::geteuid() == 0 }
    }

    /// The boost holds for its scope and the thread's own policy returns
    /// after; without the privilege the refusal is an error and nothing
    /// changes.
    #[test]
    fn a_boost_lasts_its_scope_and_gives_the_policy_back() {
        std::thread::spawn(|| {
            let before = policy();
            assert_eq!(before, libc::SCHED_OTHER);
            match Boost::new(PACER_PRIORITY) {
                Ok(b) => {
                    assert_eq!(policy(), libc::SCHED_FIFO);
                    drop(b);
                }
                Err(e) => {
                    assert!(!is_root(), "root was refused SCHED_FIFO: {e}");
                    assert_eq!(e.kind(), io::ErrorKind::PermissionDenied);
                }
            }
            assert_eq!(policy(), before);
        })
        .join()
        .unwrap();
    }
}
