//! `thinwan analyze`'s driver on captures built here (pcap and pcapng): connections, the
//! server side, the gap rule, retransmissions, reordering, passive RTTs; and the errors
//! on bad captures (file and packet named, never a panic).

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::time::Duration as StdDuration;

use etherparse::PacketBuilder;
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
use pcap_file::pcapng::blocks::interface_description::{
    InterfaceDescriptionBlock, InterfaceDescriptionOption,
};
use pcap_file::pcapng::PcapNgWriter;
use pcap_file::{DataLink, TsResolution};
use thinwan_capture::filter::Expr;
use thinwan_capture::flows::{analyze, Analysis, AnalyzeError, EndReason, Options, ServerBy};
use thinwan_proto::gaprule::FlowKind;
use thinwan_proto::Duration;

const SRV: [u8; 4] = [10, 0, 0, 1];
const CLI: [u8; 4] = [10, 0, 0, 2];
const T0: u64 = 1_700_000_000_000_000_000;

#[derive(Clone, Copy, Default)]
struct F {
    syn: bool,
    ack: Option<u32>,
    fin: bool,
}

/// One IPv4/TCP packet (no link header) between CLI:40000 and SRV:3389.
fn pkt(from_server: bool, seq: u32, f: F, payload: usize) -> Vec<u8> {
    let (s, d, sp, dp) = if from_server { (SRV, CLI, 3389, 40000) } else { (CLI, SRV, 40000, 3389) };
    let mut b = PacketBuilder::ipv4(s, d, 64).tcp(sp, dp, seq, 65_535);
    if f.syn {
        b = b.syn();
    }
    if let Some(a) = f.ack {
        b = b.ack(a);
    }
    if f.fin {
        b = b.fin();
    }
    let mut out = Vec::new();
    b.write(&mut out, &vec![0; payload]).unwrap();
    out
}

fn ack(a: u32) -> F {
    F { ack: Some(a), ..F::default() }
}

/// The test connection, as (ms, packet):
/// handshake 0 / 10 / 30 ms (server half 10 ms, client half 20 ms); a request at 50;
/// responses: I at 100 (ACKed at 120), its retransmission at 150, a block at 200, 201,
/// 202 ms whose 2nd and 3rd segments swap (one out of order), ACKed at 222; a request at
/// 250; I at 300 (ACKed at 320); FIN both ways at 400 / 410, last ACK 430.
fn conversation() -> Vec<(f64, Vec<u8>)> {
    let (c, s) = (100u32, 1000u32); // ISNs
    vec![
        (0.0, pkt(false, c, F { syn: true, ..F::default() }, 0)),
        (10.0, pkt(true, s, F { syn: true, ack: Some(c + 1), fin: false }, 0)),
        (30.0, pkt(false, c + 1, ack(s + 1), 0)),
        (50.0, pkt(false, c + 1, ack(s + 1), 20)),
        (60.0, pkt(true, s + 1, ack(c + 21), 0)),
        (100.0, pkt(true, s + 1, ack(c + 21), 100)),
        (120.0, pkt(false, c + 21, ack(s + 101), 0)),
        (150.0, pkt(true, s + 1, ack(c + 21), 100)),
        (200.0, pkt(true, s + 101, ack(c + 21), 1000)),
        (201.0, pkt(true, s + 2101, ack(c + 21), 1000)),
        (202.0, pkt(true, s + 1101, ack(c + 21), 1000)),
        (222.0, pkt(false, c + 21, ack(s + 3101), 0)),
        (250.0, pkt(false, c + 21, ack(s + 3101), 30)),
        (260.0, pkt(true, s + 3101, ack(c + 51), 0)),
        (300.0, pkt(true, s + 3101, ack(c + 51), 50)),
        (320.0, pkt(false, c + 51, ack(s + 3151), 0)),
        (400.0, pkt(true, s + 3151, F { fin: true, ack: Some(c + 51), syn: false }, 0)),
        (410.0, pkt(false, c + 51, F { fin: true, ack: Some(s + 3152), syn: false }, 0)),
        (430.0, pkt(true, s + 3152, ack(c + 52), 0)),
    ]
}

/// A scratch file under Cargo's per-target temporary directory (not /tmp, where every
/// run left a directory behind); the names are per test, so a rerun overwrites its own.
fn tmp(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("analyze");
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

fn ethernet(ip: &[u8]) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00];
    f.extend_from_slice(ip);
    f
}

fn write_pcap(path: &Path, pkts: &[(f64, Vec<u8>)]) {
    let header = PcapHeader {
        datalink: DataLink::ETHERNET,
        ts_resolution: TsResolution::MicroSecond,
        ..Default::default()
    };
    let mut w = PcapWriter::with_header(std::fs::File::create(path).unwrap(), header).unwrap();
    for (ms, p) in pkts {
        let f = ethernet(p);
        let t = StdDuration::from_nanos(T0 + (ms * 1e6).round() as u64);
        w.write_packet(&PcapPacket::new(t, f.len() as u32, &f)).unwrap();
    }
}

