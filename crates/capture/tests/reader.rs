//! The reader on files built here: exact operations from known timestamps, both formats,
//! and damaged files (clear errors, never a panic).

use std::borrow::Cow;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::time::Duration as StdDuration;

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
use pcap_file::pcapng::blocks::interface_description::{
    InterfaceDescriptionBlock, InterfaceDescriptionOption,
};
use pcap_file::pcapng::PcapNgWriter;
use pcap_file::{DataLink, TsResolution};
use proptest::prelude::*;
use thinwan_capture::{analyze, Error, Filter, Options};
use thinwan_proto::Duration;

const SRV: [u8; 4] = [198, 18, 1, 1];
const CLI: [u8; 4] = [198, 18, 2, 1];

/// An IPv4/TCP packet, `payload` bytes of payload (captured in full).
fn tcp(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, payload: usize) -> Vec<u8> {
    let total = 20 + 20 + payload;
    let mut p = vec![0u8; total];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    p[8] = 64;
    p[9] = 6;
    p[12..16].copy_from_slice(&src);
    p[16..20].copy_from_slice(&dst);
    p[20..22].copy_from_slice(&sport.to_be_bytes());
    p[22..24].copy_from_slice(&dport.to_be_bytes());
    p[32] = 5 << 4;
    p
}

/// (ms, server→client?, payload) → packets of a VNC-like connection on port 5900, each
/// direction's sequence numbers running on with its payload.
fn session(spec: &[(f64, bool, usize)]) -> Vec<(u64, Vec<u8>)> {
    let mut seq = [1u32, 1u32];
    spec.iter()
        .map(|&(ms, s2c, n)| {
            let t = 1_700_000_000_000_000_000 + (ms * 1e6).round() as u64;
            let mut p = if s2c { tcp(SRV, CLI, 5900, 40000, n) } else { tcp(CLI, SRV, 40000, 5900, n) };
            let s = &mut seq[usize::from(s2c)];
            p[24..28].copy_from_slice(&s.to_be_bytes());
            *s = s.wrapping_add(n as u32);
            (t, p)
        })
        .collect()
}

/// A server→client segment whose bytes the client already had (resent after a lost ACK,
/// 270 ms later) neither extends the update nor counts as its payload; one that brings
/// new bytes does.
#[test]
fn a_duplicate_segment_does_not_end_the_update() {
    let mut pkts = session(&[(0.0, false, 10), (25.0, true, 1000), (25.3, true, 400), (2000.0, false, 10)]);
    // The last segment of the update again, 270 ms later (same sequence number).
    let mut dup = pkts[2].clone();
    dup.0 += 270_000_000;
    pkts.insert(3, dup);
    let path = tmp("dup.pcap");
    write_pcap(&path, &pkts, TsResolution::NanoSecond);
    let a = analyze(&path, vnc(), opts(500)).unwrap();
    let op = &a.ops[0];
    assert_eq!(op.latency().unwrap().as_nanos(), 25_300_000, "the duplicate at 295.3 ms is not the end");
    assert_eq!((op.s2c.packets, op.s2c.payload), (3, 1400), "counted as a packet, not as payload");
    // Half of it new: it is update data.
    let mut pkts = session(&[(0.0, false, 10), (25.0, true, 1000), (25.3, true, 400), (2000.0, false, 10)]);
    let mut part = tcp(SRV, CLI, 5900, 40000, 400);
    part[24..28].copy_from_slice(&1201u32.to_be_bytes());
    pkts.insert(3, (pkts[2].0 + 270_000_000, part));
    write_pcap(&path, &pkts, TsResolution::NanoSecond);
    let a = analyze(&path, vnc(), opts(500)).unwrap();
    assert_eq!(a.ops[0].latency().unwrap().as_nanos(), 295_300_000);
    // A retransmission that fills a hole (its first copy was lost before the client, the
    // segment after it arrived): new bytes, the end of the update.
    let mut pkts = session(&[(0.0, false, 10), (25.0, true, 1000), (25.3, true, 400), (2000.0, false, 10)]);
    let lost = pkts.remove(1);
    pkts.insert(2, (lost.0 + 270_000_000, lost.1));
    write_pcap(&path, &pkts, TsResolution::NanoSecond);
    let a = analyze(&path, vnc(), opts(500)).unwrap();
    assert_eq!(a.ops[0].latency().unwrap().as_nanos(), 295_000_000);
    assert_eq!(a.ops[0].s2c.payload, 1400);
}

