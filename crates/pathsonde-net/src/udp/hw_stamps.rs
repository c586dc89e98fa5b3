//! The NIC's hardware receive stamps, only when the operator asks for them
//! (`pathsonde serve --hw-stamps`), and the NIC left as it was found.
//!
//! `SIOCSHWTSTAMP` sets a property of the network device, not of one
//! socket: every program on the host sees it.  A PTP daemon (ptp4l) sets
//! its own transmit type and receive filter there, and loses its clock
//! discipline when another program overwrites them.  So here the device's
//! configuration is read first (`SIOCGHWTSTAMP`); only its receive filter is
//! raised to `HWTSTAMP_FILTER_ALL`, with the transmit type and flags written
//! back exactly as read; nothing is written when the filter already is ALL,
//! nor when the configuration cannot be read (writing blind could undo
//! someone else's); and [`HwStampGuard`] writes the configuration it read
//! back when it is dropped.  The ioctls sit behind [`HwStampIoctl`] so the
//! tests can see every call without a NIC.

use std::io;
use std::net::{IpAddr, UdpSocket};
use std::os::fd::AsRawFd;

/// `struct hwtstamp_config` (linux/net_tstamp.h), the device's stamping
/// configuration as `SIOCGHWTSTAMP` / `SIOCSHWTSTAMP` carry it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HwConfig {
    pub flags: i32,
    /// `HWTSTAMP_TX_*`: which sent packets the NIC stamps (ptp4l's business).
    pub tx_type: i32,
    /// `HWTSTAMP_FILTER_*`: which received packets the NIC stamps.
    pub rx_filter: i32,
}

/// `HWTSTAMP_FILTER_ALL`: stamp every received packet.
pub const FILTER_ALL: i32 = libc::HWTSTAMP_FILTER_ALL as i32;

/// What `ETHTOOL_GET_TS_INFO` says the NIC can do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TsInfo {
    /// `SOF_TIMESTAMPING_*` capabilities.
    pub so_timestamping: u32,
    /// Bit `1 << HWTSTAMP_FILTER_x` for each receive filter it supports.
    pub rx_filters: u32,
}

impl TsInfo {
    /// Whether the NIC can stamp every received packet in hardware.
    pub fn stamps_every_packet(&self) -> bool {
        self.so_timestamping & libc::SOF_TIMESTAMPING_RX_HARDWARE != 0
            && self.rx_filters & (1 << libc::HWTSTAMP_FILTER_ALL) != 0
    }
}

/// The three device ioctls hardware stamping needs, by interface name.
/// The real one is [`LibcHwStampIoctl`]; tests use a fake that records calls.
pub trait HwStampIoctl: Send {
    /// `SIOCETHTOOL` `ETHTOOL_GET_TS_INFO`: what the NIC can stamp.
    fn ts_info(&self, ifname: &str) -> io::Result<TsInfo>;
    /// `SIOCGHWTSTAMP`: the device's current configuration.
    fn get(&self, ifname: &str) -> io::Result<HwConfig>;
    /// `SIOCSHWTSTAMP`: sets `config`; returns what the driver applied
    /// (it may answer with another filter than the one asked for).
    fn set(&self, ifname: &str, config: HwConfig) -> io::Result<HwConfig>;
}

/// The ioctls through a duplicate of the probe socket's descriptor (any
/// socket in the device's network namespace will do; this one is in the
/// right namespace even where the lab moved its thread into another).
pub struct LibcHwStampIoctl {
    sock: UdpSocket,
}

impl LibcHwStampIoctl {
    pub fn new(sock: &UdpSocket) -> io::Result<Self> {
        Ok(LibcHwStampIoctl {
            sock: sock.try_clone()?,
        })
    }

    /// Issues device ioctl `request` on `ifname` with `ifr_data` pointing
    /// at `data`; errors name the interface and the request.
    fn ioctl<T>(
        &self,
        ifname: &str,
        request: libc::c_ulong,
        what: &str,
        data: &mut T,
    ) -> io::Result<()> {
        let context = |e: io::Error| io::Error::new(e.kind(), format!("{ifname}: {what}: {e}"));
        let mut req = ifreq(ifname, (data as *mut T).cast()).ok_or_else(|| {
            context(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a valid interface name",
            ))
        })?;
        // SAFETY: `req` is a complete `struct ifreq` (padded to the kernel's
        // size) whose `ifr_data` points at `data`, a live `T` of the layout
        // `request` expects; both outlive the call.
        let rc = unsafe { libc::ioctl(self.sock.as_raw_fd(), request as _, &mut req) };
        if rc != 0 {
            return Err(context(io::Error::last_os_error()));
        }
        Ok(())
    }
}

