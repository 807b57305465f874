//! The QDS loop on synthetic packets, and the `qds` keys.

use super::config::{ClassifierName, OracleEntry, QdsKeys, QdsSetup};
use super::log::{encode, Record, NO_APP, RECORD};
use super::*;
use crate::config::{DirConfig, LinkConfig, QueueKeys};
use crate::link::{flow_id, EventKind};
use crate::packet;
use thinwan_proto::link::LinkDir;
use thinwan_proto::qdisc::DisciplineName;
use thinwan_proto::qds::classify::{AppType, Features, Model};
use thinwan_proto::Duration;

const SERVER: [u8; 4] = [198, 18, 1, 1];
const CLIENT: [u8; 4] = [198, 18, 2, 1];
const SERVER_PORT: u16 = 5001;

fn ms(x: f64) -> Instant {
    Instant::from_secs_f64(x * 1e-3)
}

/// `len` bytes of data from the server to client port `cport`, starting at `seq`.
fn data(cport: u16, seq: u32, len: usize) -> Vec<u8> {
    let b = etherparse::PacketBuilder::ipv4(SERVER, CLIENT, 64).tcp(SERVER_PORT, cport, seq, 65535).ack(1);
    let mut out = Vec::new();
    b.write(&mut out, &vec![0u8; len]).expect("writing to a Vec cannot fail");
    out
}

/// The client's pure ACK of everything below `ack`.
fn ack(cport: u16, ack: u32) -> Vec<u8> {
    let b = etherparse::PacketBuilder::ipv4(CLIENT, SERVER, 64).tcp(cport, SERVER_PORT, 1, 65535).ack(ack);
    let mut out = Vec::new();
    b.write(&mut out, &[]).expect("writing to a Vec cannot fail");
    out
}

fn oracle(rows: &[(u16, AppType)]) -> Vec<OracleEntry> {
    rows.iter()
        .map(|&(port, app)| OracleEntry {
            app,
            client_port: Some(port),
            server_port: None,
            client_addr: None,
            server_addr: None,
        })
        .collect()
}

fn oracle_keys(rows: &[(u16, AppType)]) -> QdsKeys {
    QdsKeys { classifier: ClassifierName::Oracle, oracle: oracle(rows), ..QdsKeys::default() }
}

/// Flows on client ports `rtts[i].0`, each a 1000-byte segment every 5 ms from 0 ms
/// until `until_ms`, each acknowledged `rtts[i].1` ms later: the packets in time order,
/// with the way each crosses the middlebox.
fn traffic(rtts: &[(u16, f64)], until_ms: f64) -> Vec<(Instant, Toward, Vec<u8>)> {
    let mut out = Vec::new();
    for &(port, rtt) in rtts {
        let mut t = 0.0;
        let mut seq = 1u32;
        while t < until_ms {
            out.push((ms(t), Toward::Client, data(port, seq, 1000)));
            seq += 1000;
            out.push((ms(t + rtt), Toward::Server, ack(port, seq)));
            t += 5.0;
        }
    }
    out.sort_by_key(|(t, _, _)| *t);
    out
}

/// Feed `packets` up to `until` into `q`; run the periods that fall due on the way.
fn feed(q: &mut QdsLoop, packets: &[(Instant, Toward, Vec<u8>)], until: Instant) -> Vec<Period> {
    let mut periods = Vec::new();
    for (t, toward, p) in packets.iter().filter(|(t, _, _)| *t <= until) {
        while q.poll_timeout() <= *t {
            let due = q.poll_timeout();
            periods.extend(q.handle_timeout(due));
        }
        q.observe(*t, *toward, p);
    }
    periods
}

fn flow_records(p: &Period) -> Vec<super::log::FlowRecord> {
    p.records
        .iter()
        .filter_map(|r| match r {
            Record::Flow(f) => Some(*f),
            Record::Class(_) => None,
        })
        .collect()
}

