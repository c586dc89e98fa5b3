//! Timing costs (the paper's Table 2): clock read, the clock's resolution,
//! zero-byte system calls, one UDP `sendto`, and a subroutine call.
//!
//! Cheap operations are timed in batches (one clock read per batch of
//! 1000) and the median per-operation cost over the batches is reported;
//! `sendto` is timed one call at a time.

use super::{percentile, Known};
use crate::clock;
use serde::{Deserialize, Serialize};
use std::net::UdpSocket;
use std::os::fd::AsRawFd;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Timing {
    /// The clock pathsonde stamps and paces with.
    pub clock: String,
    /// /sys/devices/system/clocksource/clocksource0/current_clocksource (e.g. tsc).
    pub clocksource: Known<String>,
    /// clock_gettime(CLOCK_MONOTONIC), median per read.
    pub clock_read_ns: Known<f64>,
    /// clock_getres(CLOCK_MONOTONIC): what the kernel claims.
    pub clock_getres_ns: Known<i64>,
    /// Smallest step seen reading the clock back to back.
    pub clock_step_ns: i64,
    /// read() of 0 bytes on a non-blocking pipe.
    pub syscall_read_ns: Known<f64>,
    /// write() of 0 bytes to /dev/null.
    pub syscall_write_ns: Known<f64>,
    /// getppid(): a syscall that does no work.
    pub syscall_getppid_ns: f64,
    /// One sendto() of a 1472-byte UDP payload (1500-byte IP packet) to a
    /// loopback socket: median and 99th percentile.
    pub sendto_1472_median_ns: Known<f64>,
    pub sendto_1472_p99_ns: Known<f64>,
    /// A non-inlined function call and return.
    pub call_ns: f64,
}

const BATCH: usize = 1000;
const BATCHES: usize = 200;

/// Median over batches of the per-operation time of `op`.
fn per_op_ns(mut op: impl FnMut()) -> f64 {
    let mut per = Vec::with_capacity(BATCHES);
    for _ in 0..BATCHES {
        let a = clock::monotonic();
        for _ in 0..BATCH {
            op();
        }
        let b = clock::monotonic();
        per.push(b.since(a).ns() as f64 / BATCH as f64);
    }
    per.sort_by(f64::total_cmp);
    percentile(&per, 50.0)
}

#[inline(never)]
fn callee(x: u64) -> u64 {
    std::hint::black_box(x).wrapping_add(1)
}

pub fn probe() -> Timing {
    let clock_read_ns = Known::Value(per_op_ns(|| {
        std::hint::black_box(clock::monotonic());
    }));
    let mut res = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `res` is a valid, writable timespec.
    let rc = unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC, &mut res) };
    let clock_getres_ns = if rc == 0 {
        Known::Value(res.tv_sec * 1_000_000_000 + res.tv_nsec)
    } else {
        Known::unavailable(format!("clock_getres: {}", std::io::Error::last_os_error()))
    };
    let mut x = 0u64;
    let call_ns = per_op_ns(|| {
        x = callee(x);
    });
    std::hint::black_box(x);
    Timing {
        clock: "CLOCK_MONOTONIC (clock_gettime, vDSO where the kernel offers it)".into(),
        clocksource: super::read_trimmed(
            "/sys/devices/system/clocksource/clocksource0/current_clocksource",
        )
        .into(),
        clock_read_ns,
        clock_getres_ns,
        clock_step_ns: clock::monotonic_resolution().ns(),
        syscall_read_ns: read_zero().into(),
        syscall_write_ns: write_zero().into(),
        syscall_getppid_ns: per_op_ns(|| {
            // SAFETY: getppid has no arguments and cannot fail.
            std::hint::black_box(unsafe { libc::getppid() });
        }),
        sendto_1472_median_ns: Known::unavailable("not measured"),
        sendto_1472_p99_ns: Known::unavailable("not measured"),
        call_ns,
    }
    .with_sendto()
}

impl Timing {
    fn with_sendto(mut self) -> Self {
        match sendto_cost(2000) {
            Ok((med, p99)) => {
                self.sendto_1472_median_ns = Known::Value(med);
                self.sendto_1472_p99_ns = Known::Value(p99);
            }
            Err(e) => {
                self.sendto_1472_median_ns = Known::unavailable(format!("sendto: {e}"));
                self.sendto_1472_p99_ns = Known::unavailable(format!("sendto: {e}"));
            }
        }
        self
    }
}

fn read_zero() -> Result<f64, String> {
    let mut fds = [0i32; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } != 0 {
        return Err(format!("pipe2: {}", std::io::Error::last_os_error()));
    }
    let mut buf = [0u8; 1];
    let ns = per_op_ns(|| {
        // SAFETY: reading 0 bytes into a valid buffer from our own pipe.
        std::hint::black_box(unsafe { libc::read(fds[0], buf.as_mut_ptr().cast(), 0) });
    });
    // SAFETY: closing the two descriptors pipe2 gave us, once.
    unsafe {
        libc::close(fds[0]);
        libc::close(fds[1]);
    }
    Ok(ns)
}

fn write_zero() -> Result<f64, String> {
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/null")
        .map_err(|e| format!("/dev/null: {e}"))?;
    let fd = f.as_raw_fd();
    let buf = [0u8; 1];
    Ok(per_op_ns(|| {
        // SAFETY: writing 0 bytes from a valid buffer to an open descriptor.
        std::hint::black_box(unsafe { libc::write(fd, buf.as_ptr().cast(), 0) });
    }))
}

/// (median, p99) of single `send` calls of 1472 bytes to a loopback sink
/// that is never read (the kernel delivers, or drops once the sink's
/// buffer is full, inside the call).
fn sendto_cost(n: usize) -> std::io::Result<(f64, f64)> {
    let sink = UdpSocket::bind("127.0.0.1:0")?;
    let sock = UdpSocket::bind("127.0.0.1:0")?;
    let dest = sink.local_addr()?;
    let buf = [0u8; 1472];
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let a = clock::monotonic();
        sock.send_to(&buf, dest)?;
        let b = clock::monotonic();
        samples.push(b.since(a).ns() as f64);
    }
    samples.sort_by(f64::total_cmp);
    Ok((percentile(&samples, 50.0), percentile(&samples, 99.0)))
}