/// The measured case (docs/desktop.md, x11vnc `fill` on `wan-loss-1`): the update
/// request after the previous update was lost on the WAN (its first copy is in the
/// capture, which is before the WAN); its retransmission after the pause is no input —
/// the click that TCP held back until the request's ACK is, and the latency runs from it.
/// The retransmission is still counted (packets, IP bytes) with the burst it follows.
#[test]
fn a_resent_update_request_does_not_start_the_next_input() {
    let mut pkts = session(&[
        (0.0, false, 12),     // click
        (40.0, true, 1400),   // its update
        (40.5, false, 10),    // the next update request (lost on the WAN)
        (1126.8, false, 12),  // the next click
        (1216.1, true, 1400), // its update
    ]);
    let mut again = pkts[2].clone();
    again.0 += 1_019_700_000; // at 1060.2 ms
    pkts.insert(3, again);
    let path = tmp("resent-request.pcap");
    write_pcap(&path, &pkts, TsResolution::NanoSecond);
    let a = analyze(&path, vnc(), opts(500)).unwrap();
    assert_eq!(a.ops.len(), 2, "no operation of the retransmission's own");
    assert_eq!(a.ops[1].first_packet, 5, "the click opens the second operation");
    assert_eq!(a.ops[1].latency().unwrap().as_nanos(), 89_300_000, "wire → update of the click");
    assert_eq!((a.ops[0].c2s.packets, a.ops[0].c2s.bytes, a.ops[0].c2s.payload), (3, 3 * 40 + 32, 22));
    // Without the first copy (a capture of only the retransmission) it is new bytes and
    // does open a window: the rule rests on what the capture saw, not on timing.
    pkts.remove(2);
    write_pcap(&path, &pkts, TsResolution::NanoSecond);
    let a = analyze(&path, vnc(), opts(500)).unwrap();
    assert_eq!(a.ops[1].first_packet, 3);
    assert_eq!(a.ops[1].latency().unwrap().as_nanos(), 155_900_000);
}

/// Sequence numbers wrap every 4 GiB: an update after more than 4 GiB on the connection
/// is new data, not a duplicate of the first 4 GiB (segments captured 40 bytes short,
/// their IP length saying 64,040).
#[test]
fn more_than_4_gib_on_a_connection_is_not_a_duplicate() {
    const N: u32 = 70_000; // × 64,000 bytes = 4.48 GB
    let big = |seq: u32| {
        let mut p = tcp(SRV, CLI, 5900, 40000, 0);
        p[2..4].copy_from_slice(&64_040u16.to_be_bytes());
        p[24..28].copy_from_slice(&seq.to_be_bytes());
        p
    };
    let t0 = 1_700_000_000_000_000_000u64;
    let mut pkts = session(&[(0.0, false, 10)]);
    let seq0 = 7u32;
    for i in 0..N {
        pkts.push((t0 + 1_000_000 + u64::from(i) * 10_000, big(seq0.wrapping_add(i.wrapping_mul(64_000)))));
    }
    let mut input = tcp(CLI, SRV, 40000, 5900, 10);
    input[24..28].copy_from_slice(&11u32.to_be_bytes());
    pkts.push((t0 + 2_000_000_000, input));
    pkts.push((t0 + 2_025_000_000, big(seq0.wrapping_add(N.wrapping_mul(64_000)))));
    // And the first segment again (a resend after 4 GiB): still a duplicate.
    pkts.push((t0 + 2_026_000_000, big(seq0)));
    let path = tmp("wrap.pcap");
    write_pcap(&path, &pkts, TsResolution::NanoSecond);
    let a = analyze(&path, vnc(), opts(500)).unwrap();
    assert_eq!(a.ops.len(), 2);
    assert_eq!(a.ops[0].s2c.payload, u64::from(N) * 64_000);
    assert_eq!(a.ops[1].latency().unwrap().as_nanos(), 25_000_000, "after 4 GiB: new bytes, the update");
    assert_eq!((a.ops[1].s2c.packets, a.ops[1].s2c.payload), (2, 64_000));
}