impl HwStampIoctl for LibcHwStampIoctl {
    fn ts_info(&self, ifname: &str) -> io::Result<TsInfo> {
        let mut info = EthtoolTsInfo {
            cmd: ETHTOOL_GET_TS_INFO,
            ..EthtoolTsInfo::default()
        };
        self.ioctl(ifname, libc::SIOCETHTOOL, "ETHTOOL_GET_TS_INFO", &mut info)?;
        Ok(TsInfo {
            so_timestamping: info.so_timestamping,
            rx_filters: info.rx_filters,
        })
    }

    fn get(&self, ifname: &str) -> io::Result<HwConfig> {
        let mut cfg = libc::hwtstamp_config {
            flags: 0,
            tx_type: 0,
            rx_filter: 0,
        };
        self.ioctl(ifname, libc::SIOCGHWTSTAMP, "SIOCGHWTSTAMP", &mut cfg)?;
        Ok(HwConfig {
            flags: cfg.flags,
            tx_type: cfg.tx_type,
            rx_filter: cfg.rx_filter,
        })
    }

    fn set(&self, ifname: &str, config: HwConfig) -> io::Result<HwConfig> {
        let mut cfg = libc::hwtstamp_config {
            flags: config.flags,
            tx_type: config.tx_type,
            rx_filter: config.rx_filter,
        };
        self.ioctl(ifname, libc::SIOCSHWTSTAMP, "SIOCSHWTSTAMP", &mut cfg)?;
        Ok(HwConfig {
            flags: cfg.flags,
            tx_type: cfg.tx_type,
            rx_filter: cfg.rx_filter,
        })
    }
}

/// `struct ethtool_ts_info` (linux/ethtool.h).
#[repr(C)]
#[derive(Default)]
struct EthtoolTsInfo {
    cmd: u32,
    so_timestamping: u32,
    phc_index: i32,
    tx_types: u32,
    tx_reserved: [u32; 3],
    rx_filters: u32,
    rx_reserved: [u32; 3],
}

/// `struct ifreq` with the `ifr_data` member, padded to the kernel's size.
#[repr(C)]
struct IfreqData {
    name: [libc::c_char; libc::IFNAMSIZ],
    data: *mut libc::c_void,
    _pad: [u8; 16],
}

const ETHTOOL_GET_TS_INFO: u32 = 0x41;

fn ifreq(name: &str, data: *mut libc::c_void) -> Option<IfreqData> {
    if name.is_empty() || name.len() >= libc::IFNAMSIZ {
        return None;
    }
    let mut r = IfreqData {
        name: [0; libc::IFNAMSIZ],
        data,
        _pad: [0; 16],
    };
    for (d, b) in r.name.iter_mut().zip(name.bytes()) {
        *d = b as libc::c_char;
    }
    Some(r)
}

/// The interface that holds `addr`, when one does (not for 0.0.0.0 / ::).
pub fn interface_of(addr: IpAddr) -> Option<String> {
    if addr.is_unspecified() {
        return None;
    }
    nix::ifaddrs::getifaddrs().ok()?.find_map(|i| {
        let a = i.address?;
        let ip: IpAddr = if let Some(v4) = a.as_sockaddr_in() {
            v4.ip().into()
        } else {
            a.as_sockaddr_in6()?.ip().into()
        };
        (ip == addr).then_some(i.interface_name)
    })
}

/// Hardware receive stamps on one interface, held: while it lives the NIC
/// stamps every received packet; dropping it writes back the configuration
/// found, if anything was written.  Each receiver holds its own, so a server
/// leaves the NIC as it found it at the end of every session.
pub struct HwStampGuard {
    ioctl: Box<dyn HwStampIoctl>,
    ifname: String,
    found: HwConfig,
    /// What this guard wrote, as the driver applied it; `None` when it
    /// wrote nothing (and so has nothing to restore).
    wrote: Option<HwConfig>,
}

