//! Monitor transcripts, grouped by situation. Times are when a packet passes the
//! middlebox; the halves are chosen different (client 20.5 ms, server 6.5 ms) so a
//! sample in the wrong half shows.

use super::*;

const MSS: u32 = 1448;
const HDR: u32 = 52; // IPv4 + TCP with the timestamps option

fn at_us(us: u64) -> Instant {
    Instant::from_nanos(us * 1_000)
}

fn ms(x: f64) -> Duration {
    Duration::from_secs_f64(x / 1e3)
}

/// A data segment (ACK set) of `payload` bytes at `seq`, acknowledging `ack`.
fn data(seq: u32, ack: u32, payload: u32) -> Segment {
    Segment { seq, ack, has_ack: true, payload, wire_len: payload + HDR, ..Segment::default() }
}

/// A pure ACK.
fn pure_ack(seq: u32, ack: u32) -> Segment {
    data(seq, ack, 0)
}

fn monitor() -> FlowMonitor<u32> {
    FlowMonitor::new(MonitorConfig::default())
}

/// Replay `(time µs, toward, segment)` in time order into flow 1.
fn replay(m: &mut FlowMonitor<u32>, mut events: Vec<(u64, Toward, Segment)>) {
    events.sort_by_key(|e| e.0);
    for (t, toward, seg) in events {
        m.observe(at_us(t), 1, toward, &seg);
    }
}

/// A download of `n` full segments, one per ms from t = 0, each acknowledged by the
/// client 20.5 ms after it passed (one ACK per segment). Server ISN 1000, client 7000.
fn download(n: u32, timestamps: bool) -> Vec<(u64, Toward, Segment)> {
    let mut ev = Vec::new();
    for i in 0..n {
        let t = u64::from(i) * 1000;
        let mut d = data(1000 + i * MSS, 7000, MSS);
        let mut a = pure_ack(7000, 1000 + (i + 1) * MSS);
        if timestamps {
            // Server TSval = its ms clock; the client's ACK echoes it (RFC 7323 §4.3) and
            // carries the client's clock (1,000,000 + µs, unique per ACK). The server
            // echoes the newest client TSval that reached it: the ACK that passed the
            // middlebox at least 6.5 ms (the server half) before this segment.
            let echoed = (0..i).rev().map(|j| u64::from(j) * 1000 + 20_500).find(|&ta| ta + 6_500 <= t);
            d.ts = Some((i, echoed.map_or(0, |ta| 1_000_000 + ta as u32)));
            a.ts = Some((1_000_000 + (t + 20_500) as u32, i));
        }
        ev.push((t, Toward::Client, d));
        ev.push((t + 20_500, Toward::Server, a));
    }
    ev
}

mod handshake {
    use super::*;

    #[test]
    fn syn_synack_ack_times_both_halves() {
        let mut m = monitor();
        let syn = Segment { seq: 100, syn: true, wire_len: 60, ..Segment::default() };
        let synack =
            Segment { seq: 5000, ack: 101, has_ack: true, syn: true, wire_len: 60, ..Segment::default() };
        let ack = pure_ack(101, 5001);
        replay(
            &mut m,
            vec![(0, Toward::Server, syn), (6_500, Toward::Client, synack), (27_000, Toward::Server, ack)],
        );
        let v = m.view(at_us(27_000), &1).unwrap();
        assert_eq!(v.server_half, Some(ms(6.5)), "SYN → SYN/ACK is the server half");
        assert_eq!(v.client_half, Some(ms(20.5)), "SYN/ACK → first ACK is the client half");
        assert_eq!((v.rtt, v.partial, v.samples), (Some(ms(27.0)), false, (1, 1)));
    }

    #[test]
    fn a_retransmitted_syn_gives_no_sample() {
        // Karn: the SYN/ACK could answer either SYN.
        let mut m = monitor();
        let syn = Segment { seq: 100, syn: true, wire_len: 60, ..Segment::default() };
        let synack =
            Segment { seq: 5000, ack: 101, has_ack: true, syn: true, wire_len: 60, ..Segment::default() };
        replay(
            &mut m,
            vec![
                (0, Toward::Server, syn),
                (1_000_000, Toward::Server, syn),
                (1_006_500, Toward::Client, synack),
            ],
        );
        let v = m.view(at_us(1_006_500), &1).unwrap();
        assert_eq!(v.server_half, None);
        assert_eq!(m.stats().ambiguous, 1);
    }
}