/// A scratch file under Cargo's per-target temporary directory (not /tmp, where every
/// run left a directory behind); the names are per test, so a rerun overwrites its own.
fn tmp(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("reader");
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

fn write_pcap(path: &Path, pkts: &[(u64, Vec<u8>)], res: TsResolution) {
    let header = PcapHeader { datalink: DataLink::RAW, ts_resolution: res, ..Default::default() };
    let mut w = PcapWriter::with_header(std::fs::File::create(path).unwrap(), header).unwrap();
    for (t, p) in pkts {
        w.write_packet(&PcapPacket::new(StdDuration::from_nanos(*t), p.len() as u32, p)).unwrap();
    }
}

fn write_pcapng(path: &Path, pkts: &[(u64, Vec<u8>)]) {
    let mut w = PcapNgWriter::new(std::fs::File::create(path).unwrap()).unwrap();
    let idb = InterfaceDescriptionBlock {
        linktype: DataLink::RAW,
        snaplen: 0,
        options: vec![InterfaceDescriptionOption::IfTsResol(9)],
    };
    w.write_pcapng_block(idb).unwrap();
    for (t, p) in pkts {
        let epb = EnhancedPacketBlock {
            interface_id: 0,
            timestamp: StdDuration::from_nanos(*t), // raw ticks: ns with if_tsresol = 9
            original_len: p.len() as u32,
            data: Cow::Borrowed(p),
            options: vec![],
        };
        w.write_pcapng_block(epb).unwrap();
    }
}

fn vnc() -> Filter {
    Filter { port: 5900, addr: Some(IpAddr::V4(Ipv4Addr::from(SRV))), port_at_client: false }
}

fn opts(ms: u64) -> Options {
    Options { idle_gap: Duration::from_millis(ms), keep_packets: true, require_gap: true }
}

/// Two operations: 25.1 ms and 160 ms.
fn two_ops() -> Vec<(u64, Vec<u8>)> {
    session(&[
        (1000.0, false, 20),
        (1025.0, true, 1400),
        (1025.1, true, 300),
        (1026.0, false, 0),
        (2000.0, false, 10),
        (2050.0, true, 100),
        (2099.0, false, 10),
        (2160.0, true, 100),
    ])
}

#[test]
fn pcap_exact_latencies_in_both_timestamp_resolutions() {
    for (name, res) in [("us.pcap", TsResolution::MicroSecond), ("ns.pcap", TsResolution::NanoSecond)] {
        let path = tmp(name);
        write_pcap(&path, &two_ops(), res);
        let a = analyze(&path, vnc(), opts(200)).unwrap();
        let lat: Vec<u64> = a.ops.iter().map(|o| o.latency().unwrap().as_nanos()).collect();
        assert_eq!(lat, vec![25_100_000, 160_000_000], "{name}");
        assert_eq!(a.ops[0].s2c.bytes, 40 * 2 + 1700);
        assert_eq!(a.ops[0].c2s.packets, 2, "the pure ACK counts with its operation");
        assert_eq!(a.ops[1].round_trips, 2);
        assert_eq!(a.packets_matched, 8);
        assert_eq!(a.packets.unwrap().op, vec![0, 0, 0, 0, 1, 1, 1, 1]);
    }
}

#[test]
fn pcapng_exact_latencies() {
    let path = tmp("two.pcapng");
    write_pcapng(&path, &two_ops());
    let a = analyze(&path, vnc(), opts(200)).unwrap();
    let lat: Vec<u64> = a.ops.iter().map(|o| o.latency().unwrap().as_nanos()).collect();
    assert_eq!(lat, vec![25_100_000, 160_000_000]);
    assert_eq!(a.format, thinwan_capture::Format::PcapNg);
}

#[test]
fn x11_direction_comes_from_the_listening_side() {
    // The X server listens on the user's side (198.18.2.1:6020): packets to it are updates.
    let mut pkts: Vec<(u64, Vec<u8>)> = vec![
        (1_000_000_000, tcp(CLI, SRV, 6020, 50000, 32)), // an input event from the X server
        (1_030_000_000, tcp(SRV, CLI, 50000, 6020, 64)), // drawing requests
        (3_000_000_000, tcp(CLI, SRV, 6020, 50000, 32)),
        (3_001_000_000, tcp(SRV, CLI, 50000, 6020, 64)),
    ];
    // Sequence numbers running on (the second input and drawing are new data, not
    // resends).
    pkts[2].1[24..28].copy_from_slice(&33u32.to_be_bytes());
    pkts[3].1[24..28].copy_from_slice(&65u32.to_be_bytes());
    let path = tmp("x11.pcap");
    write_pcap(&path, &pkts, TsResolution::NanoSecond);
    let f = Filter { port: 6020, addr: Some(IpAddr::V4(Ipv4Addr::from(CLI))), port_at_client: true };
    let a = analyze(&path, f, opts(500)).unwrap();
    let lat: Vec<u64> = a.ops.iter().map(|o| o.latency().unwrap().as_nanos()).collect();
    assert_eq!(lat, vec![30_000_000, 1_000_000]);
    assert!(a.ops.iter().all(|o| o.client_started));
}

#[test]
fn errors_name_the_file_and_the_packet() {
    let path = tmp("cut.pcap");
    write_pcap(&path, &two_ops(), TsResolution::MicroSecond);
    let len = std::fs::metadata(&path).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(len - 30).unwrap(); // into the last packet
    let e = analyze(&path, vnc(), opts(200)).unwrap_err();
    assert!(matches!(e, Error::Truncated { packet: 8, .. }), "{e}");
    assert!(e.to_string().contains("cut.pcap") && e.to_string().contains("packet 8"), "{e}");

    let path = tmp("cut.pcapng");
    write_pcapng(&path, &two_ops());
    let len = std::fs::metadata(&path).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(len - 10).unwrap();
    let e = analyze(&path, vnc(), opts(200)).unwrap_err();
    assert!(matches!(e, Error::Truncated { packet: 8, .. }), "{e}");

    let path = tmp("text.pcap");
    std::fs::File::create(&path).unwrap().write_all(b"hello world").unwrap();
    let e = analyze(&path, vnc(), opts(200)).unwrap_err().to_string();
    assert!(e.contains("text.pcap: not a pcap or pcapng file"), "{e}");

    let path = tmp("two.pcap");
    write_pcap(&path, &two_ops(), TsResolution::MicroSecond);
    let e = analyze(&path, Filter { port: 3389, ..vnc() }, opts(200)).unwrap_err().to_string();
    assert!(e.contains("no packet of TCP 198.18.1.1 port 3389 among its 8 packets"), "{e}");
    assert!(e.contains("busiest TCP ports: 5900 (8 packets)"), "{e}");

    // A 2 s idle gap: the two operations are one burst.
    let e = analyze(&path, vnc(), opts(2000)).unwrap_err().to_string();
    assert!(e.contains("no idle gap of 2000 ms or more: packets 1–8 form one burst of 1160.0 ms"), "{e}");

    let e = analyze(&tmp("absent.pcap"), vnc(), opts(200)).unwrap_err().to_string();
    assert!(e.contains("absent.pcap: No such file"), "{e}");
}

#[test]
fn ethernet_and_cooked_frames() {
    let ip = tcp(SRV, CLI, 5900, 40000, 10);
    let mut eth = vec![0u8; 12];
    eth.extend([0x81, 0x00, 0, 1, 0x08, 0x00]); // one VLAN tag
    eth.extend(&ip);
    assert!(matches!(
        thinwan_capture::ip::parse(DataLink::ETHERNET, &eth),
        thinwan_capture::ip::Frame::Tcp(_)
    ));
    let mut sll2 = vec![0x08, 0x00];
    sll2.extend([0u8; 18]);
    sll2.extend(&ip);
    match thinwan_capture::ip::parse(DataLink::LINUX_SLL2, &sll2) {
        thinwan_capture::ip::Frame::Tcp(t) => assert_eq!((t.sport, t.payload, t.ip_len), (5900, 10, 50)),
        other => panic!("{other:?}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Arbitrary bytes, and a valid capture with bytes overwritten or cut: an error or an
    /// analysis, never a panic.
    #[test]
    fn damaged_files_never_panic(
        junk in proptest::collection::vec(any::<u8>(), 0..400),
        edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..12),
        cut in any::<usize>(),
        ng in any::<bool>(),
    ) {
        let path = tmp(&format!("fuzz-{}.cap", std::thread::current().name().unwrap_or("t").replace("::", "-")));
        std::fs::write(&path, &junk).unwrap();
        let _ = analyze(&path, vnc(), opts(100));
        if ng { write_pcapng(&path, &two_ops()) } else { write_pcap(&path, &two_ops(), TsResolution::MicroSecond) }
        let mut bytes = std::fs::read(&path).unwrap();
        for (at, b) in &edits {
            let n = bytes.len();
            bytes[at % n] = *b;
        }
        bytes.truncate(cut % (bytes.len() + 1));
        std::fs::write(&path, &bytes).unwrap();
        let _ = analyze(&path, vnc(), opts(100));
    }
}