fn write_pcapng(path: &Path, pkts: &[(f64, Vec<u8>)]) {
    let mut w = PcapNgWriter::new(std::fs::File::create(path).unwrap()).unwrap();
    let idb = InterfaceDescriptionBlock {
        linktype: DataLink::RAW,
        snaplen: 0,
        options: vec![InterfaceDescriptionOption::IfTsResol(9)],
    };
    w.write_pcapng_block(idb).unwrap();
    for (ms, p) in pkts {
        let epb = EnhancedPacketBlock {
            interface_id: 0,
            timestamp: StdDuration::from_nanos(T0 + (ms * 1e6).round() as u64),
            original_len: p.len() as u32,
            data: Cow::Borrowed(p),
            options: vec![],
        };
        w.write_pcapng_block(epb).unwrap();
    }
}

fn opts() -> Options {
    Options { labels: true, ..Options::new(Duration::from_micros(6_300)) }
}

fn run(path: &Path, o: &Options) -> Analysis {
    analyze(path, o, |_| {}).unwrap_or_else(|e| panic!("{e}"))
}

fn check_conversation(a: &Analysis) {
    assert_eq!((a.packets_total, a.packets_tcp, a.packets_matched), (19, 19, 19));
    assert_eq!(a.conns.len(), 1);
    let c = &a.conns[0];
    assert_eq!((c.server.port(), c.client.port(), c.end), (3389, 40000, EndReason::Fin));
    // Flows I, B(3), I: the retransmission at 150 ms is not a flow of its own.
    assert_eq!((c.flows_interactive, c.flows_bulk), (2, 1));
    assert_eq!(c.transitions, [0, 1, 1, 0]);
    assert_eq!((c.retrans_s2c, c.ooo_s2c, c.retrans_c2s, c.ooo_c2s), (1, 1, 0, 0));
    assert_eq!((c.packets_s2c, c.packets_c2s), (11, 8));
    assert_eq!((c.bytes_s2c, c.bytes_c2s), (3250, 50));
    // Server half: SYN → SYN-ACK 10 ms, request 50 → ACK 60, request 250 → ACK 260.
    assert_eq!(c.rtt_server.median_ms, Some(10.0));
    // Client half: SYN-ACK → ACK 20 ms, data 100 → 120, block 200 → 222 ... all ~20 ms.
    let m = c.rtt_client.median_ms.unwrap();
    assert!((19.9..=22.1).contains(&m), "{:?}", c.rtt_client);
    let p = &a.pooled;
    assert_eq!(p.transitions, [0, 1, 1, 0]);
    assert_eq!((p.alpha(), p.beta()), (Some(1.0), Some(1.0)));
    // IB: 100 → 200 ms; BI: 200 → 300 ms.
    assert_eq!((p.gaps[1].sum_ns, p.gaps[2].sum_ns), (100_000_000, 100_000_000));
    assert_eq!((p.interactive_sizes.sum, p.bulk_sizes.sum, p.block_lengths.mean()), (150, 3000, Some(3.0)));
    assert_eq!((p.request.n, p.request.sum_ns), (1, 200_000_000));
    // Labels: packets 6 (I), 9, 10, 11 (B), 15 (I); 8 is the retransmission.
    let labels = a.labels.as_ref().unwrap();
    use FlowKind::{Bulk as B, Interactive as I};
    assert_eq!(labels, &[(6, I), (9, B), (10, B), (11, B), (15, I)]);
    assert_eq!(p.sessions.len(), 1);
    assert_eq!(p.sessions[0].flows, 3);
}

#[test]
fn a_pcap_over_ethernet_with_the_port_given() {
    let path = tmp("conv.pcap");
    write_pcap(&path, &conversation());
    let a = run(&path, &Options { server_port: Some(3389), ..opts() });
    check_conversation(&a);
    assert_eq!(a.conns[0].server_by, ServerBy::Port);
}

#[test]
fn a_pcapng_of_raw_ip_finds_the_server_from_the_handshake() {
    let path = tmp("conv.pcapng");
    write_pcapng(&path, &conversation());
    let a = run(&path, &opts());
    check_conversation(&a);
    assert_eq!(a.conns[0].server_by, ServerBy::Syn);
}

#[test]
fn without_the_handshake_the_lower_port_is_the_server() {
    let path = tmp("nohs.pcap");
    write_pcap(&path, &conversation()[3..]);
    let a = run(&path, &opts());
    assert_eq!((a.conns[0].server_by, a.conns[0].server.port()), (ServerBy::LowerPort, 3389));
    assert_eq!((a.conns[0].flows_interactive, a.conns[0].flows_bulk), (2, 1));
}