mod data_and_acks {
    use super::*;

    #[test]
    fn a_download_times_the_client_half_and_its_rates() {
        let mut m = monitor();
        replay(&mut m, download(1000, false));
        let now = at_us(1_020_500);
        let v = m.view(now, &1).unwrap();
        assert_eq!(v.client_half, Some(ms(20.5)));
        assert_eq!(v.samples.0, 1000, "one sample per ACK, pending never full (≈ 21 in flight < 64)");
        // 1500 B per ms toward the client: 12 Mbit/s over the 1-s window ending at
        // 1.0205 s — the sub-windows 0.1..1.0 s (900 segments) plus the first 20.5 ms of
        // the 1.0-s one (none: the last segment passed at 0.999 s) → 900 · 1500 · 8 / 0.9205 s.
        let expect = 900.0 * 1500.0 * 8.0 / 0.9205;
        assert!((v.rate_bps - expect).abs() < 1.0, "{} vs {expect}", v.rate_bps);
        assert!(v.rate_up_bps > 0.0 && v.rate_up_bps < v.rate_bps / 20.0);
        assert_eq!(v.features.full_share, 1.0);
        assert!((v.features.size_mean - 1500.0).abs() < 1e-9);
    }

    #[test]
    fn a_half_never_timed_counts_as_zero_and_is_flagged() {
        // One-way data, no timestamps, no handshake: nothing toward the server is ever
        // answered, so the server half has no sample (docs/qds.md).
        let mut m = monitor();
        replay(&mut m, download(50, false));
        let v = m.view(at_us(70_000), &1).unwrap();
        assert_eq!((v.server_half, v.client_half), (None, Some(ms(20.5))));
        assert_eq!(v.rtt, Some(ms(20.5)));
        assert!(v.partial);
        // And no sample at all: no RTT.
        let mut m = monitor();
        m.observe(at_us(0), 1, Toward::Client, &data(1, 1, 100));
        let v = m.view(at_us(0), &1).unwrap();
        assert_eq!((v.rtt, v.partial), (None, false));
        assert!(!v.features.is_idle());
        assert!(m.view(at_us(5_000_000), &1).unwrap().features.is_idle(), "nothing in the last two windows");
    }

    #[test]
    fn karn_discards_only_the_retransmitted_segments_samples() {
        // Segments 0..10 at 0..9 ms; segment 3 is lost. The client ACKs 0, 1, 2 at +20.5 ms
        // and then repeats ACK 3 (duplicates). Segment 3 is retransmitted at 40 ms; its
        // cumulative ACK covering everything comes back at 60.5 ms. Only segment 3's
        // sample is ambiguous (RFC 6298 §3: which copy does the ACK answer?); segments
        // 4..9 were sent once, and that ACK is the first to cover them: the newest, sent
        // at 9 ms, is timed 51.5 ms — its delivery waited for the repair, as the issue's
        // per-packet RTT (transmission → covering ACK) says.
        let mut m = FlowMonitor::new(MonitorConfig { rtt_samples: 1, ..MonitorConfig::default() });
        let mut ev = Vec::new();
        for i in 0..10u32 {
            let t = u64::from(i) * 1000;
            ev.push((t, Toward::Client, data(1000 + i * MSS, 7000, MSS)));
            let acked = if i < 3 { i + 1 } else { 3 };
            ev.push((t + 20_500, Toward::Server, pure_ack(7000, 1000 + acked * MSS)));
        }
        ev.push((40_000, Toward::Client, data(1000 + 3 * MSS, 7000, MSS)));
        replay(&mut m, ev);
        assert_eq!(m.view(at_us(40_000), &1).unwrap().client_half, Some(ms(20.5)));
        m.observe(at_us(60_500), 1, Toward::Server, &pure_ack(7000, 1000 + 10 * MSS));
        let v = m.view(at_us(60_500), &1).unwrap();
        assert_eq!(v.client_half, Some(ms(51.5)), "a segment sent once is timed to the ACK covering it");
        assert_eq!(v.samples.0, 4);
        assert_eq!(m.stats().ambiguous, 1, "segment 3 alone: Karn's rule is per segment");
    }