#[test]
fn a_flow_near_its_qt_gets_a_more_urgent_class_and_a_larger_rate() {
    // Two video flows (QT 50 ms): A's RTT is 45 ms (DB 5 ms → c_1), B's 5 ms (DB 45 ms →
    // c_5); same rate, so the bandwidth-aware weights are the class levels 1.8 and 1.0.
    let setup =
        QdsSetup::from_keys(&oracle_keys(&[(40001, AppType::Video), (40002, AppType::Video)])).unwrap();
    let mut q = QdsLoop::new(setup, 10_000_000, Instant::ZERO);
    let packets = traffic(&[(40001, 45.0), (40002, 5.0)], 400.0);
    let periods = feed(&mut q, &packets, ms(450.0));
    assert_eq!(periods.len(), 4, "a period every 100 ms");
    let last = periods.last().unwrap();
    let flows = flow_records(last);
    assert_eq!(flows.len(), 2);
    let (a, b) = (flows[0], flows[1]);
    assert_eq!((a.key.client.port(), b.key.client.port()), (40001, 40002));
    assert!((a.rtt_s - 0.045).abs() < 1e-9 && (b.rtt_s - 0.005).abs() < 1e-9, "{} {}", a.rtt_s, b.rtt_s);
    assert!(a.partial, "the server half is never timed here");
    assert_eq!((a.app, a.app_true), (AppType::Video, Some(AppType::Video)));
    assert_eq!((a.class, b.class), (0, 4), "DB 5 ms → c_1, DB 45 ms → c_5");
    let rate = |c: usize| last.rates[c].rate_bps as f64;
    // Equal flow rates: the class rates are in the ratio of the levels, 1.8 : 1.0.
    assert!((rate(0) / rate(4) - 1.8).abs() < 0.05, "{} {}", rate(0), rate(4));
    assert!(last.rates.iter().all(|r| r.ceil_bps == 10_000_000));
    // The loop files each flow under the id its downlink packets carry in the queue.
    let id_a = flow_id(&packet::parse(&data(40001, 1, 10)).unwrap());
    let id_b = flow_id(&packet::parse(&data(40002, 1, 10)).unwrap());
    assert_eq!(last.assign, vec![(id_a, 0), (id_b, 4)]);
    // Class records: one per class, with their occupancy.
    let occupied: Vec<(u16, u32)> = last
        .records
        .iter()
        .filter_map(|r| match r {
            Record::Class(c) if c.flows > 0 => Some((c.class, c.flows)),
            _ => None,
        })
        .collect();
    assert_eq!(occupied, vec![(0, 1), (4, 1)]);
}

#[test]
fn untimed_flows_are_planned_with_rtt_zero_and_late_periods_keep_the_grid() {
    let setup = QdsSetup::from_keys(&oracle_keys(&[])).unwrap();
    let mut q = QdsLoop::new(setup, 10_000_000, Instant::ZERO);
    q.observe(ms(1.0), Toward::Client, &data(40001, 1, 1000));
    assert_eq!(q.handle_timeout(ms(99.0)), None);
    let p = q.handle_timeout(ms(250.0)).expect("due");
    // No ACK yet, so no RTT: the flow is planned at RTT 0 (controller::inputs), an
    // unlisted flow is data (QT 100 ms), so DB = 100 ms, the last class, and that class
    // gets the whole link rather than the flow waiting there at rate 0.
    let f = flow_records(&p);
    assert_eq!(f.len(), 1, "planned although untimed");
    assert!(f[0].rtt_s.is_nan(), "the log says it had no estimate: {}", f[0].rtt_s);
    assert_eq!((f[0].app, f[0].class), (AppType::Data, 9));
    assert_eq!(p.assign, vec![(f[0].flow, 9)]);
    assert_eq!(q.flows(), 1);
    assert_eq!(q.poll_timeout(), ms(300.0), "the grid stays at multiples of the period");
    assert_eq!(p.rates.last().unwrap().rate_bps, 10_000_000);
}

