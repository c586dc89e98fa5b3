//! The UDPSTP sending-rate table (spec §9): 1153 rows, SRI 0–1152, each a
//! pair of transmitters whose periods, datagram sizes and burst lengths set
//! one IP-layer rate.
//!
//! Rows 1–1000 are built so that row `n` carries `n` Mb/s at the IP layer
//! (IPv4 headers counted); row 0 is a keep-alive of about 0.11 Mb/s; rows
//! 1001–1152 climb in larger steps above 1 Gb/s.  The table depends on two
//! switches negotiated at setup: jumbo datagrams above 1 Gb/s (default on)
//! and the "traditional" 1500-byte MTU (default off).  Nothing is stored:
//! [`sending_rate`] computes a row from its index.

use crate::units::{BitRate, Bytes, DurationNs};
use serde::{Deserialize, Serialize};

/// UDP (8) + IPv4 (20) header bytes: what the IP layer adds to a UDP payload.
pub const IPV4_UDP_OVERHEAD: u64 = 28;
/// UDP (8) + IPv6 (40) header bytes.
pub const IPV6_UDP_OVERHEAD: u64 = 48;
/// The default datagram payload: a 1250-byte IPv4 packet (§9.1).
pub(crate) const DEFAULT_PAYLOAD: u64 = 1222;
/// The payload with the traditional-MTU option: a 1500-byte IPv4 packet.
pub(crate) const TRADITIONAL_PAYLOAD: u64 = 1472;
/// The largest jumbo payload: a 9000-byte IPv4 packet.
pub(crate) const JUMBO_PAYLOAD: u64 = 8972;
/// The smallest IPv4 UDP payload a load sender puts on the wire (§6.1); the
/// lower end of a random-size draw.
pub(crate) const MIN_PAYLOAD_V4: u64 = 52;
/// The smallest IPv6 UDP payload (§6.1, §9.4).
pub(crate) const MIN_PAYLOAD_V6: u64 = 32;
/// The bit in a payload or add-on word that means "random size up to the low 31 bits" (§3.4).
pub(crate) const RANDOM_SIZE_BIT: u32 = 0x8000_0000;
/// Transmitter 1's period in every row that uses it (§9.1).
pub(crate) const TX1_PERIOD: DurationNs = DurationNs::from_us(100);
/// Transmitter 2's period in rows 1–1000 (§9.1).
pub(crate) const TX2_PERIOD: DurationNs = DurationNs::from_us(1000);
/// Transmitter 2's period in row 0, the keep-alive row (§9.2).
pub(crate) const KEEPALIVE_PERIOD: DurationNs = DurationNs::from_us(50_000);
/// The largest burst a row above 1 Gb/s asks for (§9.3).
pub const MAX_BURST: u32 = 100;

/// An index into the sending-rate table (SRI), 0 ..= [`RowIndex::MAX`].
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(into = "u16", try_from = "u16")]
pub struct RowIndex(u16);

impl From<RowIndex> for u16 {
    fn from(r: RowIndex) -> u16 {
        r.0
    }
}

impl TryFrom<u16> for RowIndex {
    type Error = String;
    fn try_from(n: u16) -> Result<RowIndex, String> {
        RowIndex::new(n)
            .ok_or_else(|| format!("sending-rate row {n} is past the table's last row, 1152"))
    }
}

impl RowIndex {
    /// Row 0, the keep-alive rate; where a search starts.
    pub const ZERO: RowIndex = RowIndex(0);
    /// The high-speed threshold H (§10.1): row 1000, 1 Gb/s.  Below it the
    /// searches may take fast steps; at and above it they move one row at a time.
    pub(crate) const HIGH_SPEED: RowIndex = RowIndex(1000);
    /// The top row, 1152 (the table always has 1153 rows).
    pub const MAX: RowIndex = RowIndex(1152);
    /// The number of rows in the table.
    pub const COUNT: usize = 1153;

    /// The row `index`, or `None` past [`RowIndex::MAX`].
    pub const fn new(index: u16) -> Option<RowIndex> {
        if index <= Self::MAX.0 {
            Some(RowIndex(index))
        } else {
            None
        }
    }
    /// The row `index`, or the top row past it.
    pub const fn saturating(index: u32) -> RowIndex {
        if index <= Self::MAX.0 as u32 {
            RowIndex(index as u16)
        } else {
            Self::MAX
        }
    }
    pub const fn get(self) -> u16 {
        self.0
    }
    /// Every row, from 0 to the top.
    pub fn all() -> impl Iterator<Item = RowIndex> {
        (0..=Self::MAX.0).map(RowIndex)
    }
}