    #[test]
    fn an_ack_covering_only_a_retransmission_gives_no_sample() {
        // The last segment is lost and repaired by the retransmission timer: nothing sent
        // once is left to time, so its ACK gives nothing.
        let mut m = FlowMonitor::new(MonitorConfig { rtt_samples: 1, ..MonitorConfig::default() });
        let mut ev = download(3, false);
        ev.push((3_000, Toward::Client, data(1000 + 3 * MSS, 7000, MSS)));
        ev.push((300_000, Toward::Client, data(1000 + 3 * MSS, 7000, MSS)));
        ev.push((320_500, Toward::Server, pure_ack(7000, 1000 + 4 * MSS)));
        replay(&mut m, ev);
        let v = m.view(at_us(320_500), &1).unwrap();
        assert_eq!((v.client_half, v.samples.0), (Some(ms(20.5)), 3), "not 317.5 ms from the first copy");
        assert_eq!(m.stats().ambiguous, 1);
    }

    #[test]
    fn keep_alives_are_neither_timed_nor_retransmissions() {
        // After the download is acknowledged (SND.UNA = 1000 + 5·MSS), a 1-byte probe at
        // SND.UNA − 1 (RFC 9293 §3.8.4), answered 20.5 ms later by a duplicate ACK.
        let mut m = monitor();
        let mut ev = download(5, false);
        let una = 1000 + 5 * MSS;
        ev.push((100_000, Toward::Client, data(una - 1, 7000, 1)));
        ev.push((100_000 + 20_500, Toward::Server, pure_ack(7000, una)));
        replay(&mut m, ev);
        let s = m.stats();
        assert_eq!((s.keepalives, s.ambiguous, s.samples_seq), (1, 0, 5));
    }

    #[test]
    fn sequence_numbers_wrap() {
        // The download starts 3 segments below 2^32.
        let mut m = monitor();
        let isn = 0u32.wrapping_sub(3 * MSS);
        for i in 0..6u32 {
            let t = u64::from(i) * 1000;
            m.observe(at_us(t), 1, Toward::Client, &data(isn.wrapping_add(i * MSS), 7000, MSS));
        }
        // One cumulative ACK past the wrap, 20.5 ms after the last segment.
        m.observe(at_us(25_500), 1, Toward::Server, &pure_ack(7000, isn.wrapping_add(6 * MSS)));
        let v = m.view(at_us(25_500), &1).unwrap();
        assert_eq!(v.client_half, Some(ms(20.5)), "the newest covered segment is timed");
        assert_eq!(m.stats().ambiguous, 0, "no false retransmission at the wrap");
    }

    #[test]
    fn pending_samples_are_bounded() {
        let mut m = FlowMonitor::new(MonitorConfig { max_pending: 4, ..MonitorConfig::default() });
        for i in 0..10u32 {
            let mut d = data(1000 + i * MSS, 7000, MSS);
            d.ts = Some((i, 0));
            m.observe(at_us(u64::from(i) * 1000), 1, Toward::Client, &d);
        }
        assert_eq!(m.pending(&1, Toward::Client), (4, 4));
        // The ACK of the first four closes the sub-sample (the 4th segment, at 3 ms);
        // sending resumes timing.
        m.observe(at_us(23_500), 1, Toward::Server, &pure_ack(7000, 1000 + 4 * MSS));
        assert_eq!(m.view(at_us(23_500), &1).unwrap().client_half, Some(ms(20.5)));
        assert_eq!(m.pending(&1, Toward::Client).0, 0);
        m.observe(at_us(24_000), 1, Toward::Client, &data(1000 + 10 * MSS, 7000, MSS));
        assert_eq!(m.pending(&1, Toward::Client).0, 1);
    }
}

mod timestamps {
    use super::*;

    #[test]
    fn echoes_time_the_half_without_data() {
        // The same one-way download with RFC 7323 timestamps: the client's pure ACKs carry
        // TSvals the server echoes, which times the server half.
        let mut m = monitor();
        replay(&mut m, download(200, true));
        let v = m.view(at_us(220_000), &1).unwrap();
        assert_eq!(v.server_half, Some(ms(6.5)), "TSval toward the server → its TSecr back");
        assert_eq!(v.client_half, Some(ms(20.5)));
        assert_eq!((v.rtt, v.partial), (Some(ms(27.0)), false));
        assert!(m.stats().samples_ts > 150, "{:?}", m.stats());
    }