#[test]
fn the_applied_plan_shares_the_downlink_by_class() {
    // The plan of the first test applied to a shaped 10-Mbit/s direction: with both
    // flows backlogged, A (c_1, 1.8/2.8 of the rate) gets about 64 % of the service; had
    // the ids not matched the queue's, both would share the default class 50:50.
    let setup =
        QdsSetup::from_keys(&oracle_keys(&[(40001, AppType::Video), (40002, AppType::Video)])).unwrap();
    let mut q = QdsLoop::new(setup, 10_000_000, Instant::ZERO);
    let periods = feed(&mut q, &traffic(&[(40001, 45.0), (40002, 5.0)], 400.0), ms(450.0));
    let plan = periods.last().unwrap();
    let queue = QueueKeys { discipline: DisciplineName::Qds, ..Default::default() };
    let cfg = DirConfig { rate_bps: 10_000_000, queue, ..Default::default() };
    let mut d = Direction::new(&cfg, 1, LinkDir::Fwd).unwrap();
    let (mut events, mut out) = (Vec::new(), Vec::new());
    let t0 = Instant::ZERO;
    let plan = Period { t: t0, ..plan.clone() };
    assert!(plan.apply(&mut d, &mut events));
    for i in 0..300 {
        d.arrive(t0, data(40001, 1 + i * 1000, 1000), &mut events);
        d.arrive(t0, data(40002, 1 + i * 1000, 1000), &mut events);
    }
    // 200 packets' worth of time (1040 B at 10 Mbit/s: 0.832 ms each).
    let end = t0 + Duration::from_micros(832 * 200);
    while let Some(t) = d.poll_timeout().filter(|&t| t <= end) {
        d.handle_timeout(t, &mut out, &mut events);
    }
    let served: Vec<u16> =
        events.iter().filter(|e| e.kind == EventKind::Dequeue && e.t <= end).map(|e| e.hdr.dport).collect();
    let a = served.iter().filter(|&&p| p == 40001).count() as f64;
    let share = a / served.len() as f64;
    assert!(served.len() > 150, "{}", served.len());
    assert!((share - 1.8 / 2.8).abs() < 0.06, "A's share {share}");
}

#[test]
fn the_model_names_the_type_and_the_table_the_truth() {
    // A model that has seen only data flows predicts data for everything.
    let f = Features { size_mean: 1000.0, ..Features::default() };
    let model = Model::train(&[(f, AppType::Data)]);
    let keys =
        QdsKeys { model: Some(model), oracle: oracle(&[(40001, AppType::Video)]), ..QdsKeys::default() };
    let mut q = QdsLoop::new(QdsSetup::from_keys(&keys).unwrap(), 10_000_000, Instant::ZERO);
    let periods = feed(&mut q, &traffic(&[(40001, 45.0), (40002, 10.0)], 150.0), ms(150.0));
    let flows = flow_records(&periods[0]);
    assert_eq!(flows.len(), 2);
    assert_eq!((flows[0].app, flows[0].app_true), (AppType::Data, Some(AppType::Video)));
    assert_eq!((flows[1].app, flows[1].app_true), (AppType::Data, None), "not listed: no truth");
    // Data's QT is 100 ms: DB 55 ms → c_6.
    assert_eq!(flows[0].class, 5);
    let b = encode(&Record::Flow(flows[1]));
    assert_eq!(b.len(), RECORD);
    assert_eq!((b[54], b[55], b[56]), (0, AppType::Data.index() as u8, NO_APP));
    assert_eq!(u16::from_le_bytes([b[48], b[49]]), 40002);
}

#[test]
fn oracle_rows_match_on_every_field_they_give() {
    let keys = QdsKeys {
        classifier: ClassifierName::Oracle,
        oracle: vec![
            OracleEntry {
                app: AppType::Interactive,
                client_port: Some(40001),
                server_port: Some(22),
                client_addr: None,
                server_addr: None,
            },
            OracleEntry {
                app: AppType::Video,
                client_port: None,
                server_port: None,
                client_addr: None,
                server_addr: Some(SERVER.into()),
            },
        ],
        oracle_default: AppType::Audio,
        ..QdsKeys::default()
    };
    let s = QdsSetup::from_keys(&keys).unwrap();
    let key = |sport: u16, server: [u8; 4]| thinwan_capture::FlowKey {
        client: (CLIENT, 40001).into(),
        server: (server, sport).into(),
    };
    assert_eq!(s.truth(&key(22, SERVER), Duration::ZERO), AppType::Interactive);
    assert_eq!(s.truth(&key(5001, SERVER), Duration::ZERO), AppType::Video, "first row needs server port 22");
    assert_eq!(s.truth(&key(5001, [10, 0, 0, 1]), Duration::ZERO), AppType::Audio, "oracle_default");
}

