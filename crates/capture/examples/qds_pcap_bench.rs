//! The QDS flow monitor fed from a pcap (issue 18 "Speed": the monitor alone processes
//! ≥ 1 M packets/s from a pcap).
//!
//! `cargo run --release -p thinwan-capture --example qds_pcap_bench [FILE.pcap PORT]`
//! `cargo run --release -p thinwan-capture --example qds_pcap_bench --make FILE.pcap`
//!
//! `--make` only writes the synthetic capture below to FILE (for a reference reader such
//! as `tcpdump -r` in the same benchmark: bench/bench_qds.py).
//!
//! Without arguments it first writes a synthetic capture to the temp directory: 1,000
//! concurrent downloads from port 3389 (a full segment per flow per ms, the client's ACK
//! of the segment 20 ms older, RFC 7323 timestamps on both), 2 M packets, headers only
//! (snap length 66, as `tcpdump -s 66` would keep). Then it times read → parse →
//! `qds_segment` → `FlowMonitor::observe`, best of three, with the file in the page
//! cache, and prints packets per second; the synthetic file is removed afterwards.

use std::path::PathBuf;
use std::time::{Duration as StdDuration, Instant as Wall};

use etherparse::{PacketBuilder, TcpOptionElement};
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::DataLink;
use thinwan_capture::ip::{self, Frame};
use thinwan_capture::{for_each_packet, qds_segment, FlowKey, ServerSide};
use thinwan_proto::qds::monitor::{FlowMonitor, MonitorConfig};
use thinwan_proto::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (path, port, made) = match args.as_slice() {
        [make, file] if make == "--make" => {
            let tmp = synthetic(1_000, 2_000_000);
            std::fs::rename(&tmp, file)
                .or_else(|_| std::fs::copy(&tmp, file).and_then(|_| std::fs::remove_file(&tmp)))
                .unwrap_or_else(|e| {
                    eprintln!("{file}: {e}");
                    std::process::exit(1);
                });
            return;
        }
        [file, port] => (PathBuf::from(file), port.parse().expect("PORT: a TCP port number"), false),
        [] => (synthetic(1_000, 2_000_000), 3389, true),
        _ => {
            eprintln!("usage: qds_pcap_bench [FILE.pcap PORT | --make FILE.pcap]");
            std::process::exit(2);
        }
    };
    let server = ServerSide::Port(port);
    let mut best = f64::INFINITY;
    let (mut packets, mut flows, mut samples) = (0u64, 0usize, 0u64);
    for _ in 0..3 {
        let mut m: FlowMonitor<FlowKey> = FlowMonitor::new(MonitorConfig::default());
        let start = Wall::now();
        let (_, total) = for_each_packet(&path, |raw| {
            if let Frame::Tcp(p) = ip::parse(raw.linktype, raw.data) {
                if let Some((key, toward, seg)) = qds_segment(&p, server) {
                    m.observe(Instant::from_nanos(raw.t_ns), key, toward, &seg);
                }
            }
        })
        .unwrap_or_else(|e| {
            eprintln!("{e}");
            std::process::exit(1);
        });
        best = best.min(start.elapsed().as_secs_f64());
        (packets, flows, samples) = (total, m.len(), m.stats().samples_seq + m.stats().samples_ts);
    }
    println!(
        "{}: {packets} packets, {flows} flows, {samples} RTT samples: {:.2} M packets/s ({:.0} ns/packet) read + parse + monitor",
        path.display(),
        packets as f64 / best / 1e6,
        best * 1e9 / packets as f64
    );
    if made {
        // ~165 MB: do not leave it in the temp directory.
        let _ = std::fs::remove_file(&path);
    }
}

/// Write the synthetic capture; returns its path.
fn synthetic(flows: u64, packets: u64) -> PathBuf {
    const MSS: u32 = 1448;
    let path = std::env::temp_dir().join(format!("thinwan-qds-bench-{flows}.pcap"));
    let header = PcapHeader { datalink: DataLink::RAW, snaplen: 66, ..Default::default() };
    let mut w = PcapWriter::with_header(std::fs::File::create(&path).expect("temp file"), header)
        .expect("pcap header");
    let payload = vec![0u8; MSS as usize];
    let mut buf = Vec::with_capacity(1600);
    let mut write = |t_ns: u64, b: PacketBuilder_, len: usize| {
        buf.clear();
        b.write(&mut buf, &payload[..len]).expect("build");
        let orig = buf.len() as u32;
        buf.truncate(66);
        w.write_packet(&PcapPacket::new(StdDuration::from_nanos(t_ns), orig, &buf)).expect("write");
    };
    let (mut i, mut written) = (0u64, 0u64);
    while written < packets {
        let (f, k) = (i % flows, (i / flows) as u32);
        let t = 1_700_000_000_000_000_000 + i * 1_000_000 / flows;
        let client = [10, 0, (f >> 8) as u8, f as u8];
        let cport = 40_000 + f as u16;
        let isn = (f as u32).wrapping_mul(2_654_435_761);
        let data = PacketBuilder::ipv4([192, 168, 0, 1], client, 64)
            .tcp(3389, cport, isn.wrapping_add(k * MSS), 65_535)
            .ack(1)
            .options(&[
                TcpOptionElement::Noop,
                TcpOptionElement::Noop,
                TcpOptionElement::Timestamp(k, 1_000_000 + k.saturating_sub(7)),
            ])
            .expect("options");
        write(t, data, MSS as usize);
        written += 1;
        if k >= 20 {
            let ack = PacketBuilder::ipv4(client, [192, 168, 0, 1], 64)
                .tcp(cport, 3389, 1, 65_535)
                .ack(isn.wrapping_add((k - 19) * MSS))
                .options(&[
                    TcpOptionElement::Noop,
                    TcpOptionElement::Noop,
                    TcpOptionElement::Timestamp(1_000_000 + k, k - 20),
                ])
                .expect("options");
            write(t + 500, ack, 0);
            written += 1;
        }
        i += 1;
    }
    path
}

type PacketBuilder_ = etherparse::PacketBuilderStep<etherparse::TcpHeader>;