    #[test]
    fn an_idle_servers_late_echo_does_not_inflate_the_server_half() {
        // The lab's thin `game` flow (measured: client half 20.1–20.3 ms, server half
        // 0.25 ms at the handshake, then 434–819 ms): the server writes one segment every
        // 500 ms and the client answers each with a pure ACK 20.1 ms later, carrying a
        // TSval. The server echoes it (TS.Recent, RFC 7323 §4.3) only with its next
        // write, ~480 ms later: that is the server's idleness, not the path.
        let mut m = monitor();
        let client_ts = |us: u64| 1_000 + (us / 1_000) as u32;
        let server_ts = |us: u64| 7_000 + (us / 1_000) as u32;
        let syn =
            Segment { seq: 100, syn: true, wire_len: 60, ts: Some((client_ts(0), 0)), ..Segment::default() };
        let synack = Segment {
            seq: 5000,
            ack: 101,
            has_ack: true,
            syn: true,
            wire_len: 60,
            ts: Some((server_ts(250), client_ts(0))),
            ..Segment::default()
        };
        let ack = Segment { ts: Some((client_ts(20_350), server_ts(250))), ..pure_ack(101, 5001) };
        let mut ev =
            vec![(0, Toward::Server, syn), (250, Toward::Client, synack), (20_350, Toward::Server, ack)];
        let mut recent = client_ts(20_350);
        for k in 1..=20u32 {
            let t = u64::from(k) * 500_000;
            let seq = 5001 + (k - 1) * 100;
            let d = Segment { ts: Some((server_ts(t), recent)), ..data(seq, 101, 100) };
            let a = Segment { ts: Some((client_ts(t + 20_100), server_ts(t))), ..pure_ack(101, seq + 100) };
            recent = client_ts(t + 20_100);
            ev.push((t, Toward::Client, d));
            ev.push((t + 20_100, Toward::Server, a));
        }
        replay(&mut m, ev);
        let v = m.view(at_us(10_100_000), &1).unwrap();
        assert_eq!(v.client_half, Some(ms(20.1)), "every write → its ACK");
        assert_eq!(
            (v.server_half, v.samples.1),
            (Some(ms(0.25)), 1),
            "RFC 9293 §3.10.7.4: only what occupies sequence space must be answered promptly; \
             a pure ACK's TSval echoed by an idle server gives no sample"
        );
    }

    #[test]
    fn a_tsecr_without_the_ack_flag_is_ignored() {
        // RFC 7323 §3.2: TSecr is only valid with ACK set.
        let mut m = monitor();
        m.observe(
            at_us(0),
            1,
            Toward::Server,
            &Segment { ts: Some((50, 0)), payload: 10, wire_len: 62, ..Segment::default() },
        );
        let mut rogue = Segment { seq: 9, ts: Some((1, 50)), wire_len: 52, ..Segment::default() };
        m.observe(at_us(5_000), 1, Toward::Client, &rogue);
        assert_eq!(m.view(at_us(5_000), &1).unwrap().server_half, None);
        rogue.has_ack = true;
        m.observe(at_us(6_500), 1, Toward::Client, &rogue);
        assert_eq!(m.view(at_us(6_500), &1).unwrap().server_half, Some(ms(6.5)));
    }
}

mod lifecycle {
    use super::*;

    fn touch(m: &mut FlowMonitor<u32>, t_ms: u64, key: u32) {
        m.observe(at_us(t_ms * 1000), key, Toward::Client, &data(1, 1, 100));
    }

    #[test]
    fn a_new_flow_beyond_the_limit_evicts_the_least_recently_seen() {
        let mut m = FlowMonitor::new(MonitorConfig { max_flows: 2, ..MonitorConfig::default() });
        touch(&mut m, 0, 1);
        touch(&mut m, 5, 2);
        touch(&mut m, 10, 1);
        touch(&mut m, 15, 3);
        assert_eq!(m.views(at_us(15_000)).iter().map(|(k, _)| *k).collect::<Vec<_>>(), [1, 3]);
        assert_eq!((m.len(), m.stats().evicted), (2, 1));
    }

