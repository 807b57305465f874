//! A capture → the QDS classifier's inputs: one feature vector per (flow, control
//! period), exactly as a middlebox controller would classify them (docs/qds.md "Real
//! captures").
//!
//! The packets of one display server ([`Filter`]) go through the core's
//! [`FlowMonitor`] in capture order, as the daemon feeds it captured frames
//! ([`ip::TcpPacket::segment`], one key for both directions). Every `period` after the
//! first matched packet, the controller's tick runs — `expire(now)`, then `views(now)` —
//! and each open flow with an RTT estimate gives one row: what the simulator's, the
//! emulator's and the daemon's loops classify, less a flow's periods before its first
//! RTT sample (the loops now classify those too and plan them at RTT 0,
//! `controller::inputs`; a handshake times both halves within a round trip, so these
//! are a flow's first period or two, whose features cover a few packets). The rows
//! stay the timed ones that the shipped model and the measured accuracies (docs/qds.md
//! "Real captures") were computed from. No feature is computed anywhere else.
//!
//! Ticks are laid on the capture's own clock (first matched packet + k · period). A
//! packet stamped exactly at a tick is observed after it. After the last packet one
//! more tick runs, so the final partial period is classified too. While no flow is
//! tracked (everything expired) ticks skip ahead to the next packet, so a long silence
//! costs nothing.

use std::collections::BTreeMap;
use std::path::Path;

use thinwan_proto::capture::Dir;
use thinwan_proto::qds::classify::Features;
use thinwan_proto::qds::monitor::{FlowMonitor, MonitorConfig, Toward};
use thinwan_proto::{Duration, Instant};

use crate::ip::{self, FlowKey};
use crate::{for_each_packet, Error, Filter, Format};

/// How to replay a capture through the monitor.
#[derive(Clone, Copy, Debug)]
pub struct FeatureOptions {
    /// The display connection's listening end: packets from the server end cross the
    /// middlebox toward the client (with `port_at_client`, plain X11, the listener is the
    /// display, so packets *to* it are the ones toward the client).
    pub filter: Filter,
    /// The controller's period (`qds.period_ms`; spec: 100 ms).
    pub period: Duration,
    /// The monitor's windows and limits (`qds.rate_window_ms`, `qds.rtt_samples`…).
    pub monitor: MonitorConfig,
}

/// One flow in one control period: what the classifier is asked about.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FeatureRow {
    /// The tick, from the first matched packet.
    pub t: Duration,
    /// Index of the flow in [`CaptureFeatures::flows`].
    pub flow: u32,
    /// The monitor's RTT estimate (client half + server half).
    pub rtt: Duration,
    /// Rate toward the client, bit/s.
    pub rate_bps: f64,
    /// The classifier's input.
    pub features: Features,
}

impl FeatureRow {
    /// Nothing toward the client in the feature window ([`Features::is_idle`]): the
    /// classifier is asked, but has nothing to go on.
    pub fn idle(&self) -> bool {
        self.features.is_idle()
    }
}

/// The result of [`features`].
#[derive(Clone, Debug)]
pub struct CaptureFeatures {
    /// Rows in tick order, flows in key order within a tick.
    pub rows: Vec<FeatureRow>,
    /// Every flow of the display server, in order of its first packet.
    pub flows: Vec<FlowKey>,
    /// IP bytes each flow sent toward the client (same order): which flow carried the
    /// capture's activity, when a display server has side connections (plain X11's
    /// window manager, a second client).
    pub bytes_down: Vec<u64>,
    /// pcap or pcapng.
    pub format: Format,
    /// Packets in the file.
    pub packets_total: u64,
    /// Packets of the display server.
    pub packets_matched: u64,
    /// Control periods run.
    pub ticks: u64,
    /// The capture time of the first matched packet, from which [`FeatureRow::t`] counts.
    pub origin: Instant,
}