#[test]
fn a_filter_selects_connections() {
    // The conversation plus a second connection on port 443 (from another client port).
    let mut pkts = conversation();
    let other = |ms: f64, from_server: bool| {
        let (s, d, sp, dp) = if from_server { (SRV, CLI, 443, 40001) } else { (CLI, SRV, 40001, 443) };
        let mut out = Vec::new();
        PacketBuilder::ipv4(s, d, 64).tcp(sp, dp, 5, 100).ack(1).write(&mut out, &[0; 10]).unwrap();
        (ms, out)
    };
    pkts.extend([other(500.0, true), other(501.0, false)]);
    let path = tmp("two.pcap");
    write_pcap(&path, &pkts);
    assert_eq!(run(&path, &opts()).conns.len(), 2);
    let f = Some(Expr::parse("port 443").unwrap());
    let a = run(&path, &Options { filter: f, ..opts() });
    assert_eq!((a.conns.len(), a.packets_matched, a.conns[0].server.port()), (1, 2, 443));
    let f = Some(Expr::parse("not port 443 and src host 10.0.0.1").unwrap());
    let a = run(&path, &Options { filter: f, ..opts() });
    assert_eq!((a.conns.len(), a.packets_matched), (1, 11));
    let a = run(&path, &Options { server_port: Some(3389), ..opts() });
    assert_eq!(a.packets_matched, 19);
}

#[test]
fn an_idle_connection_ends_and_a_later_packet_starts_another() {
    let mut pkts = conversation()[3..16].to_vec();
    let late = pkt(true, 5000, ack(1), 10);
    pkts.push((700.0, late));
    let path = tmp("idle.pcap");
    write_pcap(&path, &pkts);
    let o = Options { idle_timeout: Duration::from_millis(200), ..opts() };
    let a = run(&path, &o);
    assert_eq!(a.conns.len(), 2);
    assert_eq!((a.conns[0].end, a.conns[1].end), (EndReason::Idle, EndReason::Eof));
    assert_eq!((a.conns[0].id, a.conns[1].id), (0, 1));
    assert_eq!(a.live_max, 1, "the idle one was gone before the late packet came");
    assert_eq!(a.pooled.sessions.len(), 2);
}

#[test]
fn max_packets_stops_early() {
    let path = tmp("max.pcap");
    write_pcap(&path, &conversation());
    let a = run(&path, &Options { max_packets: Some(7), ..opts() });
    assert_eq!((a.packets_total, a.packets_matched), (7, 7));
}

#[test]
fn deterministic() {
    let path = tmp("det.pcap");
    write_pcap(&path, &conversation());
    let (a, b) = (run(&path, &opts()), run(&path, &opts()));
    assert_eq!(a.conns, b.conns);
    assert_eq!(a.pooled, b.pooled);
}

fn err(path: &Path, o: &Options) -> String {
    match analyze(path, o, |_| {}) {
        Ok(_) => panic!("{} analysed", path.display()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn bad_captures_name_the_file_and_the_packet() {
    let path = tmp("conv-ok.pcap");
    write_pcap(&path, &conversation());
    let bytes = std::fs::read(&path).unwrap();

    let cut = tmp("truncated.pcap");
    std::fs::write(&cut, &bytes[..bytes.len() - 10]).unwrap();
    let e = err(&cut, &opts());
    assert!(e.contains("truncated.pcap") && e.contains("packet 19"), "{e}");

    let random = tmp("random.pcap");
    std::fs::write(
        &random,
        (0..4000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect::<Vec<_>>(),
    )
    .unwrap();
    let e = err(&random, &opts());
    assert!(e.contains("random.pcap") && e.contains("not a pcap or pcapng file"), "{e}");

    let empty = tmp("empty.pcap");
    std::fs::write(&empty, b"").unwrap();
    let e = err(&empty, &opts());
    assert!(e.contains("empty.pcap") && e.contains("empty"), "{e}");

    let header_only = tmp("header-only.pcap");
    write_pcap(&header_only, &[]);
    let e = err(&header_only, &opts());
    assert!(e.contains("header-only.pcap") && e.contains("no packet"), "{e}");

    let udp = tmp("udp.pcap");
    let mut u = Vec::new();
    PacketBuilder::ipv4(SRV, CLI, 64).udp(53, 53).write(&mut u, &[1, 2, 3]).unwrap();
    write_pcap(&udp, &[(0.0, u.clone()), (1.0, u)]);
    let e = err(&udp, &opts());
    assert!(e.contains("udp.pcap") && e.contains("none of its 2 packets is TCP"), "{e}");

    let e = err(&path, &Options { server_port: Some(5900), ..opts() });
    assert!(
        e.contains("conv-ok.pcap") && e.contains("TCP port 5900") && e.contains("3389 (19 packets)"),
        "{e}"
    );
    let e = err(&path, &Options { filter: Some(Expr::parse("host 1.2.3.4").unwrap()), ..opts() });
    assert!(e.contains("filter 'host 1.2.3.4'"), "{e}");

    let missing = tmp("missing.pcap");
    let e = err(&missing, &opts());
    assert!(e.contains("missing.pcap"), "{e}");
    assert!(matches!(analyze(&missing, &opts(), |_| {}), Err(AnalyzeError::Read(_))));
}