/// Which variant of the table the two ends agreed on (setup modifiers 0x01 and 0x02).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TableOptions {
    /// Rows above 1 Gb/s use jumbo datagrams (up to 9000-byte packets).  Default true.
    pub jumbo: bool,
    /// 1500-byte packets instead of 1250-byte ones (payload 1472, not 1222).  Default false.
    pub traditional_mtu: bool,
}

impl Default for TableOptions {
    fn default() -> Self {
        TableOptions {
            jumbo: true,
            traditional_mtu: false,
        }
    }
}

impl TableOptions {
    /// The default payload P of this variant.
    pub const fn payload(self) -> u64 {
        if self.traditional_mtu {
            TRADITIONAL_PAYLOAD
        } else {
            DEFAULT_PAYLOAD
        }
    }
    /// Rows per transmitter-2 burst unit in rows 1–1000 (each add-on adds
    /// 1 Mb/s, each transmitter-2 datagram per ms adds `P + 28` bytes · 8 kb/s).
    const fn step(self) -> u32 {
        if self.traditional_mtu {
            12
        } else {
            10
        }
    }
}

/// The IP version under the test: it sets the header bytes per datagram and
/// how a sender shrinks payloads so that IPv6 packets keep IPv4's sizes (§9.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IpFamily {
    #[default]
    V4,
    V6,
}

impl IpFamily {
    /// UDP + IP header bytes per datagram: 28 or 48.
    pub const fn overhead(self) -> Bytes {
        match self {
            IpFamily::V4 => Bytes::new(IPV4_UDP_OVERHEAD),
            IpFamily::V6 => Bytes::new(IPV6_UDP_OVERHEAD),
        }
    }
}

/// A datagram size in a row: a fixed UDP payload, or a size drawn per
/// datagram uniformly from [52, max] (the wire's bit 31).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Payload {
    Fixed(Bytes),
    Random { max: Bytes },
}

impl Payload {
    pub const NONE: Payload = Payload::Fixed(Bytes::ZERO);

    /// The 32-bit word of the 28-byte structure.  Sizes above 31 bits are
    /// cut to 31 bits (no row comes near).
    pub const fn to_word(self) -> u32 {
        match self {
            Payload::Fixed(b) => (b.get() as u32) & !RANDOM_SIZE_BIT,
            Payload::Random { max } => ((max.get() as u32) & !RANDOM_SIZE_BIT) | RANDOM_SIZE_BIT,
        }
    }
    pub const fn from_word(word: u32) -> Payload {
        let size = Bytes::new((word & !RANDOM_SIZE_BIT) as u64);
        if word & RANDOM_SIZE_BIT != 0 {
            Payload::Random { max: size }
        } else {
            Payload::Fixed(size)
        }
    }
    /// True for a fixed size of zero (no add-on).
    pub const fn is_none(self) -> bool {
        matches!(self, Payload::Fixed(Bytes(0)))
    }
    /// The mean UDP payload a sender puts on the wire for this size over
    /// `family`, in bytes: IPv6 takes 20 off every size of at least 52
    /// (§9.4); a random size is the mean of its range.
    pub(crate) fn mean_on_wire(self, family: IpFamily) -> f64 {
        let v6 = |n: u64| {
            if n >= MIN_PAYLOAD_V4 {
                n - (IPV6_UDP_OVERHEAD - IPV4_UDP_OVERHEAD)
            } else {
                n
            }
        };
        match (self, family) {
            (Payload::Fixed(b), IpFamily::V4) => b.get() as f64,
            (Payload::Fixed(b), IpFamily::V6) => v6(b.get()) as f64,
            (Payload::Random { max }, IpFamily::V4) => {
                (MIN_PAYLOAD_V4 as f64 + max.get().max(MIN_PAYLOAD_V4) as f64) / 2.0
            }
            (Payload::Random { max }, IpFamily::V6) => {
                (MIN_PAYLOAD_V6 as f64 + v6(max.get().max(MIN_PAYLOAD_V4)) as f64) / 2.0
            }
        }
    }
}