/// Replay the capture at `path` through the QDS monitor and collect the classifier's
/// inputs. Errors name the file: unreadable or damaged, an unsupported link type, or no
/// packet of the server (with the capture's busiest ports, to pick the right one).
pub fn features(path: &Path, opts: &FeatureOptions) -> Result<CaptureFeatures, Error> {
    assert!(opts.period > Duration::ZERO, "the caller checks the period");
    let mut monitor: FlowMonitor<FlowKey> = FlowMonitor::new(opts.monitor);
    let mut index: BTreeMap<FlowKey, u32> = BTreeMap::new();
    let mut flows = Vec::new();
    let mut bytes_down: Vec<u64> = Vec::new();
    let mut rows = Vec::new();
    let mut port_counts = vec![0u32; 65536];
    let mut bad_link: Option<(u64, String)> = None;
    let (mut matched, mut ticks) = (0u64, 0u64);
    let mut origin: Option<Instant> = None;
    let mut next_tick = Instant::ZERO;
    let (format, total) = for_each_packet(path, |raw| {
        let p = match ip::parse(raw.linktype, raw.data) {
            ip::Frame::Tcp(p) => p,
            ip::Frame::Other => return,
            ip::Frame::UnknownLink => {
                bad_link.get_or_insert_with(|| (raw.number, format!("{:?}", raw.linktype)));
                return;
            }
        };
        let Some(dir) = opts.filter.direction(&p) else {
            port_counts[usize::from(p.sport.min(p.dport))] += 1;
            return;
        };
        matched += 1;
        let now = Instant::from_nanos(raw.t_ns);
        match origin {
            None => {
                origin = Some(now);
                next_tick = now + opts.period;
            }
            Some(_) => {
                while next_tick <= now {
                    if monitor.is_empty() {
                        // Nothing to classify until this packet: skip the silent periods.
                        let skipped = (now - next_tick).as_nanos() / opts.period.as_nanos();
                        next_tick += Duration::from_nanos(skipped * opts.period.as_nanos());
                        if next_tick <= now {
                            next_tick += opts.period;
                        }
                        break;
                    }
                    tick(next_tick, now0(origin), &mut monitor, &index, &mut rows);
                    ticks += 1;
                    next_tick += opts.period;
                }
            }
        }
        let toward = match dir {
            Dir::ServerToClient => Toward::Client,
            Dir::ClientToServer => Toward::Server,
        };
        let key = p.flow_key(toward);
        let i = *index.entry(key).or_insert_with(|| {
            flows.push(key);
            bytes_down.push(0);
            (flows.len() - 1) as u32
        });
        if toward == Toward::Client {
            bytes_down[i as usize] += u64::from(p.ip_len);
        }
        monitor.observe(now, key, toward, &p.segment());
    })?;
    if matched == 0 {
        if let Some((packet, linktype)) = bad_link {
            return Err(Error::LinkType { path: path.to_path_buf(), packet, linktype });
        }
        let mut busiest: Vec<(u16, u64)> = port_counts
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(p, n)| (p as u16, u64::from(*n)))
            .collect();
        busiest.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        busiest.truncate(3);
        return Err(Error::NoPackets { path: path.to_path_buf(), filter: opts.filter, total, busiest });
    }
    // The last, partial period.
    tick(next_tick, now0(origin), &mut monitor, &index, &mut rows);
    ticks += 1;
    Ok(CaptureFeatures {
        rows,
        flows,
        bytes_down,
        format,
        packets_total: total,
        packets_matched: matched,
        ticks,
        origin: now0(origin),
    })
}

/// The capture's origin (set before the first tick).
fn now0(origin: Option<Instant>) -> Instant {
    origin.unwrap_or(Instant::ZERO)
}

