//! The namespace side of a delay line: the TUN device, the sysctls its
//! write-back path needs, and the `ip rule` / route that steer one input
//! interface into it (and take the rule away again).  Kept apart from the
//! relay's threads because it runs once, through `ip` and `sysctl`, and its
//! failures are configuration errors, not timing ones.

use super::DelayLine;
use crate::error::{LabError, Result};
use crate::netns;
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;

/// How the TUN's kernel-side queue (`txqueuelen`) is sized: it only has to
/// absorb the reader's scheduling hiccups, the hold itself is in user space.
const TUN_TXQUEUELEN: u32 = 10_000;

/// Opens `/dev/net/tun` and creates TUN device `name` (IFF_TUN | IFF_NO_PI)
/// in the calling thread's network namespace.  The device lives as long as
/// the returned file (it is not persistent), so a crashed lab leaves no TUN.
pub(super) fn open_tun(name: &str) -> Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/net/tun")
        .map_err(|e| LabError::io("opening /dev/net/tun (is the tun module available?)", e))?;
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *dst = src as libc::c_char;
    }
    req.ifr_ifru.ifru_flags = (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short;
    // SAFETY: TUNSETIFF reads and writes one `struct ifreq`, which `req` is,
    // and the fd is an open /dev/net/tun.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), libc::TUNSETIFF as _, &mut req) };
    if rc != 0 {
        return Err(LabError::io(
            format!("creating TUN device {name} (TUNSETIFF)"),
            std::io::Error::last_os_error(),
        ));
    }
    Ok(file)
}

fn read_sysctl(ns: &str, key: &str) -> Option<String> {
    netns::exec_in(ns, "sysctl", &["-n", key])
        .ok()
        .map(|s| s.trim().to_string())
}

impl DelayLine {
    /// Brings the TUN up, sets the sysctls, and installs the route and the
    /// rule; `rule_installed` says what `stop` must undo.
    pub(super) fn configure_namespace(&mut self) -> Result<()> {
        let ns = self.ns.clone();
        let tun = self.cfg.tun_name.clone();
        let mtu = self.cfg.mtu.to_string();
        let qlen = TUN_TXQUEUELEN.to_string();
        netns::ip(&[
            "-n",
            &ns,
            "link",
            "set",
            &tun,
            "mtu",
            &mtu,
            "txqueuelen",
            &qlen,
            "up",
        ])?;
        // Forwarding: the written-back packet is *input* on the TUN, so the
        // TUN itself must forward (a device made after ip_forward=1 inherits
        // it from `default`, but say so explicitly).
        if read_sysctl(&ns, "net.ipv4.ip_forward").as_deref() != Some("1") {
            netns::sysctl(&ns, "net.ipv4.ip_forward", "1")?;
            self.notes.push("set net.ipv4.ip_forward=1".into());
        }
        netns::sysctl(&ns, &format!("net.ipv4.conf.{tun}.forwarding"), "1")?;
        // Reverse-path filter: the source of a written-back packet is reached
        // via `from_iface`, not the TUN, so strict mode (1) drops it.  The
        // effective value is max(all, dev): turn the TUN's off and, if `all`
        // is strict, relax it to loose (2), which still checks reachability.
        netns::sysctl(&ns, &format!("net.ipv4.conf.{tun}.rp_filter"), "0")?;
        if read_sysctl(&ns, "net.ipv4.conf.all.rp_filter").as_deref() == Some("1") {
            netns::sysctl(&ns, "net.ipv4.conf.all.rp_filter", "2")?;
            self.notes
                .push("relaxed net.ipv4.conf.all.rp_filter from 1 (strict) to 2 (loose)".into());
        }
        // A packet whose source is one of the router's own addresses (rare:
        // the router's own traffic does not match `iif`) would otherwise be
        // dropped as a martian on re-entry.
        netns::sysctl(&ns, &format!("net.ipv4.conf.{tun}.accept_local"), "1")?;
        let table = self.cfg.table.to_string();
        netns::ip(&[
            "-n", &ns, "route", "replace", "default", "dev", &tun, "table", &table,
        ])?;
        netns::ip(&[
            "-n",
            &ns,
            "rule",
            "add",
            "iif",
            &self.cfg.from_iface,
            "lookup",
            &table,
        ])?;
        self.rule_installed = true;
        Ok(())
    }

    /// The TUN's kernel drop counter (tx_dropped), read with `ip -s -j`.
    pub(super) fn read_tun_dropped(&self) -> Result<u64> {
        let out = netns::ip(&[
            "-n",
            &self.ns,
            "-s",
            "-j",
            "link",
            "show",
            "dev",
            &self.cfg.tun_name,
        ])?;
        let v: serde_json::Value = serde_json::from_str(&out).map_err(|e| {
            LabError::Capability(format!("cannot read `ip -s -j link` output: {e}"))
        })?;
        v.get(0)
            .and_then(|l| l.pointer("/stats64/tx/dropped"))
            .and_then(|d| d.as_u64())
            .ok_or_else(|| {
                LabError::Capability(format!(
                    "no tx dropped counter for {} in `ip -s -j link` output",
                    self.cfg.tun_name
                ))
            })
    }

    /// Removes the policy rule if it is installed.  The TUN's route goes
    /// with the TUN when its fd closes.  A namespace that is already gone is
    /// not an error.
    pub(super) fn remove_rule(&mut self) -> Result<()> {
        if self.rule_installed {
            self.rule_installed = false;
            if netns::exists(&self.ns) {
                let table = self.cfg.table.to_string();
                let r = netns::ip(&[
                    "-n",
                    &self.ns,
                    "rule",
                    "del",
                    "iif",
                    &self.cfg.from_iface,
                    "lookup",
                    &table,
                ]);
                // The namespace may vanish between the check and the call.
                if let Err(e) = r {
                    if netns::exists(&self.ns) {
                        return Err(e);
                    }
                }
            }
        }
        Ok(())
    }
}
