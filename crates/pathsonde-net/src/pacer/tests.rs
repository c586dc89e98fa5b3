//! The pacer over loopback: GSO cars arrive as one datagram per probe,
//! numbered right, with kernel send stamps mapped per send; batches (and
//! schedules GSO does not suit) keep per-packet stamps; a refused GSO send
//! falls back without misaligning stamps.

use super::*;
use crate::udp;
use pathsonde_core::{Bytes, CarSlot};
use std::os::fd::AsRawFd;

const PAYLOAD: usize = 1172;

/// A receiving socket (4 MiB buffer, never GRO) and a pacer sending to it.
fn pair(mode: PacerMode) -> (Pacer, UdpSocket) {
    let rx = udp::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    rx.set_read_timeout(Some(std::time::Duration::from_secs(2)))
        .unwrap();
    let tx = udp::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    tx.connect(rx.local_addr().unwrap()).unwrap();
    (Pacer::with_mode(tx, 7, mode), rx)
}

/// `cars` cars of `per_car` packets, 50 µs apart.
fn train_of(cars: u32, per_car: u32) -> ScheduleSpec {
    ScheduleSpec {
        packet_size: Bytes(PAYLOAD as u64 + 28),
        cars: (0..cars)
            .map(|k| CarSlot {
                offset: DurationNs::from_us(50 * i64::from(k)),
                packets: per_car,
            })
            .collect(),
        idle_before: DurationNs::ZERO,
    }
}

/// Cars of 8 packets, then a car of 130, then one of 1: uneven cars, which
/// keep a datagram per send.
fn uneven() -> ScheduleSpec {
    let mut s = train_of(20, 8);
    s.cars.push(CarSlot {
        offset: DurationNs::from_us(1100),
        packets: 130,
    });
    s.cars.push(CarSlot {
        offset: DurationNs::from_us(1400),
        packets: 1,
    });
    s
}

/// Reads `n` datagrams and checks each is one probe of `PAYLOAD` bytes,
/// numbered 0.. in order, in the car the schedule puts it in.
fn receive_all(rx: &UdpSocket, train: u32, spec: &ScheduleSpec) {
    let mut want_car = Vec::new();
    for (car, slot) in spec.cars.iter().enumerate() {
        want_car.extend(std::iter::repeat(car as u32).take(slot.packets as usize));
    }
    let mut buf = vec![0u8; 65_536];
    for (seq, &car) in want_car.iter().enumerate() {
        let len = rx.recv(&mut buf).expect("every probe arrives");
        assert_eq!(len, PAYLOAD, "datagram {seq} is not one probe (merged?)");
        let h = ProbeHeader::decode(&buf[..len]).unwrap();
        assert_eq!(h.kind, ProbeKind::Probe);
        assert_eq!((h.session, h.train), (7, train));
        assert_eq!((h.seq, h.car), (seq as u32, car), "datagram {seq}");
    }
    rx.set_nonblocking(true).unwrap();
    assert!(rx.recv(&mut buf).is_err(), "more datagrams than probes");
    rx.set_nonblocking(false).unwrap();
}

/// The stamps of each car's packets, in order.
fn per_car(sent: &SentTrain) -> Vec<Vec<i64>> {
    let stamps = sent
        .kernel_sent
        .as_ref()
        .expect("kernel stamps on loopback");
    assert_eq!(stamps.len() as u32, sent.packets_sent());
    let ns: Vec<i64> = stamps.iter().map(|t| t.ns()).collect();
    assert!(ns.windows(2).all(|w| w[1] >= w[0]), "stamps go backwards");
    let mut out = Vec::new();
    let mut at = 0;
    for &n in &sent.car_packets {
        out.push(ns[at..at + n as usize].to_vec());
        at += n as usize;
    }
    out
}

