//! Unit tests of FAC²'s control logic; the accuracy tests against the
//! synthetic path live in `tests/fac2_fluid.rs`.

use super::*;
use crate::units::Bytes;
use crate::synthetic::{drive, FluidPath, FluidPathConfig};

fn path(c_mbps: f64, x_mbps: f64) -> FluidPath {
    FluidPath::new(FluidPathConfig::new(
        BitRate::from_mbps(c_mbps),
        BitRate::from_mbps(x_mbps),
    ))
}

fn show(m: &Fac2) -> String {
    m.trains
        .iter()
        .map(|t| {
            format!(
                "{}:{:.1}->{:.1}({:.1}ms,{:?})",
                t.role.describe(),
                t.sent_bps / 1e6,
                t.recv_bps.unwrap_or(0.0) / 1e6,
                t.secs * 1e3,
                t.class
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
#[ignore]
fn scratch_table() {
    for (c, load, poisson) in [
        (100.0, 0.9, false),
        (100.0, 0.6, false),
        (300.0, 0.3, true),
        (300.0, 0.5, true),
        (300.0, 0.7, true),
        (300.0, 0.9, true),
        (100.0, 0.1, true),
        (100.0, 0.9, true),
    ] {
        for seed in 1..4 {
            let cfg = FluidPathConfig {
                poisson_cross: poisson.then_some(Bytes(1500)),
                queue_limit: Some(Bytes(256 * 1024)),
                seed,
                ..FluidPathConfig::new(BitRate::from_mbps(c), BitRate::from_mbps(c * load))
            };
            let mut p = FluidPath::new(cfg);
            let mut m = Fac2::new(Fac2Config::default());
            let e = drive(&mut m, &mut p, 100).unwrap();
            let truth = p.window_available().unwrap().mbps();
            println!(
                "C={c} load={load} seed={seed}: A={:.1} truth={truth:.1} err={:+.1}% band={:.1}..{:.1} conv={} stop={:?} trains={} kB={:.0}\n   {}",
                e.available.mbps(),
                (e.available.mbps() / truth - 1.0) * 100.0,
                e.low.mbps(),
                e.high.map_or(0.0, |h| h.mbps()),
                e.converged,
                m.stop,
                e.trains.len(),
                e.cost.bytes.get() as f64 / 1e3,
                show(&m)
            );
        }
    }
}