/// One transmitter of a row: every `interval`, `burst` datagrams of `payload`.
/// An `interval` of zero means the transmitter is idle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Transmitter {
    pub interval: DurationNs,
    pub payload: Payload,
    pub burst: u32,
}

impl Transmitter {
    pub const IDLE: Transmitter = Transmitter {
        interval: DurationNs::ZERO,
        payload: Payload::NONE,
        burst: 0,
    };
    pub const fn is_idle(&self) -> bool {
        self.interval.ns() <= 0
    }
}

/// One row of the table: the 28-byte sending-rate structure (§3.4), field
/// for field, with units typed.  `tx1_*` is transmitter 1 and `tx2_*`
/// transmitter 2; `tx2_addon` is one extra datagram at the end of every
/// transmitter-2 burst ([`Payload::NONE`] for none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SendingRate {
    pub tx1_interval: DurationNs,
    pub tx1_payload: Payload,
    pub tx1_burst: u32,
    pub tx2_interval: DurationNs,
    pub tx2_payload: Payload,
    pub tx2_burst: u32,
    pub tx2_addon: Payload,
}

impl SendingRate {
    /// All zeros: what a client's Status PDU carries, and no load.
    pub const ZERO: SendingRate = SendingRate {
        tx1_interval: DurationNs::ZERO,
        tx1_payload: Payload::NONE,
        tx1_burst: 0,
        tx2_interval: DurationNs::ZERO,
        tx2_payload: Payload::NONE,
        tx2_burst: 0,
        tx2_addon: Payload::NONE,
    };

    pub const fn tx1(&self) -> Transmitter {
        Transmitter {
            interval: self.tx1_interval,
            payload: self.tx1_payload,
            burst: self.tx1_burst,
        }
    }
    pub const fn tx2(&self) -> Transmitter {
        Transmitter {
            interval: self.tx2_interval,
            payload: self.tx2_payload,
            burst: self.tx2_burst,
        }
    }

    /// The seven 32-bit words of the wire structure, in order (intervals in µs).
    pub fn to_words(&self) -> [u32; 7] {
        let us = |d: DurationNs| u32::try_from(d.ns().max(0) / 1_000).unwrap_or(u32::MAX);
        [
            us(self.tx1_interval),
            self.tx1_payload.to_word(),
            self.tx1_burst,
            us(self.tx2_interval),
            self.tx2_payload.to_word(),
            self.tx2_burst,
            self.tx2_addon.to_word(),
        ]
    }
    /// The row the seven words describe (any words are accepted).
    pub fn from_words(w: [u32; 7]) -> SendingRate {
        SendingRate {
            tx1_interval: DurationNs::from_us(w[0] as i64),
            tx1_payload: Payload::from_word(w[1]),
            tx1_burst: w[2],
            tx2_interval: DurationNs::from_us(w[3] as i64),
            tx2_payload: Payload::from_word(w[4]),
            tx2_burst: w[5],
            tx2_addon: Payload::from_word(w[6]),
        }
    }

    /// Mean bytes per second this row puts on the wire, each datagram
    /// counted as its UDP payload plus `per_datagram` bytes.
    fn bytes_per_sec(&self, family: IpFamily, per_datagram: f64) -> f64 {
        let mut total = 0.0;
        if !self.tx1().is_idle() {
            let per_sec = 1e9 / self.tx1_interval.ns() as f64;
            total += per_sec
                * self.tx1_burst as f64
                * (self.tx1_payload.mean_on_wire(family) + per_datagram);
        }
        if !self.tx2().is_idle() {
            let per_sec = 1e9 / self.tx2_interval.ns() as f64;
            let mut burst =
                self.tx2_burst as f64 * (self.tx2_payload.mean_on_wire(family) + per_datagram);
            if !self.tx2_addon.is_none() {
                burst += self.tx2_addon.mean_on_wire(family) + per_datagram;
            }
            total += per_sec * burst;
        }
        total
    }