impl std::fmt::Debug for HwStampGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HwStampGuard")
            .field("ifname", &self.ifname)
            .field("found", &self.found)
            .field("wrote", &self.wrote)
            .finish()
    }
}

impl HwStampGuard {
    /// Makes `ifname`'s NIC stamp every received packet, changing only its
    /// receive filter.  Order: read the configuration (refuse if that
    /// fails), check the NIC can stamp every packet, then write it with
    /// rx_filter ALL unless it already is.  `Err` says why hardware stamps
    /// are off; the device is then as it was.
    pub fn raise(ioctl: Box<dyn HwStampIoctl>, ifname: &str) -> Result<HwStampGuard, String> {
        let found = ioctl.get(ifname).map_err(|e| {
            format!("{e}: cannot read the NIC's stamping configuration, so it is not changed")
        })?;
        let info = ioctl.ts_info(ifname).map_err(|e| e.to_string())?;
        if !info.stamps_every_packet() {
            return Err(format!(
                "{ifname}: no hardware receive timestamps for all packets"
            ));
        }
        let mut guard = HwStampGuard {
            ioctl,
            ifname: ifname.to_string(),
            found,
            wrote: None,
        };
        if found.rx_filter == FILTER_ALL {
            return Ok(guard);
        }
        let want = HwConfig {
            rx_filter: FILTER_ALL,
            ..found
        };
        let applied = guard.ioctl.set(ifname, want).map_err(|e| e.to_string())?;
        // From here the device has changed: the guard restores it, also
        // when the driver applied something else and it is dropped now.
        guard.wrote = Some(applied);
        if applied.rx_filter != FILTER_ALL {
            return Err(format!(
                "{ifname}: SIOCSHWTSTAMP: the driver applied rx_filter {} instead of ALL",
                applied.rx_filter
            ));
        }
        Ok(guard)
    }

    pub fn interface(&self) -> &str {
        &self.ifname
    }

    /// The configuration found, which is restored on drop.
    pub fn found(&self) -> HwConfig {
        self.found
    }

    /// Whether the receive filter was raised (false: it already was ALL).
    pub fn changed(&self) -> bool {
        self.wrote.is_some()
    }
}

