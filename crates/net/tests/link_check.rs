//! `thinwan-link --check`: the link options resolved to one JSON line, or one line naming
//! the flag that is wrong (docs/lab.md). `thinwan lab up` passes its options through.

use std::process::Command;

/// Run `thinwan-link --check ARGS`: (exit code, stdout, stderr).
fn check(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_thinwan-link"))
        .arg("--check")
        .args(args)
        .output()
        .expect("thinwan-link runs");
    let text = |b: Vec<u8>| String::from_utf8(b).expect("UTF-8");
    (out.status.code().unwrap_or(-1), text(out.stdout), text(out.stderr))
}

#[test]
fn good_options_print_the_resolved_configuration() {
    let (code, out, err) = check(&[
        "--rate",
        "10mbit",
        "--delay",
        "20ms",
        "--loss",
        "0.01",
        "--queue",
        "priority",
        "--classifier",
        "gap:5ms",
        "--queue-packets",
        "0",
        "--queue-bytes",
        "30000",
        "--seed",
        "7",
    ]);
    assert_eq!((code, err.as_str()), (0, ""));
    assert_eq!(out.lines().count(), 1, "one JSON line: {out}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(v["seed"], 7);
    for dir in ["fwd", "rev"] {
        let d = &v[dir];
        assert_eq!(d["rate_bps"], 10_000_000);
        assert_eq!(d["delay_ms"], 20.0);
        assert_eq!(d["loss"], 0.01);
        assert_eq!(d["queue"]["discipline"], "priority");
        assert_eq!(d["queue"]["priority_classifier"], "gap");
        assert_eq!(d["queue"]["classifier_gap_ms"], 5.0);
        assert_eq!(d["queue"]["limit_bytes"], 30000);
    }
}

#[test]
fn the_defaults_need_no_devices() {
    let (code, out, _) = check(&[]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(v["fwd"]["queue"]["classifier_gap_ms"], thinwan_proto::qdisc::DEFAULT_CLASSIFIER_GAP_MS);
}

#[test]
fn a_bad_value_names_its_flag_in_one_line() {
    for (args, flag) in [
        (&["--ge", "a,b"][..], "--ge"),
        (&["--classifier", "gap:abc"], "--classifier"),
        (&["--classifier", "dpi"], "--classifier"),
        (&["--classifier", "gap:0"], "--classifier"),
        (&["--delay", "soon"], "--delay"),
        (&["--rate", "10 parsecs"], "--rate"),
        (&["--loss", "2"], "--loss"),
        (&["--loss", "x"], "--loss"),
        (&["--jitter", "gauss:1ms"], "--jitter"),
        (&["--queue", "red"], "--queue"),
        (&["--queue-packets", "0"], "--queue-packets"),
        (&["--queue-bytes", "-1"], "--queue-bytes"),
        (&["--seed", "x"], "--seed"),
    ] {
        let (code, out, err) = check(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert_eq!(out, "", "{args:?}");
        assert_eq!(err.lines().count(), 1, "{args:?}: one line, got {err}");
        let prefix = format!("thinwan-link: {flag}: ");
        assert!(err.starts_with(&prefix), "{args:?}: {err:?} should start with {prefix:?}");
    }
}

#[test]
fn a_bad_config_file_is_blamed_with_its_key() {
    let dir = std::env::temp_dir().join(format!("thinwan-link-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("link.json");
    std::fs::write(&path, r#"{"fwd": {"queue": {"discipline": "red"}}}"#).expect("write");
    let (code, _, err) = check(&["--config", path.to_str().expect("UTF-8 path")]);
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(code, 2);
    assert!(err.starts_with("thinwan-link: --config: "), "{err}");
    assert!(err.contains("fwd.queue.discipline"), "{err}");
}

#[test]
fn queue_qds_shapes_the_downlink_only_with_the_shipped_classifier_by_default() {
    // The default classifier is the model; model_file = "" is the one thinwan ships.
    let (code, out, err) = check(&["--rate", "10mbit", "--queue", "qds"]);
    assert_eq!((code, err.as_str()), (0, ""));
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!((v["qds"]["classifier"].as_str(), v["qds"]["model_file"].as_str()), (Some("model"), Some("")));
    let dir = std::env::temp_dir().join(format!("thinwan-link-check-qds-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let cfg = dir.join("link.json");
    let oracle = r#"{"qds": {"classifier": "oracle", "period_ms": 50,
        "oracle": [{"app": "video", "client_port": 6001}]}}"#;
    std::fs::write(&cfg, oracle).expect("write config");
    let path = cfg.to_str().expect("UTF-8 path");
    let (code, out, err) = check(&["--config", path, "--rate", "10mbit", "--queue", "qds"]);
    assert_eq!((code, err.as_str()), (0, ""));
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(v["fwd"]["queue"]["discipline"], "qds");
    assert_eq!(v["rev"]["queue"]["discipline"], "droptail", "the ACK direction stays a FIFO");
    assert_eq!(v["qds"]["period_ms"], 50.0);
    assert_eq!(v["qds"]["oracle"][0]["client_port"], 6001);
    // A bad key in the file is blamed on --config and named.
    std::fs::write(&cfg, r#"{"qds": {"classifier": "oracle", "beta": 99}}"#).expect("write config");
    let (code, _, err) = check(&["--config", path, "--rate", "10mbit", "--queue", "qds"]);
    assert_eq!(code, 2);
    assert!(err.contains("--config:") && err.contains("qds.beta:"), "{err}");
    // So is a model file that cannot be read.
    std::fs::write(&cfg, r#"{"qds": {"model_file": "/nonexistent/m.json"}}"#).expect("write config");
    let (code, _, err) = check(&["--config", path, "--rate", "10mbit", "--queue", "qds"]);
    assert_eq!(code, 2);
    assert!(err.contains("qds.model_file: /nonexistent/m.json:"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