    /// The IP-layer rate this row produces (§9.1's formula: every datagram
    /// counted with its UDP and IP headers; random sizes at their mean).
    /// The same over IPv4 and IPv6, since an IPv6 sender shrinks payloads
    /// by the 20 extra header bytes.
    pub fn ip_rate(&self) -> BitRate {
        BitRate::from_bps(8.0 * self.bytes_per_sec(IpFamily::V4, IPV4_UDP_OVERHEAD as f64))
    }
    /// The UDP-payload rate this row produces over `family` (headers not counted).
    pub fn udp_payload_rate(&self, family: IpFamily) -> BitRate {
        BitRate::from_bps(8.0 * self.bytes_per_sec(family, 0.0))
    }
    /// Datagrams per second this row sends.
    pub fn datagrams_per_sec(&self) -> f64 {
        let mut n = 0.0;
        if !self.tx1().is_idle() {
            n += 1e9 / self.tx1_interval.ns() as f64 * self.tx1_burst as f64;
        }
        if !self.tx2().is_idle() {
            let addon = if self.tx2_addon.is_none() { 0.0 } else { 1.0 };
            n += 1e9 / self.tx2_interval.ns() as f64 * (self.tx2_burst as f64 + addon);
        }
        n
    }
}

/// The add-on size that adds `j` Mb/s at 1000 datagrams per second: `125·j − 28`.
const fn addon(j: u32) -> Payload {
    if j == 0 {
        Payload::NONE
    } else {
        Payload::Fixed(Bytes::new(125 * j as u64 - IPV4_UDP_OVERHEAD))
    }
}

/// The row `row` of the table variant `opts` (§9.2, §9.3).
pub fn sending_rate(row: RowIndex, opts: TableOptions) -> SendingRate {
    let p = opts.payload();
    let n = row.get() as u32;
    if n == 0 {
        return SendingRate {
            tx2_interval: KEEPALIVE_PERIOD,
            tx2_addon: Payload::Random { max: Bytes::new(p) },
            ..SendingRate::ZERO
        };
    }
    if n <= 1000 {
        // Row = per_tx1·k + step·i + j (standard: 100k + 10i + j; traditional: 120k + 12i + j).
        let step = opts.step();
        let per_tx1 = step * 10;
        let (k, rem) = (n / per_tx1, n % per_tx1);
        let (i, j) = (rem / step, rem % step);
        let mut r = SendingRate::ZERO;
        if k > 0 {
            r.tx1_interval = TX1_PERIOD;
            r.tx1_payload = Payload::Fixed(Bytes::new(p));
            r.tx1_burst = k;
        }
        if i > 0 || j > 0 {
            r.tx2_interval = TX2_PERIOD;
            if i > 0 {
                r.tx2_payload = Payload::Fixed(Bytes::new(p));
                r.tx2_burst = i;
            }
            r.tx2_addon = addon(j);
        }
        return r;
    }
    let above = n - 1000; // 1 ..= 152
    let (payload, burst) = if opts.jumbo {
        if above <= 62 {
            // L = 1375, 1500, …, 9000 bytes at the IP layer, burst 10.
            (125 * (above as u64 + 10) - IPV4_UDP_OVERHEAD, 10)
        } else {
            (JUMBO_PAYLOAD, 11 + (above - 63))
        }
    } else if opts.traditional_mtu {
        (TRADITIONAL_PAYLOAD, (8 + above).min(MAX_BURST))
    } else {
        (DEFAULT_PAYLOAD, (10 + above).min(MAX_BURST))
    };
    SendingRate {
        tx1_interval: TX1_PERIOD,
        tx1_payload: Payload::Fixed(Bytes::new(payload)),
        tx1_burst: burst,
        ..SendingRate::ZERO
    }
}

/// The IP-layer rate of row `row` (see [`SendingRate::ip_rate`]).
pub fn ip_rate(row: RowIndex, opts: TableOptions) -> BitRate {
    sending_rate(row, opts).ip_rate()
}

