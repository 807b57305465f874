//! Pump and sink with the roles swapped (the client side opens the connections, as
//! through a tunnel's edge): every message arrives once, on its own connection, and the
//! run ends when the data is delivered rather than at the end of the drain period.

use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant as StdInstant;

use thinwan_net::pump::{run_pump, run_sink, Peer, PumpOptions, SinkOptions, SockOpts, TrafficConfig};
use thinwan_proto::Duration;

fn free_addr() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free loopback port")
}

fn rows(path: &std::path::Path) -> Vec<Vec<u64>> {
    std::fs::read_to_string(path)
        .expect("log")
        .lines()
        .skip(1)
        .map(|l| l.split(',').map(|x| x.parse().expect("number")).collect())
        .collect()
}

#[test]
fn listening_pump_and_connecting_sink_deliver_every_message_per_connection() {
    let dir = std::env::temp_dir().join(format!("thinwan-pump-roles-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let addr = free_addr();
    let pump = PumpOptions {
        peer: Peer::Listen(addr),
        conns: 3,
        traffic: TrafficConfig { model: thinwan_proto::traffic::Model::Game, ..TrafficConfig::default() },
        seed: 4,
        duration: Duration::from_millis(1500),
        drain: Duration::from_millis(20_000),
        stagger: Duration::from_millis(1),
        start_delay: Duration::from_millis(50),
        local_port_base: None,
        sock: SockOpts { nodelay: true, ..SockOpts::default() },
        out: dir.join("pump.csv"),
        conns_out: dir.join("conns.json"),
    };
    let sink = SinkOptions {
        peer: Peer::Connect(addr),
        conns: 3,
        sock: SockOpts::default(),
        out: dir.join("sink.csv"),
        timeout: Duration::from_millis(30_000),
    };
    let started = StdInstant::now();
    let p = std::thread::spawn(move || run_pump(&pump, Arc::new(AtomicBool::new(false))));
    std::thread::sleep(std::time::Duration::from_millis(200)); // the pump is listening
    run_sink(&sink, Arc::new(AtomicBool::new(false))).expect("sink");
    p.join().expect("pump thread").expect("pump");
    // Half-close ends the run once everything is read, long before the 20-s drain.
    assert!(started.elapsed() < std::time::Duration::from_secs(10), "took {:?}", started.elapsed());
    // pump.csv: conn,msg,kind,bytes,wire_bytes,… ; sink.csv: conn,msg,bytes,t_write_ns,t_read_ns
    let mut written: Vec<(u64, u64, u64)> =
        rows(&dir.join("pump.csv")).iter().map(|r| (r[0], r[1], r[4])).collect();
    let mut read: Vec<(u64, u64, u64)> =
        rows(&dir.join("sink.csv")).iter().map(|r| (r[0], r[1], r[2])).collect();
    written.sort();
    read.sort();
    assert!(written.len() > 3, "{written:?}");
    assert_eq!(written, read);
    assert_eq!(written.iter().map(|w| w.0).collect::<std::collections::BTreeSet<_>>().len(), 3);
    std::fs::remove_dir_all(&dir).ok();
}

/// A pump on fixed ports (`--local-port-base`): connection i comes from port base + i,
/// so the link emulator knows each pair by port; a taken port fails before any traffic,
/// naming it.
#[test]
fn fixed_local_ports_name_each_connection_and_a_taken_port_is_refused() {
    let dir = std::env::temp_dir().join(format!("thinwan-pump-ports-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    // A base whose three ports are free now: three listeners in a row, then closed.
    let free_run = || {
        (0..50)
            .map(|_| free_addr().port())
            .find(|&p| p < 65000 && (0..3).all(|i| TcpListener::bind(("0.0.0.0", p + i)).is_ok()))
            .expect("three free ports in a row")
    };
    let base = free_run();
    let sink_addr = free_addr();
    let pump = |conns_out: &str, base: u16| PumpOptions {
        peer: Peer::Connect(sink_addr),
        conns: 3,
        traffic: TrafficConfig { model: thinwan_proto::traffic::Model::Game, ..TrafficConfig::default() },
        seed: 4,
        duration: Duration::from_millis(500),
        drain: Duration::from_millis(10_000),
        stagger: Duration::from_millis(1),
        start_delay: Duration::from_millis(50),
        local_port_base: Some(base),
        sock: SockOpts { nodelay: true, ..SockOpts::default() },
        out: dir.join("pump.csv"),
        conns_out: dir.join(conns_out),
    };
    let sink = SinkOptions {
        peer: Peer::Listen(sink_addr),
        conns: 3,
        sock: SockOpts::default(),
        out: dir.join("sink.csv"),
        timeout: Duration::from_millis(30_000),
    };
    let s = std::thread::spawn(move || run_sink(&sink, Arc::new(AtomicBool::new(false))));
    std::thread::sleep(std::time::Duration::from_millis(200)); // the sink is listening
    run_pump(&pump("conns.json", base), Arc::new(AtomicBool::new(false))).expect("pump");
    s.join().expect("sink thread").expect("sink");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("conns.json")).expect("conns.json"))
            .expect("json");
    let ports: Vec<u16> = doc["conns"]
        .as_array()
        .expect("conns")
        .iter()
        .map(|c| c["local"].as_str().expect("local").rsplit(':').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(ports, vec![base, base + 1, base + 2]);
    // With port base + 1 held by a listener the pump refuses, naming the port and the
    // connection. A fresh run of free ports: the first run's are in TIME_WAIT, and the
    // port below an arbitrary held one may be any other socket's.
    let base = free_run();
    let _held = TcpListener::bind(("0.0.0.0", base + 1)).expect("hold base + 1");
    let err = run_pump(&pump("conns2.json", base), Arc::new(AtomicBool::new(false))).unwrap_err().to_string();
    assert!(err.contains(&format!("connection 1: local port {}", base + 1)), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}