#[test]
fn a_gso_train_arrives_as_one_datagram_per_probe_with_stamps_per_send() {
    let (mut pacer, rx) = pair(PacerMode::Gso);
    assert_eq!(pacer.mode(), PacerMode::Gso, "{:?}", pacer.gso_off());
    let spec = train_of(20, 8);
    assert!(gso_suits(&spec));
    for train in 0..2 {
        let sent = pacer.send_schedule(train, &spec, PAYLOAD).unwrap();
        assert_eq!(sent.mode, PacerMode::Gso);
        assert_eq!(u64::from(sent.packets_sent()), spec.total_packets());
        receive_all(&rx, train, &spec);
        let cars = per_car(&sent);
        // A car of 8 is one GSO send: one stamp for all its packets, and
        // cars are stamped apart.
        for (k, c) in cars.iter().enumerate() {
            assert!(c.iter().all(|&t| t == c[0]), "car {k}: {c:?}");
        }
        assert!(cars.windows(2).all(|w| w[1][0] > w[0][0]));
    }
    // Cars of 130 are three sends each (55 + 55 + 20), each one stamp.
    assert_eq!(gso::segments_per_send(PAYLOAD), 55);
    let spec = train_of(3, 130);
    let sent = pacer.send_schedule(2, &spec, PAYLOAD).unwrap();
    receive_all(&rx, 2, &spec);
    for big in per_car(&sent) {
        assert!(big[..55].iter().all(|&t| t == big[0]));
        assert!(big[55..110].iter().all(|&t| t == big[55]));
        assert!(big[110..].iter().all(|&t| t == big[110]));
        assert!(big[0] < big[55] && big[55] < big[110]);
    }
}

#[test]
fn uneven_slow_and_single_car_trains_keep_a_datagram_per_send() {
    let (mut pacer, rx) = pair(PacerMode::Gso);
    let mut slow = train_of(5, 8);
    slow.cars[4].offset = DurationNs::from_ms(2);
    // Cars of two leave as datagrams: a tbf's two-frame bucket would pass a
    // GSO pair unspaced and fake a coalescing receiver (GSO_MIN_CAR).
    for (train, spec) in [uneven(), train_of(1, 40), slow, train_of(20, 2)]
        .iter()
        .enumerate()
    {
        assert!(!gso_suits(spec));
        let sent = pacer.send_schedule(train as u32, spec, PAYLOAD).unwrap();
        assert_eq!(sent.mode, PacerMode::Batch);
        receive_all(&rx, train as u32, spec);
        let cars = per_car(&sent);
        assert!(cars.iter().any(|c| c.windows(2).any(|w| w[1] > w[0])));
    }
    assert_eq!(pacer.mode(), PacerMode::Gso, "still GSO for trains");
}

#[test]
fn a_batch_train_keeps_a_stamp_per_packet() {
    let (mut pacer, rx) = pair(PacerMode::Batch);
    assert_eq!(pacer.mode(), PacerMode::Batch);
    let spec = uneven();
    let sent = pacer.send_schedule(0, &spec, PAYLOAD).unwrap();
    assert_eq!(sent.mode, PacerMode::Batch);
    receive_all(&rx, 0, &spec);
    let cars = per_car(&sent);
    assert!(
        cars.iter().any(|c| c.windows(2).any(|w| w[1] > w[0])),
        "every packet of a car carries the same stamp"
    );
}

#[test]
fn a_refused_gso_send_falls_back_to_batches_and_stamps_stay_aligned() {
    let (mut pacer, rx) = pair(PacerMode::Gso);
    // Without UDP checksums the kernel refuses GSO sends (EINVAL) after
    // taking a stamp counter: the pacer must not map stamps off by one.
    let one: libc::c_int = 1;
    // SAFETY: `one` outlives the call and its length is passed exactly.
    let rc = unsafe {
        libc::setsockopt(
            pacer.socket().as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_NO_CHECK,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0);
    let spec = train_of(20, 8);
    let sent = pacer.send_schedule(0, &spec, PAYLOAD).unwrap();
    assert_eq!(pacer.mode(), PacerMode::Batch);
    assert!(pacer.gso_off().unwrap().contains("GSO send"));
    assert_eq!(sent.mode, PacerMode::Batch);
    assert_eq!(u64::from(sent.packets_sent()), spec.total_packets());
    receive_all(&rx, 0, &spec);
    // The next train has per-packet kernel stamps again, one for each.
    let sent = pacer.send_schedule(1, &spec, PAYLOAD).unwrap();
    receive_all(&rx, 1, &spec);
    let cars = per_car(&sent);
    assert!(cars.iter().any(|c| c.windows(2).any(|w| w[1] > w[0])));
}