    #[test]
    fn idle_flows_expire() {
        let mut m =
            FlowMonitor::new(MonitorConfig { idle_timeout: Duration::from_secs(1), ..Default::default() });
        touch(&mut m, 0, 1);
        touch(&mut m, 900, 2);
        m.expire(at_us(1_000_000));
        assert_eq!(m.len(), 2, "exactly the timeout is not idle yet");
        m.expire(at_us(1_500_000));
        assert_eq!(m.views(at_us(1_500_000)).iter().map(|(k, _)| *k).collect::<Vec<_>>(), [2]);
        assert_eq!(m.stats().expired, 1);
        m.expire(at_us(2_000_000));
        assert!(m.is_empty());
    }

    #[test]
    fn fin_both_ways_or_rst_ends_a_flow() {
        let mut m = monitor();
        touch(&mut m, 0, 1);
        m.observe(at_us(1_000), 1, Toward::Client, &Segment { fin: true, ..data(101, 1, 0) });
        assert!(m.view(at_us(1_000), &1).is_some(), "half-closed: still a flow");
        m.observe(at_us(2_000), 1, Toward::Server, &Segment { fin: true, ..data(1, 102, 0) });
        assert!(m.view(at_us(2_000), &1).is_none(), "FIN both ways: gone from the views");
        // The last ACK does not bring it back; expire frees it.
        m.observe(at_us(3_000), 1, Toward::Client, &pure_ack(102, 2));
        assert!(m.views(at_us(3_000)).is_empty());
        assert_eq!(m.len(), 1);
        m.expire(at_us(3_000));
        assert_eq!((m.len(), m.stats().closed), (0, 1));

        touch(&mut m, 10, 2);
        m.observe(at_us(11_000), 2, Toward::Server, &Segment { rst: true, ..Segment::default() });
        assert!(m.view(at_us(11_000), &2).is_none(), "RST: gone at once");
        // A SYN on the same key is a new connection.
        m.observe(at_us(12_000), 2, Toward::Server, &Segment { seq: 5, syn: true, ..Segment::default() });
        assert!(m.view(at_us(12_000), &2).is_some());
        assert_eq!(m.stats().flows_started, 3);
    }

    #[test]
    fn views_come_in_key_order() {
        let mut m = monitor();
        for k in [5, 1, 9, 3] {
            touch(&mut m, u64::from(k), k);
        }
        assert_eq!(m.views(at_us(10_000)).iter().map(|(k, _)| *k).collect::<Vec<_>>(), [1, 3, 5, 9]);
    }
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    fn segment() -> impl Strategy<Value = (u32, bool, u8, Segment)> {
        // Small sequence space so ranges overlap, ACKs cover sends and TSvals repeat.
        (
            0u32..6,
            any::<bool>(),
            0u8..64,
            0u32..5000,
            0u32..5000,
            any::<u8>(),
            0u32..3000,
            proptest::option::of((0u32..50, 0u32..50)),
        )
            .prop_map(|(key, to_client, dt, seq, ack, flags, payload, ts)| {
                let seg = Segment {
                    seq,
                    ack,
                    has_ack: flags & 1 != 0,
                    syn: flags & 2 != 0 && flags & 0x30 == 0,
                    fin: flags & 4 != 0 && flags & 0x40 == 0,
                    rst: flags & 8 != 0 && flags & 0x80 == 0 && flags & 0x10 != 0,
                    payload,
                    wire_len: payload + 40,
                    ts,
                };
                (key, to_client, dt, seg)
            })
    }

    proptest! {
        /// Any packet sequence: no panic, memory within its bounds, no half longer than
        /// the time since the flow started, views in key order.
        #[test]
        fn arbitrary_traffic_stays_within_bounds(events in proptest::collection::vec(segment(), 1..300)) {
            let cfg = MonitorConfig { max_flows: 4, max_pending: 3, rtt_samples: 2, ..MonitorConfig::default() };
            let mut m = FlowMonitor::new(cfg);
            let mut now = Instant::ZERO;
            for (i, (key, to_client, dt, seg)) in events.iter().enumerate() {
                now += Duration::from_micros(u64::from(*dt) * 100);
                let toward = if *to_client { Toward::Client } else { Toward::Server };
                m.observe(now, *key, toward, seg);
                prop_assert!(m.len() <= 4);
                for k in 0..6 {
                    if m.flows.contains_key(&k) {
                        for t in [Toward::Client, Toward::Server] {
                            let (p, q) = m.pending(&k, t);
                            prop_assert!(p <= 3 && q <= 3);
                        }
                    }
                }
                if i % 50 == 49 {
                    m.expire(now);
                }
            }
            let views = m.views(now);
            prop_assert!(views.windows(2).all(|w| w[0].0 < w[1].0));
            for (_, v) in views {
                for h in [v.client_half, v.server_half].into_iter().flatten() {
                    prop_assert!(h <= now.saturating_since(Instant::ZERO));
                }
                prop_assert!(v.rate_bps.is_finite() && v.rate_bps >= 0.0);
                prop_assert!(v.features.as_array().iter().all(|x| x.is_finite() && *x >= 0.0));
            }
        }
    }
}

