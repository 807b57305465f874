//! Issue 15 items 16–19: what a hostile user or a careless configuration must not get
//! past the daemons. Items 17–19 are the binary's behaviour (exit status, message), so
//! they run the real `thinwan-mux`; the trunk-port soak for item 16 is `soak.rs`.

mod common;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{run, scratch, write, PSK};
use thinwan_mux::config::parse;
use thinwan_mux::core::{Core, Registry};
use thinwan_mux::{CoreConfig, Counters};
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};

/// Item 16: at most `limits.max_handshakes` unauthenticated connections are in their
/// handshake; more are closed at once, and an admitted one that does not authenticate
/// is closed after `timeouts.handshake_timeout_ms`, freeing its slot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handshakes_are_capped_in_number_and_time() {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let cfg = CoreConfig::try_from(
        parse(&format!(
            "[trunk]\nlisten = \"{addr}\"\n[auth]\npsk = \"{PSK}\"\n[limits]\nmax_handshakes = 4\n\
             [timeouts]\nhandshake_timeout_ms = 1000\n[[target]]\nname = \"e\"\nconnect = \"127.0.0.1:9\"\n"
        ))
        .unwrap(),
    )
    .unwrap();
    let counters = Arc::new(Counters::default());
    let (stop, rx) = tokio::sync::watch::channel(false);
    tokio::spawn(Core::run(cfg, l, counters.clone(), Registry::default(), rx));

    let t0 = Instant::now();
    let mut idle = Vec::new();
    for _ in 0..10 {
        idle.push(tokio::spawn(async move {
            // A refused connection may be reset before `connect` returns.
            if let Ok(mut s) = TcpStream::connect(addr).await {
                let mut b = [0u8; 1];
                let _ = s.read(&mut b).await; // EOF or reset: the core closed it
            }
            t0.elapsed()
        }));
    }
    let mut closed = Vec::new();
    for t in idle {
        closed.push(tokio::time::timeout(Duration::from_secs(5), t).await.unwrap().unwrap());
    }
    let early = closed.iter().filter(|d| **d < Duration::from_millis(500)).count();
    let timed_out = closed.iter().filter(|d| **d >= Duration::from_millis(990)).count();
    assert_eq!((early, timed_out), (6, 4), "6 refused at once, 4 held until the timeout: {closed:?}");
    // The core counts a handshake's end just after closing its socket: poll briefly.
    let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::SeqCst);
    let counts =
        || (load(&counters.handshakes_refused), load(&counters.trunk_failures), load(&counters.handshakes));
    let deadline = Instant::now() + Duration::from_secs(2);
    while counts() != (6, 4, 0) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Refused, admitted and timed out, still in progress.
    assert_eq!(counts(), (6, 4, 0), "6 refused, the 4 admitted timed out, every slot free again");
    let _ = stop.send(true);
}