/// One control period: expire, then a row per open flow with an RTT estimate.
fn tick(
    now: Instant,
    origin: Instant,
    monitor: &mut FlowMonitor<FlowKey>,
    index: &BTreeMap<FlowKey, u32>,
    rows: &mut Vec<FeatureRow>,
) {
    monitor.expire(now);
    for (key, v) in monitor.views(now) {
        // Timed flows only (module documentation).
        let Some(rtt) = v.rtt else { continue };
        rows.push(FeatureRow {
            t: now.saturating_since(origin),
            // Cannot panic: every key the monitor holds was indexed before it was observed.
            flow: index[&key],
            rtt,
            rate_bps: v.rate_bps,
            features: v.features,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::PacketBuilder;
    use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
    use pcap_file::DataLink;

    const SERVER: [u8; 4] = [198, 18, 1, 1];
    const CLIENT: [u8; 4] = [198, 18, 2, 1];

    /// One packet of a capture: (time µs, from the server?, server port, client port,
    /// seq, ack, payload).
    type Spec = (u64, bool, u16, u16, u32, u32, usize);

    fn capture(name: &str, packets: &[Spec]) -> std::path::PathBuf {
        let path =
            std::env::temp_dir().join(format!("thinwan-qds-features-{}-{name}.pcap", std::process::id()));
        let header = PcapHeader { datalink: DataLink::RAW, ..Default::default() };
        let mut w = PcapWriter::with_header(std::fs::File::create(&path).unwrap(), header).unwrap();
        let body = vec![0u8; 1448];
        for &(us, down, port, cport, seq, ack, len) in packets {
            let b = if down {
                PacketBuilder::ipv4(SERVER, CLIENT, 64).tcp(port, cport, seq, 65_535).ack(ack)
            } else {
                PacketBuilder::ipv4(CLIENT, SERVER, 64).tcp(cport, port, seq, 65_535).ack(ack)
            };
            let mut buf = Vec::new();
            b.write(&mut buf, &body[..len]).unwrap();
            w.write_packet(&PcapPacket::new(std::time::Duration::from_micros(us), buf.len() as u32, &buf))
                .unwrap();
        }
        path
    }

    /// A server on `port` sending `len`-byte segments every `gap_us` for `secs`, each
    /// acknowledged 20 ms later by the client, on client port `cport`, from `t0_us`.
    fn stream(port: u16, cport: u16, t0_us: u64, gap_us: u64, len: usize, secs: u64) -> Vec<Spec> {
        let mut out = Vec::new();
        let n = secs * 1_000_000 / gap_us;
        for k in 0..n {
            let t = t0_us + k * gap_us;
            let seq = 1000 + (k as u32) * len as u32;
            out.push((t, true, port, cport, seq, 1, len));
            out.push((t + 20_000, false, port, cport, 1, seq + len as u32, 0));
        }
        out.sort_by_key(|s| s.0);
        out
    }

    fn opts(port: u16) -> FeatureOptions {
        FeatureOptions {
            filter: Filter { port, addr: None, port_at_client: false },
            period: Duration::from_millis(100),
            monitor: MonitorConfig::default(),
        }
    }

    #[test]
    fn one_row_per_timed_flow_per_period() {
        // Two flows for 3 s: 1,448-byte segments every 2 ms (5.8 Mbit/s) and 200-byte
        // ones every 50 ms; plus a flow of another port, which is not the server's.
        let mut p = stream(5900, 40_001, 0, 2_000, 1448, 3);
        p.extend(stream(5900, 40_002, 0, 50_000, 200, 3));
        p.extend(stream(22, 40_003, 0, 10_000, 500, 3));
        p.sort_by_key(|s| s.0);
        let path = capture("rows", &p);
        let f = features(&path, &opts(5900)).unwrap();
        std::fs::remove_file(&path).ok();
        assert_eq!(f.flows.len(), 2, "the port-22 flow is not the server's");
        // 1,500 segments of 1,488 bytes and 60 of 240.
        assert_eq!(f.bytes_down, [1500 * 1488, 60 * 240]);
        // The last packet is the last ACK at 3.0 s − 2 ms + 20 ms: ticks at 0.1 … 3.0 s,
        // then the final one at 3.1 s. The first RTT sample closes at 20 ms, so both
        // flows are timed from the first tick: 31 rows each.
        assert_eq!(f.ticks, 31);
        assert_eq!(f.rows.len(), 62);
        assert_eq!(f.origin, Instant::ZERO, "the first packet's time");
        let fast: Vec<&FeatureRow> =
            f.rows.iter().filter(|r| f.flows[r.flow as usize].client.port() == 40_001).collect();
        let slow: Vec<&FeatureRow> =
            f.rows.iter().filter(|r| f.flows[r.flow as usize].client.port() == 40_002).collect();
        assert_eq!((fast.len(), slow.len()), (31, 31));
        // Mid-capture (2 s: windows full) the features are those of the streams.
        let at = |rows: &[&FeatureRow]| **rows.iter().find(|r| r.t == Duration::from_millis(2000)).unwrap();
        let (a, b) = (at(&fast), at(&slow));
        assert_eq!(a.features.size_mean, 1488.0, "1,448 bytes + 40 of headers");
        assert!((a.features.iat_mean_us - 2000.0).abs() < 1.0, "{:?}", a.features);
        assert!((a.rate_bps - 1488.0 * 8.0 * 500.0).abs() < 0.02 * a.rate_bps, "{}", a.rate_bps);
        assert_eq!(b.features.size_mean, 240.0);
        assert!((b.features.iat_mean_us - 50_000.0).abs() < 1.0, "{:?}", b.features);
        assert_eq!(a.rtt, Duration::from_millis(20), "the client half; the server half is never timed");
        assert!(!a.idle() && !b.idle());
        // Tick order, and flows in key order within a tick.
        assert!(f.rows.windows(2).all(|w| w[0].t <= w[1].t));
    }

    #[test]
    fn silence_gives_idle_rows_until_the_flow_expires_and_costs_no_ticks_after() {
        // 1 s of traffic, then nothing until 100 s, then 1 s more.
        let mut p = stream(3389, 40_001, 0, 10_000, 1000, 1);
        p.extend(stream(3389, 40_001, 100_000_000, 10_000, 1000, 1).into_iter().map(|mut s| {
            s.4 += 1_000_000;
            if !s.1 {
                s.5 += 1_000_000;
            }
            s
        }));
        let path = capture("idle", &p);
        let mut o = opts(3389);
        o.monitor.idle_timeout = Duration::from_secs(5);
        let f = features(&path, &o).unwrap();
        std::fs::remove_file(&path).ok();
        let idle = f.rows.iter().filter(|r| r.idle()).count();
        // The feature window covers one to two rate windows (1 s each), so the flow reads
        // idle from 1–2 s after its last payload (at 0.99 s) until it expires 5 s after
        // its last packet (1.01 s): ticks 2.0 … 6.0 s with the windows aligned as they are.
        assert!((30..=45).contains(&idle), "{idle} idle rows");
        // Far fewer ticks than the 1,010 periods the capture spans.
        assert!(f.ticks < 130, "{} ticks", f.ticks);
    }

    #[test]
    fn plain_x11_is_read_the_other_way_round() {
        // The X server listens on the user's side: the application's drawing goes *to*
        // port 6020. Build it as "from the server" on the port, then read it both ways.
        let p = stream(6020, 40_001, 0, 2_000, 1448, 1);
        let path = capture("x11", &p);
        let mut o = opts(6020);
        let as_server = features(&path, &o).unwrap();
        o.filter.port_at_client = true;
        let as_display = features(&path, &o).unwrap();
        std::fs::remove_file(&path).ok();
        let last = |f: &CaptureFeatures| f.rows.last().unwrap().features;
        assert_eq!(last(&as_server).size_mean, 1488.0);
        // Read with the listener at the user's side the big segments go toward the
        // "server": the downlink sees only the ACKs, so no payload toward the client.
        assert!(last(&as_display).is_idle());
        assert_eq!(as_display.flows[0].client.port(), 6020);
    }

    #[test]
    fn no_packet_of_the_port_names_the_busiest() {
        let path = capture("none", &stream(5900, 40_001, 0, 10_000, 100, 1));
        let e = features(&path, &opts(3389)).unwrap_err().to_string();
        std::fs::remove_file(&path).ok();
        assert!(e.contains("no packet of TCP port 3389") && e.contains("5900 ("), "{e}");
    }

    #[test]
    fn a_missing_file_is_named() {
        let e = features(Path::new("/nonexistent/x.pcap"), &opts(5900)).unwrap_err().to_string();
        assert!(e.starts_with("/nonexistent/x.pcap: "), "{e}");
    }
}
