//! `thinwan-yamux-peer` (the yamux peer of the benchmark and the lab) on 127.0.0.1:
//! client → edge → one yamux connection → core → echo server.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Core and edge, killed on drop.
struct Peer(Vec<Child>);

impl Drop for Peer {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn free_addr() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap()
}

/// Start a role and wait for its `ready` line.
fn start(args: &[String]) -> Child {
    let mut child = Command::new(env!("CARGO_BIN_EXE_thinwan-yamux-peer"))
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready", "{args:?}");
    child
}

fn echo_server() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            std::thread::spawn(move || {
                let mut w = s.try_clone().unwrap();
                let _ = std::io::copy(&mut &s, &mut w);
                let _ = w.shutdown(std::net::Shutdown::Write);
            });
        }
    });
    addr
}

fn peer(echo: SocketAddr) -> (Peer, SocketAddr) {
    let (core, fwd) = (free_addr(), free_addr());
    let c = start(&[
        "core".into(),
        "--listen".into(),
        core.to_string(),
        "--target".into(),
        format!("echo={echo}"),
    ]);
    let e = start(&[
        "edge".into(),
        "--connect".into(),
        core.to_string(),
        "--forward".into(),
        format!("echo={fwd}"),
    ]);
    (Peer(vec![e, c]), fwd)
}

#[test]
fn many_streams_and_a_half_closed_bulk_stream_cross_one_connection() {
    let (_peer, fwd) = peer(echo_server());
    // More streams than yamux's default limit (512) and its unacknowledged-open backlog
    // (256), as the benchmark opens 1,000.
    let mut clients: Vec<TcpStream> = (0..600).map(|_| TcpStream::connect(fwd).unwrap()).collect();
    for (i, c) in clients.iter_mut().enumerate() {
        c.write_all(format!("{i:08}").as_bytes()).unwrap();
    }
    for (i, c) in clients.iter_mut().enumerate() {
        c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut back = [0u8; 8];
        c.read_exact(&mut back).unwrap();
        assert_eq!(back, *format!("{i:08}").as_bytes(), "stream {i} got another stream's bytes");
    }
    // 4 MiB up, every byte back in order, and the end of stream passes both ways.
    let data: Vec<u8> = (0..4u32 << 20).map(|i| (i % 251) as u8).collect();
    let mut bulk = TcpStream::connect(fwd).unwrap();
    bulk.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut writer = bulk.try_clone().unwrap();
    let sent = data.clone();
    let w = std::thread::spawn(move || {
        writer.write_all(&sent).unwrap();
        writer.shutdown(std::net::Shutdown::Write).unwrap();
    });
    let mut back = Vec::new();
    bulk.read_to_end(&mut back).unwrap();
    w.join().unwrap();
    assert!(back == data, "bulk bytes differ ({} of {} back)", back.len(), data.len());
}

#[test]
fn a_stream_naming_no_target_is_closed_and_others_go_on() {
    let echo = echo_server();
    let (core, fwd, bad) = (free_addr(), free_addr(), free_addr());
    let c = start(&[
        "core".into(),
        "--listen".into(),
        core.to_string(),
        "--target".into(),
        format!("echo={echo}"),
    ]);
    let e = start(&[
        "edge".into(),
        "--connect".into(),
        core.to_string(),
        "--forward".into(),
        format!("echo={fwd}"),
        "--forward".into(),
        format!("nowhere={bad}"),
    ]);
    let _peer = Peer(vec![e, c]);
    let mut lost = TcpStream::connect(bad).unwrap();
    lost.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = lost.write_all(b"hello");
    let mut buf = [0u8; 5];
    // The end of stream (or a reset), not the read timeout: the core closes the stream.
    match lost.read(&mut buf) {
        Ok(0) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        other => panic!("an unknown target must end the stream, got {other:?}"),
    }
    let mut ok = TcpStream::connect(fwd).unwrap();
    ok.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    ok.write_all(b"hello").unwrap();
    ok.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"hello");
}

#[test]
fn bad_arguments_exit_2() {
    let out = Command::new(env!("CARGO_BIN_EXE_thinwan-yamux-peer"))
        .args(["core", "--listen", "127.0.0.1:1", "--target", "echo=localhost:7"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not an IP:port"), "{out:?}");
}