/// The highest row whose IP-layer rate is not above `ceiling`: the row a
/// `--max-rate` allows.  Row 0 when even row 0 is above it (row 0 is the
/// keep-alive every test sends), and the top row for a ceiling above the
/// table (or not a number).  Where rows repeat a rate (jumbo off, above
/// 10–12 Gb/s) this is the last of them.
pub fn row_at_or_below(ceiling: BitRate, opts: TableOptions) -> RowIndex {
    let c = ceiling.bps();
    if c.is_nan() {
        return RowIndex::MAX;
    }
    // Rates never fall with the row, so the rows at or below the ceiling
    // are a prefix of the table.
    let (mut lo, mut hi) = (0u32, RowIndex::MAX.get() as u32 + 1); // answer in [lo, hi)
    if ip_rate(RowIndex::ZERO, opts).bps() > c {
        return RowIndex::ZERO;
    }
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if ip_rate(RowIndex::saturating(mid), opts).bps() <= c {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    RowIndex::saturating(lo)
}

#[cfg(test)]
mod tests {
    use super::*;

    const STD: TableOptions = TableOptions {
        jumbo: true,
        traditional_mtu: false,
    };
    const STD_NOJUMBO: TableOptions = TableOptions {
        jumbo: false,
        traditional_mtu: false,
    };
    const TRAD: TableOptions = TableOptions {
        jumbo: true,
        traditional_mtu: true,
    };
    const TRAD_NOJUMBO: TableOptions = TableOptions {
        jumbo: false,
        traditional_mtu: true,
    };
    const ALL: [TableOptions; 4] = [STD, STD_NOJUMBO, TRAD, TRAD_NOJUMBO];

    fn row(n: u16) -> RowIndex {
        RowIndex::new(n).unwrap()
    }
    fn tx(us: i64, payload: u64, burst: u32) -> (DurationNs, Payload, u32) {
        (
            DurationNs::from_us(us),
            Payload::Fixed(Bytes(payload)),
            burst,
        )
    }
    fn idle() -> (DurationNs, Payload, u32) {
        (DurationNs::ZERO, Payload::NONE, 0)
    }
    fn check(
        r: SendingRate,
        t1: (DurationNs, Payload, u32),
        t2: (DurationNs, Payload, u32),
        add: Payload,
    ) {
        assert_eq!((r.tx1_interval, r.tx1_payload, r.tx1_burst), t1, "{r:?}");
        assert_eq!((r.tx2_interval, r.tx2_payload, r.tx2_burst), t2, "{r:?}");
        assert_eq!(r.tx2_addon, add, "{r:?}");
    }
    fn mbps(n: u16, o: TableOptions) -> f64 {
        ip_rate(row(n), o).mbps()
    }

    #[test]
    fn the_sample_rows_of_the_spec() {
        // §9.2's table, standard mode.
        let r = |n| sending_rate(row(n), STD);
        check(
            r(0),
            idle(),
            tx(50_000, 0, 0),
            Payload::Random { max: Bytes(1222) },
        );
        check(r(1), idle(), tx(1000, 0, 0), Payload::Fixed(Bytes(97)));
        check(r(10), idle(), tx(1000, 1222, 1), Payload::NONE);
        check(
            r(99),
            idle(),
            tx(1000, 1222, 9),
            Payload::Fixed(Bytes(1097)),
        );
        check(r(100), tx(100, 1222, 1), idle(), Payload::NONE);
        check(
            r(101),
            tx(100, 1222, 1),
            tx(1000, 0, 0),
            Payload::Fixed(Bytes(97)),
        );
        check(
            r(999),
            tx(100, 1222, 9),
            tx(1000, 1222, 9),
            Payload::Fixed(Bytes(1097)),
        );
        check(r(1000), tx(100, 1222, 10), idle(), Payload::NONE);
        // Their rates.
        assert!((mbps(0, STD) - 0.1064).abs() < 1e-9, "{}", mbps(0, STD));
        for (n, want) in [
            (1, 1.0),
            (10, 10.0),
            (99, 99.0),
            (100, 100.0),
            (101, 101.0),
            (999, 999.0),
            (1000, 1000.0),
        ] {
            assert!(
                (mbps(n, STD) - want).abs() < 1e-9,
                "row {n}: {}",
                mbps(n, STD)
            );
        }
        // §12's worked example: row 0 on the wire.
        assert_eq!(r(0).to_words(), [0, 0, 0, 0x0000_c350, 0, 0, 0x8000_04c6]);
        assert_eq!(SendingRate::from_words(r(0).to_words()), r(0));
    }

    #[test]
    fn rows_up_to_1000_carry_their_index_in_mbps() {
        for o in ALL {
            for n in 1..=1000u16 {
                assert!(
                    (mbps(n, o) - n as f64).abs() < 1e-6,
                    "{o:?} row {n}: {}",
                    mbps(n, o)
                );
            }
        }
    }

    #[test]
    fn the_traditional_rows() {
        let r = |n| sending_rate(row(n), TRAD);
        // Each transmitter-2 datagram is 12 Mb/s, each transmitter-1 one 120 Mb/s.
        check(r(12), idle(), tx(1000, 1472, 1), Payload::NONE);
        check(r(11), idle(), tx(1000, 0, 0), Payload::Fixed(Bytes(1347)));
        check(r(120), tx(100, 1472, 1), idle(), Payload::NONE);
        check(
            r(1000),
            tx(100, 1472, 8),
            tx(1000, 1472, 3),
            Payload::Fixed(Bytes(472)),
        );
        check(
            r(0),
            idle(),
            tx(50_000, 0, 0),
            Payload::Random { max: Bytes(1472) },
        );
    }

    #[test]
    fn the_rows_above_one_gigabit() {
        let r = |n, o| sending_rate(row(n), o);
        // Jumbo (whatever the MTU option): L = 1375 … 9000 at burst 10, then bursts of 9000.
        for o in [STD, TRAD] {
            check(r(1001, o), tx(100, 1347, 10), idle(), Payload::NONE);
            check(r(1062, o), tx(100, 8972, 10), idle(), Payload::NONE);
            check(r(1063, o), tx(100, 8972, 11), idle(), Payload::NONE);
            check(r(1152, o), tx(100, 8972, 100), idle(), Payload::NONE);
            assert!((mbps(1001, o) - 1100.0).abs() < 1e-6);
            assert!((mbps(1062, o) - 7200.0).abs() < 1e-6);
            assert!((mbps(1063, o) - 7920.0).abs() < 1e-6);
            assert!((mbps(1152, o) - 72000.0).abs() < 1e-6);
            for n in 1001..=1062u16 {
                assert!((mbps(n, o) - (1000.0 + 100.0 * (n - 1000) as f64)).abs() < 1e-6);
            }
        }
        check(
            r(1001, STD_NOJUMBO),
            tx(100, 1222, 11),
            idle(),
            Payload::NONE,
        );
        check(
            r(1090, STD_NOJUMBO),
            tx(100, 1222, 100),
            idle(),
            Payload::NONE,
        );
        check(
            r(1152, STD_NOJUMBO),
            tx(100, 1222, 100),
            idle(),
            Payload::NONE,
        );
        assert!((mbps(1001, STD_NOJUMBO) - 1100.0).abs() < 1e-6);
        assert!((mbps(1152, STD_NOJUMBO) - 10000.0).abs() < 1e-6);
        check(
            r(1001, TRAD_NOJUMBO),
            tx(100, 1472, 9),
            idle(),
            Payload::NONE,
        );
        check(
            r(1092, TRAD_NOJUMBO),
            tx(100, 1472, 100),
            idle(),
            Payload::NONE,
        );
        check(
            r(1152, TRAD_NOJUMBO),
            tx(100, 1472, 100),
            idle(),
            Payload::NONE,
        );
        assert!((mbps(1001, TRAD_NOJUMBO) - 1080.0).abs() < 1e-6);
        assert!((mbps(1152, TRAD_NOJUMBO) - 12000.0).abs() < 1e-6);
    }

    #[test]
    fn rate_never_falls_with_the_row() {
        for o in ALL {
            let rates: Vec<f64> = RowIndex::all().map(|r| ip_rate(r, o).bps()).collect();
            assert_eq!(rates.len(), RowIndex::COUNT);
            for w in rates.windows(2) {
                assert!(w[1] >= w[0], "{o:?}");
            }
            // Strictly rising through 1 Gb/s and, with jumbo, to the top.
            for w in rates[..=1001].windows(2) {
                assert!(w[1] > w[0], "{o:?}");
            }
            if o.jumbo {
                for w in rates.windows(2) {
                    assert!(w[1] > w[0], "{o:?}");
                }
            }
        }
    }

    #[test]
    fn ipv6_keeps_the_ip_rate_and_carries_less_payload() {
        for n in [0u16, 1, 10, 99, 555, 1000, 1001, 1152] {
            let r = sending_rate(row(n), STD);
            let v4 = r.udp_payload_rate(IpFamily::V4).bps();
            let v6 = r.udp_payload_rate(IpFamily::V6).bps();
            let d = r.datagrams_per_sec();
            // IP rate = payload rate + headers, for both families.
            assert!(
                (v4 + d * 28.0 * 8.0 - r.ip_rate().bps()).abs() < 1e-3,
                "row {n}"
            );
            assert!(
                (v6 + d * 48.0 * 8.0 - r.ip_rate().bps()).abs() < 1e-3,
                "row {n}"
            );
        }
        // Row 10: 1000 datagrams/s of 1222 (v4) or 1202 (v6) bytes.
        let r10 = sending_rate(row(10), STD);
        assert!((r10.udp_payload_rate(IpFamily::V4).mbps() - 9.776).abs() < 1e-9);
        assert!((r10.udp_payload_rate(IpFamily::V6).mbps() - 9.616).abs() < 1e-9);
    }

    #[test]
    fn the_row_for_a_ceiling() {
        for o in ALL {
            assert_eq!(row_at_or_below(BitRate::from_mbps(300.0), o), row(300));
            assert_eq!(row_at_or_below(BitRate::from_mbps(300.5), o), row(300));
            assert_eq!(row_at_or_below(BitRate::from_mbps(299.999), o), row(299));
            assert_eq!(row_at_or_below(BitRate::from_mbps(1.0), o), row(1));
            assert_eq!(row_at_or_below(BitRate::from_kbps(50.0), o), RowIndex::ZERO);
            assert_eq!(row_at_or_below(BitRate::ZERO, o), RowIndex::ZERO);
            assert_eq!(row_at_or_below(BitRate::from_gbps(1e6), o), RowIndex::MAX);
            assert_eq!(
                row_at_or_below(BitRate::from_bps(f64::NAN), o),
                RowIndex::MAX
            );
            for r in RowIndex::all() {
                let got = row_at_or_below(ip_rate(r, o), o);
                assert!(ip_rate(got, o).bps() <= ip_rate(r, o).bps());
                assert!(got >= r);
            }
        }
        assert_eq!(row_at_or_below(BitRate::from_gbps(5.0), STD), row(1040));
        // Repeated rates: the last row carrying 10 Gb/s.
        assert_eq!(
            row_at_or_below(BitRate::from_gbps(10.0), STD_NOJUMBO),
            RowIndex::MAX
        );
    }

    #[test]
    fn every_row_is_sendable() {
        for o in ALL {
            for r in RowIndex::all() {
                let s = sending_rate(r, o);
                for t in [s.tx1(), s.tx2()] {
                    assert!(t.burst <= MAX_BURST, "{o:?} {r:?}");
                    if let Payload::Fixed(p) = t.payload {
                        assert!(p.get() <= JUMBO_PAYLOAD);
                        assert!(p.get() == 0 || p.get() >= MIN_PAYLOAD_V4, "{o:?} {r:?}");
                    }
                    // An idle transmitter sends nothing; a busy one has a period.
                    assert_eq!(t.is_idle(), t.interval == DurationNs::ZERO);
                }
                if !o.jumbo {
                    let biggest = o.payload();
                    assert!(
                        matches!(s.tx1_payload, Payload::Fixed(p) if p.get() == 0 || p.get() == biggest)
                    );
                }
                assert!(s.datagrams_per_sec() > 0.0);
                assert_eq!(SendingRate::from_words(s.to_words()), s);
            }
        }
    }

    #[test]
    fn row_index_bounds() {
        assert_eq!(serde_json::to_string(&RowIndex::MAX).unwrap(), "1152");
        assert_eq!(serde_json::from_str::<RowIndex>("300").unwrap(), row(300));
        assert!(serde_json::from_str::<RowIndex>("1153").is_err());
        assert_eq!(RowIndex::new(1152), Some(RowIndex::MAX));
        assert_eq!(RowIndex::new(1153), None);
        assert_eq!(RowIndex::saturating(u32::MAX), RowIndex::MAX);
        assert_eq!(RowIndex::all().count(), RowIndex::COUNT);
        assert_eq!(
            Payload::from_word(0x8000_04c6),
            Payload::Random { max: Bytes(1222) }
        );
        assert_eq!(Payload::Random { max: Bytes(1222) }.to_word(), 0x8000_04c6);
    }
}