/// Item 17: `--check` builds the TLS configuration the daemon builds, so an unparsable
/// certificate, a key of another certificate and a bad CA fail it with exit 2, naming
/// the key and the file — as does starting the daemon.
#[test]
fn check_loads_certificates_and_keys_like_the_daemon() {
    let dir = scratch("check-certs");
    let (code, _, err) = run(&["gen-certs", "--dir", dir.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let d = dir.display();
    let n = std::cell::Cell::new(0);
    let core = |cert: &str, key: &str, ca: &str| {
        n.set(n.get() + 1);
        write(
            &dir,
            &format!("core-{}.toml", n.get()),
            &format!(
                "[trunk]\nlisten = \"127.0.0.1:0\"\n[auth]\ncert = \"{cert}\"\nkey = \"{key}\"\nca = \"{ca}\"\n\
                 [[target]]\nname = \"echo\"\nconnect = \"127.0.0.1:7\"\n"
            ),
        )
    };
    let (good_cert, good_key, ca) = (format!("{d}/core.pem"), format!("{d}/core.key"), format!("{d}/ca.pem"));
    let cfg = core(&good_cert, &good_key, &ca);
    let (code, out, err) = run(&["core", "--config", cfg.to_str().unwrap(), "--check"]);
    assert_eq!(code, 0, "a good set passes: {out}{err}");

    // A PEM block whose contents are not a certificate (valid base64, not DER).
    let junk = write(
        &dir,
        "junk.pem",
        "-----BEGIN CERTIFICATE-----\nTm90IGEgY2VydGlmaWNhdGUgYXQgYWxsLCBqdXN0IHRleHQu\n-----END CERTIFICATE-----\n",
    );
    let junk = junk.to_str().unwrap();
    let cases = [
        (core(junk, &good_key, &ca), "auth.cert", junk.to_owned(), "not a usable certificate"),
        (
            core(&good_cert, &format!("{d}/edge.key"), &ca),
            "auth.key",
            format!("{d}/edge.key"),
            "does not match",
        ),
        (core(&good_cert, &good_key, junk), "auth.ca", junk.to_owned(), "not a usable CA certificate"),
        (core(&good_cert, &good_cert, &ca), "auth.key", good_cert.clone(), "no PEM private key"),
        (core(&good_key, &good_key, &ca), "auth.cert", good_key.clone(), "no PEM certificate"),
    ];
    for (cfg, key, file, what) in cases {
        let c = cfg.to_str().unwrap();
        for args in [vec!["core", "--config", c, "--check"], vec!["core", "--config", c]] {
            let (code, _, err) = run(&args);
            assert_eq!(code, 2, "{args:?}: {err}");
            assert!(
                err.contains(&format!("{key}: {file}")) && err.contains(what),
                "{args:?} names {key}, {file} and {what:?}: {err}"
            );
        }
    }
    // The edge side (client configuration) checks the same way.
    let edge = write(
        &dir,
        "edge.toml",
        &format!(
            "[trunk]\nconnect = \"127.0.0.1:9\"\n[auth]\ncert = \"{d}/edge.pem\"\nkey = \"{d}/core.key\"\n\
             ca = \"{d}/ca.pem\"\n[[forward]]\nname = \"echo\"\nlisten = \"127.0.0.1:0\"\n"
        ),
    );
    let (code, _, err) = run(&["edge", "--config", edge.to_str().unwrap(), "--check"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("auth.key") && err.contains("does not match"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Item 18: `log.level = "verbose!!"` passed `--check` and turned all logging off.
#[test]
fn log_level_typo_fails_check_naming_the_key_and_values() {
    let dir = scratch("log-level");
    let cfg = write(
        &dir,
        "core.toml",
        &format!(
            "[trunk]\nlisten = \"127.0.0.1:0\"\n[auth]\npsk = \"{PSK}\"\n[log]\nlevel = \"verbose!!\"\n\
             [[target]]\nname = \"echo\"\nconnect = \"127.0.0.1:7\"\n"
        ),
    );
    let (code, out, err) = run(&["core", "--config", cfg.to_str().unwrap(), "--check"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("log.level") && err.contains("verbose!!"), "{err}");
    assert!(err.contains("\"info\"") && err.contains("\"debug\"") && err.contains("target=level"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Item 19: a listener that cannot bind names its key and address.
#[test]
fn bind_errors_name_the_key_and_the_address() {
    let dir = scratch("bind");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let t = taken.local_addr().unwrap();
    let target = "[[target]]\nname = \"echo\"\nconnect = \"127.0.0.1:7\"\n";
    let cases = [
        ("core", format!("[trunk]\nlisten = \"{t}\"\n[auth]\npsk = \"{PSK}\"\n{target}"), "trunk.listen"),
        (
            "core",
            format!(
                "[trunk]\nlisten = \"127.0.0.1:0\"\n[auth]\npsk = \"{PSK}\"\n[metrics]\nlisten = \"{t}\"\n{target}"
            ),
            "metrics.listen",
        ),
        (
            "edge",
            format!(
                "[trunk]\nconnect = \"127.0.0.1:9\"\n[auth]\npsk = \"{PSK}\"\n\
                 [[forward]]\nname = \"a\"\nlisten = \"127.0.0.1:0\"\n[[forward]]\nname = \"b\"\nlisten = \"{t}\"\n"
            ),
            "forward[1].listen",
        ),
        (
            "edge",
            format!(
                "[trunk]\nconnect = \"127.0.0.1:9\"\n[auth]\npsk = \"{PSK}\"\n[metrics]\nlisten = \"{t}\"\n\
                 [[forward]]\nname = \"a\"\nlisten = \"127.0.0.1:0\"\n"
            ),
            "metrics.listen",
        ),
    ];
    for (role, text, key) in cases {
        let cfg = write(&dir, "daemon.toml", &text);
        let (code, _, err) = run(&[role, "--config", cfg.to_str().unwrap()]);
        assert_eq!(code, 1, "{role} {key}: {err}");
        assert!(
            err.contains(&format!("{key}: cannot listen on {t}: ")) && err.contains("in use"),
            "{role}: names {key} and {t}: {err}"
        );
    }
    drop(taken);
    let _ = std::fs::remove_dir_all(&dir);
}