/// The monitor in the middle of thinwan's own TCP sender and receiver: what it measures
/// against what the path is.
mod with_tcp {
    use super::*;
    use crate::tcp::{Ack, DataSegment, Receiver, ReceiverConfig, Sender, SenderConfig};

    /// A client-half sample and what it may be: the time from a segment sent once (the
    /// middlebox saw one copy) to this ACK, for each such segment this ACK is the first
    /// to cover — the exact per-packet RTTs the sample can stand for.
    struct Sample {
        rtt: Duration,
        exact: Vec<Duration>,
    }

    /// A 2-MB transfer across server ─3 ms─ middlebox ─10 ms─ client (one way); data
    /// packet `lose` (1-based, none if 0) is lost after the middlebox, as a drop at the
    /// downlink's queue would be. Returns every client-half sample and the monitor.
    fn transfer(lose: u64, delayed_ack: bool) -> (Vec<Sample>, FlowMonitor<u32>) {
        let (server_leg, client_leg) = (Duration::from_millis(3), Duration::from_millis(10));
        let mut s = Sender::new(SenderConfig::default());
        let mut r = Receiver::new(ReceiverConfig { delayed_ack, ..ReceiverConfig::default() });
        let mut m = FlowMonitor::new(MonitorConfig { rtt_samples: 1, ..MonitorConfig::default() });
        s.write(2 << 20);
        // In flight: (arrival time, where: 0 middlebox→client, 1 server→middlebox,
        // 2 client→middlebox, 3 middlebox→server, the packet).
        let mut data: Vec<(Instant, u8, DataSegment)> = Vec::new();
        let mut acks: Vec<(Instant, u8, Ack)> = Vec::new();
        let mut samples = Vec::new();
        // Every range the middlebox forwarded: start → (end, first pass, copies).
        let mut seen: std::collections::BTreeMap<u64, (u64, Instant, u32)> = Default::default();
        let mut acked = 0u64;
        let mut sent = 0u64;
        let mut now = Instant::ZERO;
        for _ in 0..1_000_000 {
            s.handle_timeout(now);
            r.handle_timeout(now);
            let mut arrived: Vec<(Instant, u8, DataSegment)> = Vec::new();
            data.retain(|x| {
                if x.0 <= now {
                    arrived.push(*x);
                    false
                } else {
                    true
                }
            });
            for (_, hop, seg) in arrived {
                if hop == 1 {
                    // At the middlebox: observed, then forwarded (or lost after it).
                    sent += 1;
                    seen.entry(seg.seq).or_insert((seg.seq + u64::from(seg.len), now, 0)).2 += 1;
                    let payload = seg.len;
                    let wire = Segment {
                        seq: seg.seq as u32,
                        ack: 1,
                        has_ack: true,
                        payload,
                        wire_len: payload + 40,
                        ..Segment::default()
                    };
                    m.observe(now, 1, Toward::Client, &wire);
                    if sent != lose {
                        data.push((now + client_leg, 0, seg));
                    }
                } else {
                    r.handle_segment(now, &seg);
                }
            }
            let mut arrived: Vec<(Instant, u8, Ack)> = Vec::new();
            acks.retain(|x| {
                if x.0 <= now {
                    arrived.push(*x);
                    false
                } else {
                    true
                }
            });
            for (_, hop, a) in arrived {
                if hop == 2 {
                    let before = m.view(now, &1).map_or(0, |v| v.samples.0);
                    m.observe(
                        now,
                        1,
                        Toward::Server,
                        &Segment {
                            seq: 1,
                            ack: a.ack as u32,
                            has_ack: true,
                            wire_len: 40,
                            ..Segment::default()
                        },
                    );
                    let v = m.view(now, &1).unwrap();
                    if v.samples.0 > before {
                        let exact = seen
                            .values()
                            .filter(|&&(end, _, copies)| copies == 1 && end > acked && end <= a.ack)
                            .map(|&(_, t, _)| now.saturating_since(t))
                            .collect();
                        samples.push(Sample { rtt: v.client_half.unwrap(), exact });
                    }
                    acked = acked.max(a.ack);
                    acks.push((now + server_leg, 3, a));
                } else {
                    s.handle_ack(now, &a);
                }
            }
            while let Some(seg) = s.poll_transmit(now) {
                data.push((now + server_leg, 1, seg));
            }
            while let Some(a) = r.poll_ack() {
                acks.push((now + client_leg, 2, a));
            }
            let next = [
                s.poll_timeout(),
                r.poll_timeout(),
                data.iter().map(|x| x.0).min(),
                acks.iter().map(|x| x.0).min(),
            ]
            .into_iter()
            .flatten()
            .min();
            match next {
                Some(t) => now = t.max(now),
                None => break,
            }
        }
        assert_eq!(s.snd_una(), 2 << 20, "the transfer completed");
        (samples, m)
    }