#[test]
fn qds_keys_default_to_the_cores_and_errors_name_the_key() {
    let k = QdsKeys::default();
    let (c, m) = (
        QdsSetup::from_keys(&k).unwrap(),
        QdsSetup::from_keys(&QdsKeys { classifier: ClassifierName::Oracle, ..k.clone() }).unwrap(),
    );
    assert_eq!(
        c.model,
        Some(thinwan_proto::qds::classify::shipped_model()),
        "model_file = \"\": the shipped one"
    );
    assert_eq!(m.model, None, "oracle");
    assert_eq!(m.cfg, thinwan_proto::qds::controller::QdsConfig::default());
    assert_eq!(m.monitor.rtt_samples, thinwan_proto::qds::monitor::MonitorConfig::default().rtt_samples);
    let err = |json: &str| LinkConfig::from_json(json).unwrap_err().0;
    let qds = r#""fwd": {"rate_bps": 10000000, "queue": {"discipline": "qds"}}"#;
    let oracle = r#""classifier": "oracle""#;
    assert!(err(&format!(r#"{{{qds}, "qds": {{{oracle}, "alpha": -1}}}}"#)).starts_with("qds.alpha:"));
    assert!(err(&format!(r#"{{{qds}, "qds": {{{oracle}, "classes": 0}}}}"#)).starts_with("qds.classes:"));
    assert!(err(&format!(r#"{{{qds}, "qds": {{{oracle}, "period_ms": 0}}}}"#)).starts_with("qds.period_ms:"));
    assert!(err(&format!(r#"{{{qds}, "qds": {{"speed": 1}}}}"#)).contains("speed"));
    assert!(err(&format!(r#"{{{qds}, "qds": {{"variant": "fastest"}}}}"#)).starts_with("qds.variant:"));
    let e = err(&format!(r#"{{{qds}, "qds": {{{oracle}, "oracle": [{{"app": "video"}}]}}}}"#));
    assert!(e.starts_with("qds.oracle[0]:"), "{e}");
    let e = err(&format!(r#"{{{qds}, "qds": {{"model_file": "/nonexistent/m.json"}}}}"#));
    assert!(e.starts_with("qds.model_file: /nonexistent/m.json:"), "{e}");
    let e = err(
        r#"{"rev": {"rate_bps": 1000000, "queue": {"discipline": "qds"}}, "qds": {"classifier": "oracle"}}"#,
    );
    assert!(e.starts_with("rev.queue.discipline:"), "{e}");
    // Without the qds discipline the model is not needed.
    assert!(LinkConfig::from_json(r#"{"qds": {"classifier": "model"}}"#).is_ok());
    let ok = LinkConfig::from_json(&format!(
        r#"{{{qds}, "qds": {{{oracle}, "variant": "demand_first", "oracle": [{{"app": "video", "client_port": 6001}}]}}}}"#
    ))
    .unwrap();
    let s = ok.qds_setup().unwrap().expect("fwd runs qds");
    assert_eq!(s.cfg.variant, thinwan_proto::qds::controller::Variant::DemandFirst);
    // The resolved configuration (thinwan-link --check) reads back the same.
    let back = LinkConfig::from_json(&serde_json::to_string(&ok).unwrap()).unwrap();
    assert_eq!(back, ok);
}

/// The oracle of a lab run (thinwan-link's `pairs.traffic`): each pair's true type, by
/// its server port, from the core's traffic model, and the loop's clock for a mix's
/// phases starts with the first packet of a pair.
#[test]
fn the_pairs_oracle_follows_the_mix_by_server_port() {
    use crate::pairs::PairsConfig;
    use crate::pump::TrafficConfig;
    use thinwan_proto::traffic::{AppKeys, Model};
    let traffic = TrafficConfig {
        model: Model::Mix,
        apps: AppKeys {
            mix: vec![(Model::Video, 1), (Model::Data, 1)],
            mix_change_s: 0.3,
            ..AppKeys::default()
        },
        ..TrafficConfig::default()
    };
    let pairs =
        PairsConfig { server_port_base: 20000, count: 2, client_delays_ms: vec![], traffic: Some(traffic) };
    let mut setup = QdsSetup::from_keys(&oracle_keys(&[])).unwrap();
    setup.truth = pairs.truth().unwrap();
    let mut q = QdsLoop::new(setup, 10_000_000, Instant::ZERO);
    // Two flows from server ports 20000 and 20001, 10-ms RTT, from t = 50 ms.
    let pkt = |sport: u16, to_client: bool, n: u32| {
        let (src, dst, sp, dp) =
            if to_client { (SERVER, CLIENT, sport, 5001) } else { (CLIENT, SERVER, 5001, sport) };
        let b =
            etherparse::PacketBuilder::ipv4(src, dst, 64).tcp(sp, dp, if to_client { n } else { 1 }, 65535);
        let b = b.ack(if to_client { 1 } else { n });
        let mut out = Vec::new();
        b.write(&mut out, &vec![0u8; if to_client { 1000 } else { 0 }]).unwrap();
        out
    };
    let mut packets = Vec::new();
    for port in [20000u16, 20001] {
        let mut t = 50.0;
        let mut seq = 1u32;
        while t < 900.0 {
            packets.push((ms(t), Toward::Client, pkt(port, true, seq)));
            seq += 1000;
            packets.push((ms(t + 10.0), Toward::Server, pkt(port, false, seq)));
            t += 5.0;
        }
    }
    packets.sort_by_key(|(t, _, _)| *t);
    let periods = feed(&mut q, &packets, ms(950.0));
    let app_at = |t_ms: f64, port: u16| {
        let p = periods.iter().find(|p| p.t == ms(t_ms)).expect("a period then");
        flow_records(p).into_iter().find(|f| f.key.server.port() == port).map(|f| (f.app, f.app_true))
    };
    let v = Some((AppType::Video, Some(AppType::Video)));
    let d = Some((AppType::Data, Some(AppType::Data)));
    // Origin 50 ms: phase 0 until 350 ms, phase 1 until 650 ms, then phase 2.
    assert_eq!((app_at(300.0, 20000), app_at(300.0, 20001)), (v, d));
    assert_eq!((app_at(400.0, 20000), app_at(400.0, 20001)), (d, v));
    assert_eq!((app_at(700.0, 20000), app_at(700.0, 20001)), (v, d));
}

/// One flow (client port 40001) queues 100 packets in the default class (1 Mbit/s) of a
/// 10-Mbit/s QDS direction; 20 ms later the controller puts it into class 0 (8 Mbit/s)
/// and it sends 50 more. Returns the sequence numbers in the order they left the queue
/// and the time from the move to the last departure.
fn reassigned_flow(class_change: thinwan_proto::qdisc::ClassChange) -> (Vec<u32>, Duration) {
    use thinwan_proto::qdisc::ClassRate;
    let queue = QueueKeys { discipline: DisciplineName::Qds, class_change, ..Default::default() };
    let cfg = DirConfig { rate_bps: 10_000_000, queue, ..Default::default() };
    let mut d = Direction::new(&cfg, 1, LinkDir::Fwd).unwrap();
    let (mut events, mut out) = (Vec::new(), Vec::new());
    let fixed = |bps| ClassRate { rate_bps: bps, ceil_bps: bps };
    let mut rates = vec![fixed(100_000); 10];
    (rates[0], rates[9]) = (fixed(8_000_000), fixed(1_000_000));
    let t0 = Instant::ZERO;
    d.with_classes(t0, &mut events, |c| c.set_rates(t0, &rates));
    for i in 0..100 {
        d.arrive(t0, data(40001, 1 + i * 1000, 1000), &mut events);
    }
    let run = |d: &mut Direction, end: Instant, out: &mut Vec<_>, events: &mut Vec<_>| {
        while let Some(t) = d.poll_timeout().filter(|&t| t <= end) {
            d.handle_timeout(t, out, events);
        }
    };
    let moved = ms(20.0);
    run(&mut d, moved, &mut out, &mut events);
    let id = flow_id(&packet::parse(&data(40001, 1, 10)).unwrap());
    d.with_classes(moved, &mut events, |c| c.assign(id, 0));
    for i in 100..150 {
        d.arrive(moved, data(40001, 1 + i * 1000, 1000), &mut events);
    }
    run(&mut d, ms(5000.0), &mut out, &mut events);
    let left: Vec<&Event> = events.iter().filter(|e| e.kind == EventKind::Dequeue).collect();
    assert_eq!(left.len(), 150, "every packet left");
    let last = left.last().expect("departures").t;
    (left.iter().map(|e| e.hdr.seq).collect(), last - moved)
}

#[test]
fn a_reassigned_flows_queue_moves_with_it_when_asked() {
    use thinwan_proto::qdisc::ClassChange;
    // "move": the flow's queued packets go to class 0 with it, so they leave in order,
    // and the rest (about 148 × 1040 B) at class 0's 8 Mbit/s: ≈ 154 ms.
    let (seqs, took) = reassigned_flow(ClassChange::Move);
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "in order: {seqs:?}");
    assert!(took < Duration::from_millis(170), "served at class 0's rate: {took}");
    // "leave" (the default, Linux HTB's): the later packets overtake the queued ones,
    // which trickle out of the default class at 1 Mbit/s (≈ 98 × 1040 B: 0.8 s).
    let (seqs, took) = reassigned_flow(ClassChange::Leave);
    assert!(seqs.windows(2).any(|w| w[0] > w[1]), "reordered");
    assert!(took > Duration::from_millis(700), "the queued packets wait at 1 Mbit/s: {took}");
}