impl Drop for HwStampGuard {
    fn drop(&mut self) {
        let Some(wrote) = self.wrote else {
            return;
        };
        // Someone else (a PTP daemon started meanwhile) set the NIC since:
        // theirs stands; writing back the older value would undo it.
        if let Ok(now) = self.ioctl.get(&self.ifname) {
            if now != wrote {
                eprintln!(
                    "pathsonde: warning: {}'s hardware stamping was changed by another program during the session; left as it is now",
                    self.ifname
                );
                return;
            }
        }
        if let Err(e) = self.ioctl.set(&self.ifname, self.found) {
            // Said always, not only with logging on: the host is left changed.
            eprintln!(
                "pathsonde: warning: could not restore {}'s hardware stamping (tx_type {}, rx_filter {}, flags {:#x}): {e}",
                self.ifname, self.found.tx_type, self.found.rx_filter, self.found.flags
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::TimestampingReceiver;
    use super::*;
    use std::sync::{Arc, Mutex};

    #[derive(Debug, Clone, PartialEq, Eq)]
    enum Call {
        TsInfo(String),
        Get(String),
        Set(String, HwConfig),
    }

    /// A NIC whose configuration lives in memory; every call is recorded.
    #[derive(Clone)]
    struct Fake {
        calls: Arc<Mutex<Vec<Call>>>,
        config: Arc<Mutex<HwConfig>>,
        get_fails: bool,
        info: TsInfo,
    }

    /// ptp4l's usual setting: transmit stamps on, PTP v2 event filter, and
    /// a flag bit so a version that zeroes the flags is caught.
    const PTP4L: HwConfig = HwConfig {
        flags: 0x1,
        tx_type: libc::HWTSTAMP_TX_ON as i32,
        rx_filter: libc::HWTSTAMP_FILTER_PTP_V2_EVENT as i32,
    };

    impl Fake {
        fn new(config: HwConfig) -> Fake {
            Fake {
                calls: Arc::default(),
                config: Arc::new(Mutex::new(config)),
                get_fails: false,
                info: TsInfo {
                    so_timestamping: libc::SOF_TIMESTAMPING_RX_HARDWARE,
                    rx_filters: 1 << libc::HWTSTAMP_FILTER_ALL,
                },
            }
        }
        fn calls(&self) -> Vec<Call> {
            self.calls.lock().unwrap().clone()
        }
        fn config(&self) -> HwConfig {
            *self.config.lock().unwrap()
        }
        fn boxed(&self) -> Box<dyn HwStampIoctl> {
            Box::new(self.clone())
        }
    }

    impl HwStampIoctl for Fake {
        fn ts_info(&self, ifname: &str) -> io::Result<TsInfo> {
            self.calls.lock().unwrap().push(Call::TsInfo(ifname.into()));
            Ok(self.info)
        }
        fn get(&self, ifname: &str) -> io::Result<HwConfig> {
            self.calls.lock().unwrap().push(Call::Get(ifname.into()));
            if self.get_fails {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    format!("{ifname}: SIOCGHWTSTAMP: Operation not supported"),
                ));
            }
            Ok(self.config())
        }
        fn set(&self, ifname: &str, config: HwConfig) -> io::Result<HwConfig> {
            self.calls
                .lock()
                .unwrap()
                .push(Call::Set(ifname.into(), config));
            *self.config.lock().unwrap() = config;
            Ok(config)
        }
    }

    fn loopback() -> UdpSocket {
        super::super::bind("127.0.0.1:0".parse().unwrap()).unwrap()
    }

    #[test]
    fn without_the_opt_in_the_nic_is_neither_read_nor_written() {
        let fake = Fake::new(PTP4L);
        let mut asked = false;
        let rx = TimestampingReceiver::open(loopback(), false, |_| {
            asked = true;
            Ok(fake.boxed())
        });
        assert!(!asked, "no ioctl handle is even made without --hw-stamps");
        assert_eq!(fake.calls(), vec![]);
        assert!(
            rx.hardware_off().unwrap().contains("--hw-stamps"),
            "{:?}",
            rx.hardware_off()
        );
        assert!(rx.hardware().is_none());
        drop(rx);
        assert_eq!(fake.calls(), vec![], "nothing on drop either");
        assert_eq!(fake.config(), PTP4L);
        // The public constructor is the software one.
        let rx = TimestampingReceiver::new(loopback());
        assert!(rx.hardware_off().unwrap().contains("not requested"));
    }

    #[test]
    fn with_the_opt_in_only_the_receive_filter_is_raised_and_restored_on_drop() {
        let fake = Fake::new(PTP4L);
        // Through the receiver: the socket is bound to 127.0.0.1, on `lo`.
        let rx = TimestampingReceiver::open(loopback(), true, |_| Ok(fake.boxed()));
        assert_eq!(rx.hardware_off(), None);
        let raised = HwConfig {
            rx_filter: FILTER_ALL,
            ..PTP4L
        };
        assert_eq!(
            fake.calls(),
            vec![
                Call::Get("lo".into()),
                Call::TsInfo("lo".into()),
                Call::Set("lo".into(), raised),
            ]
        );
        let guard = rx.hardware().expect("hardware stamps on");
        assert_eq!(guard.interface(), "lo");
        assert!(guard.changed());
        assert_eq!(guard.found(), PTP4L);
        drop(rx);
        assert_eq!(
            fake.calls()[3..],
            [Call::Get("lo".into()), Call::Set("lo".into(), PTP4L)],
            "the configuration found is written back exactly"
        );
        assert_eq!(fake.config(), PTP4L);
    }

    #[test]
    fn each_guard_restores_what_it_found() {
        // Sessions one after another: each finds the original and leaves it.
        let fake = Fake::new(PTP4L);
        for _ in 0..2 {
            let g = HwStampGuard::raise(fake.boxed(), "eth0").unwrap();
            assert_eq!(fake.config().rx_filter, FILTER_ALL);
            assert_eq!(fake.config().tx_type, PTP4L.tx_type);
            drop(g);
            assert_eq!(fake.config(), PTP4L);
        }
        let sets = fake
            .calls()
            .into_iter()
            .filter(|c| matches!(c, Call::Set(..)))
            .count();
        assert_eq!(sets, 4);
    }

    #[test]
    fn a_setting_another_program_made_meanwhile_is_not_undone() {
        let fake = Fake::new(HwConfig {
            flags: 0,
            tx_type: libc::HWTSTAMP_TX_OFF as i32,
            rx_filter: libc::HWTSTAMP_FILTER_NONE as i32,
        });
        let g = HwStampGuard::raise(fake.boxed(), "eth0").unwrap();
        // ptp4l starts during the session and sets its own configuration.
        *fake.config.lock().unwrap() = PTP4L;
        drop(g);
        assert_eq!(fake.config(), PTP4L);
        assert_eq!(fake.calls().last(), Some(&Call::Get("eth0".into())));
    }

    #[test]
    fn a_filter_already_all_is_not_written_at_all() {
        let already = HwConfig {
            flags: 0,
            tx_type: libc::HWTSTAMP_TX_ON as i32,
            rx_filter: FILTER_ALL,
        };
        let fake = Fake::new(already);
        let g = HwStampGuard::raise(fake.boxed(), "eth0").unwrap();
        assert!(!g.changed());
        drop(g);
        assert!(
            !fake.calls().iter().any(|c| matches!(c, Call::Set(..))),
            "{:?}",
            fake.calls()
        );
        assert_eq!(fake.config(), already);
    }

    #[test]
    fn a_configuration_that_cannot_be_read_is_not_written_blind() {
        let mut fake = Fake::new(PTP4L);
        fake.get_fails = true;
        let rx = TimestampingReceiver::open(loopback(), true, |_| Ok(fake.boxed()));
        assert_eq!(fake.calls(), vec![Call::Get("lo".into())]);
        let why = rx.hardware_off().expect("refused");
        assert!(why.contains("SIOCGHWTSTAMP"), "{why}");
        assert!(why.contains("not changed"), "{why}");
        assert!(rx.hardware().is_none());
        drop(rx);
        assert_eq!(fake.calls(), vec![Call::Get("lo".into())]);
    }

    #[test]
    fn a_nic_that_cannot_stamp_everything_is_left_alone() {
        let mut fake = Fake::new(PTP4L);
        fake.info.rx_filters = 1 << libc::HWTSTAMP_FILTER_PTP_V2_EVENT;
        let why = HwStampGuard::raise(fake.boxed(), "eth0").unwrap_err();
        assert!(why.contains("all packets"), "{why}");
        assert!(!fake.calls().iter().any(|c| matches!(c, Call::Set(..))));
    }

    #[test]
    fn a_driver_that_applies_another_filter_is_restored_at_once() {
        struct Stubborn(Fake);
        impl HwStampIoctl for Stubborn {
            fn ts_info(&self, i: &str) -> io::Result<TsInfo> {
                self.0.ts_info(i)
            }
            fn get(&self, i: &str) -> io::Result<HwConfig> {
                self.0.get(i)
            }
            fn set(&self, i: &str, c: HwConfig) -> io::Result<HwConfig> {
                // Asked for ALL, it applies (and then reports) SOME.
                let applied = if c.rx_filter == FILTER_ALL {
                    HwConfig {
                        rx_filter: libc::HWTSTAMP_FILTER_SOME as i32,
                        ..c
                    }
                } else {
                    c
                };
                self.0.set(i, c)?;
                *self.0.config.lock().unwrap() = applied;
                Ok(applied)
            }
        }
        let fake = Fake::new(PTP4L);
        let why = HwStampGuard::raise(Box::new(Stubborn(fake.clone())), "eth0").unwrap_err();
        assert!(why.contains("instead of ALL"), "{why}");
        assert_eq!(fake.calls().last(), Some(&Call::Set("eth0".into(), PTP4L)));
        assert_eq!(fake.config(), PTP4L);
    }

    #[test]
    fn the_real_ioctls_on_loopback_refuse_rather_than_write() {
        // `lo` has no SIOCGHWTSTAMP: the real path stops at the read.
        let rx = TimestampingReceiver::with_hardware(loopback());
        let why = rx.hardware_off().expect("lo has no hardware stamps");
        assert!(why.contains("lo"), "{why}");
        // A wildcard bind names no interface: nothing to ask.
        let rx = TimestampingReceiver::with_hardware(
            super::super::bind("0.0.0.0:0".parse().unwrap()).unwrap(),
        );
        assert!(rx.hardware_off().unwrap().contains("0.0.0.0"));
    }
}