    /// Samples that stand for no segment sent once: Karn's rule broken.
    fn ambiguous(samples: &[Sample]) -> Vec<Duration> {
        samples.iter().filter(|s| !s.exact.contains(&s.rtt)).map(|s| s.rtt).collect()
    }

    #[test]
    fn every_sample_is_a_once_sent_segments_exact_rtt_despite_losses() {
        // No delayed ACK: each ACK answers the newest segment at once, so every sample is
        // 2 × 10 ms — except for segments held behind a repaired loss, whose covering ACK
        // comes with the repair — and none is answered by a retransmission (Karn).
        // Packet 50 is repaired by fast retransmit; packet 1437, the last, by the
        // retransmission timer (nothing follows it to cause duplicate ACKs): its covering
        // ACK comes an RTO after the first copy.
        for lose in [50, 1437] {
            let (samples, m) = transfer(lose, false);
            // ~1,440 segments in a few round trips of bursts, each burst arriving at one
            // instant and answered by one cumulative ACK: 45 ACKs without loss, 127 with
            // the recovery from the loss of packet 50.
            assert!(samples.len() > 40, "lost {lose}: {} samples", samples.len());
            let wrong = ambiguous(&samples);
            assert!(wrong.is_empty(), "lost {lose}: RFC 6298 §3 (Karn): {wrong:?}");
            let clean = samples.iter().filter(|s| s.rtt == Duration::from_millis(20)).count();
            assert!(
                clean * 10 > samples.len() * 9,
                "lost {lose}: {clean} of {} at the 20-ms leg",
                samples.len()
            );
            assert!(m.stats().ambiguous > 0, "lost {lose}: the retransmission discarded its sample");
            let v = m.view(Instant::MAX, &1).unwrap();
            assert!(v.partial && v.server_half.is_none(), "one-way traffic: the server half is never timed");
        }
        // The fast retransmit of packet 50 discards packet 50's own sample only (a rule
        // discarding everything pending above it dropped 11 here). The segments sent
        // once behind it stay timed; the ACK that covers them after the repair also
        // covers new data sent with the retransmission, and the newest covered segment
        // gives the sample: 20 ms.
        let (_, m) = transfer(50, false);
        assert_eq!(m.stats().ambiguous, 1, "only packet 50's own sample");
    }

    #[test]
    fn with_delayed_acks_the_median_is_the_client_leg() {
        // Delayed ACKs (every second segment, or after 40 ms): the sample of an ACK sent
        // on the timer includes the wait, as the sender's own RTT does; the median stays
        // at the path's 20 ms, and every sample is a segment's exact RTT.
        let (samples, _) = transfer(120, true);
        let wrong = ambiguous(&samples);
        assert!(wrong.is_empty(), "RFC 6298 §3 (Karn): {wrong:?}");
        let mut rtts: Vec<Duration> = samples.iter().map(|s| s.rtt).collect();
        rtts.sort();
        assert_eq!(rtts[rtts.len() / 2], Duration::from_millis(20));
        assert!(rtts[0] >= Duration::from_millis(20), "{rtts:?}");
    }
}
