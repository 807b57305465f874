"""Scenario loading: documented defaults, errors that name the key, the shipped files."""

from __future__ import annotations

import json
from pathlib import Path

import pydantic
import pytest
import tomllib

from thinwan.config.scenario import MuxSection, Scenario, ScenarioError, load_scenario, scenario_from_dict

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "scenarios"

# Every default of docs/scenario.md, section by section (name is filled in separately).
DOCUMENTED_DEFAULTS = {
    "scenario": {
        "description": "",
        "duration_s": 60.0,
        "drain_s": 10.0,
        "runs": 1,
        "seed": 1,
        "start_stagger_ms": 0.25,
    },
    "topology": {
        "kind": "dumbbell",
        "pairs": 10,
        "access_rate_mbps": 100.0,
        "access_delay_ms": 1.0,
        "access_queue_packets": 1000,
        "bottleneck_rate_mbps": 10.0,
        "bottleneck_delay_ms": 20.0,
        "bottleneck_loss": 0.0,
        "bottleneck_loss_rev": 0.0,
        "bottleneck_jitter_pct": 0.0,
        "last_hop_delay_ms": 50.0,
        "last_hop_rate_mbps": 100.0,
        "servers": 0,
        "client_delay_mean_ms": 7.5,
        "client_delay_sd_ms": 1.25,
        "client_delay_min_ms": 5.0,
        "client_delay_max_ms": 10.0,
    },
    "queue": {
        "discipline": "droptail",
        "limit_bytes": 0,
        "limit_packets": 1000,
        "priority_classifier": "label",
        "classifier_gap_ms": 6.31,
        "fq_codel_target_ms": 5.0,
        "fq_codel_interval_ms": 100.0,
        "fq_codel_quantum_bytes": 1514,
        "fq_codel_flows": 1024,
        "fq_codel_hash_seed": 0,
        "class_quantum_bytes": 1514,
        "class_rate_shares": (),
        "class_ceil_shares": (),
        "class_interactive": -1,
        "class_flows": (),
        "class_codel": False,
        "qds_order": "drr",
        "class_change": "leave",
        "ecn": False,
    },
    "tcp": {
        "profile": "rfc",
        "recovery": "newreno",
        "sack": True,
        "mss": 1460,
        "header_bytes": 40,
        "initial_cwnd_segments": 10,
        "nagle": False,
        "delayed_ack": True,
        "delayed_ack_ms": 40.0,
        "slow_start_restart": True,
        "min_rto_ms": 200.0,
        "max_rto_ms": 60000.0,
        "initial_rto_ms": 1000.0,
        "clock_granularity_ms": 1.0,
        "rwnd_bytes": 4194304,
        "send_buffer_bytes": 0,
        "send_buffer_autotune": False,
        "dupthresh": 3,
        "rtt_gain": "rfc6298",
        "rto_formula": "rfc6298",
        "rto_reset_after_idle": False,
        "sack_off_after_timeout": False,
        "rack_tlp": False,
        "thin_linear_timeouts": False,
        "dsack": False,
        "rack_reo_wnd": "static",
        "prr": False,
        "rack_bands": False,
        "quick_ack": False,
        "congestion_control": "reno",
        "cwnd_unit": "bytes",
        "hystart": False,
        "tlp_timer": "rfc",
        "rto_restart": "rfc6298",
        "ecn": False,
    },
    "traffic": {
        "model": "thin-client",
        "p_interactive_to_bulk": 0.09,
        "p_bulk_to_interactive": 0.42,
        "gap_ii_s": 0.27,
        "gap_ib_s": 0.22,
        "gap_bi_s": 0.24,
        "gap_bb_s": 0.11,
        "gap_distribution": "lognormal",
        "gap_lognormal_sigma": 1.0,
        "gap_lognormal_sigma_ii": 0.0,
        "gap_lognormal_sigma_ib": 0.0,
        "gap_lognormal_sigma_bi": 0.0,
        "gap_lognormal_sigma_bb": 0.0,
        "session_activity": "identical",
        "session_activity_sigma": 0.5,
        "interactive_bytes_mean": 137.2,
        "bulk_bytes_mean": 936.2,
        "size_spread": 0.5,
        "bulk_packets_mean": 7.4,
        "bulk_packets_max": 1000,
        "bulk_pareto_shape": 1.5,
        "intra_bulk_gap_ms": 0.36,
        "separate_connections": False,
        "pcap_file": "",
        "pcap_server_port": 0,
        "video_rate_mbps": 5.0,
        "video_fps": 25.0,
        "video_frame_spread": 0.2,
        "data_rate_mbps": 1.0,
        "data_object_kb": 50.0,
        "data_object_sigma": 1.0,
        "mix": (),
        "mix_change_s": 0.0,
        "mix_shift": 0,
    },
    "records": {
        "traces": True,
        "trace_interval_ms": 10.0,
        "trace_connections": "all",
        "packet_log_conns": (),
        "packet_rtt": False,
        "pcap": "none",
        "pcap_conns": (),
    },
    "mux": {
        "mode": "direct",
        "trunks": 1,
        "frame_payload_bytes": 16384,
        "notsent_lowat_bytes": 32768,
        "lanes": "fixed",
        "max_lanes": 8,
        "lane_rule": None,
        "bulk_limit": False,
        "shed": False,
        "shed_slack_ms": 100.0,
        "thin_linear_timeouts": False,
        "rto_min_ms": None,
    },
    "qds": {
        "period_ms": 100.0,
        "alpha": 0.2,
        "beta": 1.0,
        "l_floor": 0.1,
        "variant": "bandwidth_aware",
        "classifier": "model",
        "model_file": "",
        "classes": 10,
        "class_step_ms": 10.0,
        "qt_video_ms": 50.0,
        "qt_audio_ms": 50.0,
        "qt_data_ms": 100.0,
        "qt_interactive_ms": 50.0,
        "rtt_samples": 8,
        "rate_window_ms": 1000.0,
    },
}


def write(tmp_path: Path, text: str, name: str = "x.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def error_of(data: dict, source: str = "scenarios/x.toml") -> str:
    with pytest.raises(ScenarioError) as info:
        scenario_from_dict(data, source=source)
    return str(info.value)


# --- defaults ------------------------------------------------------------------------


def test_empty_file_gives_every_documented_default(tmp_path: Path) -> None:
    scenario = load_scenario(write(tmp_path, "", name="empty.toml"))
    dumped = scenario.model_dump()
    assert dumped["scenario"].pop("name") == "empty"
    assert dumped == DOCUMENTED_DEFAULTS


def test_name_defaults_to_file_stem_but_can_be_set(tmp_path: Path) -> None:
    assert load_scenario(write(tmp_path, "", name="my-case.toml")).name == "my-case"
    named = write(tmp_path, '[scenario]\nname = "other"\n')
    assert load_scenario(named).name == "other"


def test_native_json_has_every_section_and_key(tmp_path: Path) -> None:
    native = json.loads(load_scenario(write(tmp_path, "")).to_native_json())
    assert set(native) == set(DOCUMENTED_DEFAULTS)
    for section, keys in DOCUMENTED_DEFAULTS.items():
        assert set(native[section]) - {"name"} == set(keys)
    assert native["scenario"]["name"] == "x"


def test_integer_is_accepted_for_a_float_key_and_exported_as_float() -> None:
    scenario = scenario_from_dict({"scenario": {"duration_s": 5}})
    assert scenario.scenario.duration_s == 5.0
    assert json.loads(scenario.to_native_json())["scenario"]["duration_s"] == 5.0


def test_to_toml_round_trips() -> None:
    scenario = scenario_from_dict({"tcp": {"sack": False}, "scenario": {"name": 'a "quoted" name'}})
    assert scenario_from_dict(tomllib.loads(scenario.to_toml())) == scenario


# --- errors name the file and the dotted key -----------------------------------------


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"tcp": {"min_rto_ms": 0}}, "scenarios/x.toml: tcp.min_rto_ms: Input should be greater than 0"),
        ({"tcp": {"foo": 1}}, "scenarios/x.toml: tcp.foo: unknown key"),
        ({"tpc": {"sack": True}}, "scenarios/x.toml: tpc: unknown section"),
        ({"tcp": 3}, "scenarios/x.toml: tcp: expected a table"),
        ({"tcp": {"sack": "yes"}}, "scenarios/x.toml: tcp.sack: Input should be a valid boolean"),
        ({"topology": {"pairs": 2.5}}, "scenarios/x.toml: topology.pairs: Input should be a valid integer"),
        ({"topology": {"pairs": True}}, "scenarios/x.toml: topology.pairs: Input should be a valid integer"),
        ({"topology": {"pairs": 0}}, "topology.pairs: Input should be greater than or equal to 1"),
        ({"topology": {"kind": "star"}}, "topology.kind: Input should be 'dumbbell', 'mux' or 'middlebox'"),
        ({"tcp": {"mss": 9001}}, "tcp.mss: Input should be less than or equal to 9000"),
        ({"tcp": {"recovery": "cubic"}}, "tcp.recovery: Input should be 'reno' or 'newreno'"),
        ({"traffic": {"p_interactive_to_bulk": 1.5}}, "traffic.p_interactive_to_bulk: Input should be less"),
        ({"traffic": {"bulk_pareto_shape": 1.0}}, "traffic.bulk_pareto_shape: Input should be greater than 1"),
        ({"scenario": {"duration_s": float("inf")}}, "scenario.duration_s: Input should be a finite number"),
        ({"scenario": {"seed": -1}}, "scenario.seed: Input should be greater than or equal to 0"),
        ({"records": {"trace_connections": "x"}}, "records.trace_connections: Input should be 'all' or 'none'"),
        ({"tcp": {"sack": False, "rack_tlp": True}}, "tcp.rack_tlp: needs tcp.sack = true"),
        ({"tcp": {"sack": False, "dsack": True}}, "tcp.dsack: needs tcp.sack = true"),
        ({"tcp": {"sack": False, "prr": True}}, "tcp.prr: needs tcp.sack = true"),
        ({"tcp": {"rack_reo_wnd": "adaptive"}}, 'tcp.rack_reo_wnd: "adaptive" needs tcp.rack_tlp = true'),
        ({"tcp": {"rack_bands": True}}, "tcp.rack_bands: needs tcp.rack_tlp = true"),
        # thinwan-mux's limit, so a simulated scenario also runs in the lab.
        ({"mux": {"max_lanes": 257}}, "mux.max_lanes: Input should be less than or equal to 256"),
        ({"mux": {"lane_rule": "loss"}}, "mux.lane_rule: Input should be 'backlog' or 'held'"),
        ({"mux": {"trunks": 257}}, "mux.trunks: Input should be less than or equal to 256"),
        ({"tcp": {"rack_reo_wnd": "grow"}}, "tcp.rack_reo_wnd: Input should be 'static', 'adaptive' or 'linux'"),
        ({"tcp": {"rack_reo_wnd": "linux"}}, 'tcp.rack_reo_wnd: "linux" needs tcp.rack_tlp = true'),
        ({"tcp": {"hystart": True}}, 'tcp.hystart: needs tcp.congestion_control = "cubic" (HyStart is CUBIC\'s'),
        ({"tcp": {"tlp_timer": "linux"}}, 'tcp.tlp_timer: "linux" needs tcp.rack_tlp = true'),
        ({"tcp": {"tlp_timer": "kernel"}}, "tcp.tlp_timer: Input should be 'rfc' or 'linux'"),
        ({"tcp": {"rto_restart": "rfc"}}, "tcp.rto_restart: Input should be 'rfc6298' or 'linux'"),
        ({"tcp": {"congestion_control": "bbr"}}, "tcp.congestion_control: Input should be 'reno' or 'cubic'"),
        ({"tcp": {"cwnd_unit": "segments"}}, "tcp.cwnd_unit: Input should be 'bytes' or 'packets'"),
        (
            {"queue": {"discipline": "red"}},
            "queue.discipline: Input should be 'droptail', 'priority', 'fq_codel', 'classes' or 'qds'",
        ),
        (
            {"traffic": {"bulk_packets_mean": 10, "bulk_packets_max": 8}},
            "traffic.bulk_packets_max: must be greater than traffic.bulk_packets_mean",
        ),
        ({"topology": {"bottleneck_loss": 1.5}}, "topology.bottleneck_loss: Input should be less than or equal to 1"),
        (
            {"topology": {"bottleneck_loss_rev": -0.1}},
            "topology.bottleneck_loss_rev: Input should be greater than or equal to 0",
        ),
        (
            {"topology": {"bottleneck_jitter_pct": 101}},
            "topology.bottleneck_jitter_pct: Input should be less than or equal to 100",
        ),
        ({"topology": {"last_hop_rate_mbps": 0}}, "topology.last_hop_rate_mbps: Input should be greater than 0"),
        ({"mux": {"mode": "both"}}, "mux.mode: Input should be 'direct', 'mux', 'ssh' or 'yamux'"),
        ({"mux": {"trunks": 0}}, "mux.trunks: Input should be greater than or equal to 1"),
        (
            {"traffic": {"model": "voip"}},
            "traffic.model: Input should be 'thin-client', 'bulk', 'game', 'pcap', 'video', 'data' or 'mix'",
        ),
        (
            {"topology": {"kind": "mux"}, "traffic": {"model": "bulk"}},
            'scenarios/x.toml: topology.kind: "mux" carries one thin stream',
        ),
        ({"topology": {"kind": "mux"}, "traffic": {"separate_connections": True}}, "topology.kind: "),
    ],
)
def test_bad_value_names_file_and_key(data: dict, expected: str) -> None:
    assert expected in error_of(data)


@pytest.mark.parametrize(
    ("data", "key"),
    [
        # max_rto_ms left at its default (60 s) is still checked against the new minimum.
        ({"tcp": {"min_rto_ms": 90_000.0}}, "tcp.max_rto_ms: must be ≥ min_rto_ms"),
        ({"tcp": {"min_rto_ms": 500.0, "max_rto_ms": 400.0}}, "tcp.max_rto_ms: must be ≥ min_rto_ms"),
        ({"tcp": {"mss": 1460, "rwnd_bytes": 1000}}, "tcp.rwnd_bytes: must be ≥ mss"),
        ({"queue": {"limit_bytes": 0, "limit_packets": 0}}, "queue.limit_packets: limit_bytes and limit_packets"),
    ],
)
def test_cross_key_checks_name_the_key(data: dict, key: str) -> None:
    assert key in error_of(data)


def test_cross_key_checks_accept_equal_values_and_either_queue_limit() -> None:
    scenario_from_dict({"tcp": {"min_rto_ms": 300.0, "max_rto_ms": 300.0, "rwnd_bytes": 1460}})
    scenario_from_dict({"queue": {"limit_bytes": 25_000, "limit_packets": 0}})


def test_every_problem_is_reported_on_its_own_line() -> None:
    lines = error_of({"tcp": {"mss": 1, "foo": 2}, "topology": {"pairs": 0}}).splitlines()
    assert len(lines) == 3
    assert all(line.startswith("scenarios/x.toml: ") for line in lines)


def test_toml_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, "[tcp]\nsack = true\nmss = = 3\n")
    with pytest.raises(ScenarioError, match=r"x\.toml: invalid TOML: .*line 3"):
        load_scenario(path)


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match=r"nope\.toml: no such file"):
        load_scenario(tmp_path / "nope.toml")


def test_directory_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="is a directory"):
        load_scenario(tmp_path)


# --- overrides -----------------------------------------------------------------------


def test_with_overrides_replaces_only_what_is_given() -> None:
    base = scenario_from_dict({"scenario": {"runs": 7, "seed": 5}})
    assert base.with_overrides().scenario == base.scenario
    changed = base.with_overrides(runs=2)
    assert (changed.scenario.runs, changed.scenario.seed) == (2, 5)
    assert base.scenario.runs == 7  # the original is untouched


def test_with_values_validates_again_and_names_the_key(tmp_path: Path) -> None:
    base = load_scenario(write(tmp_path, "[tcp]\nsack = true\n"))
    changed = base.with_values({"tcp.sack": False, "queue.limit_bytes": 25_000})
    assert (changed.tcp.sack, changed.queue.limit_bytes, changed.name) == (False, 25_000, "x")
    with pytest.raises(ScenarioError, match=r"^<overrides>: tcp\.mss: Input should be greater"):
        base.with_values({"tcp.mss": 10})
    with pytest.raises(ScenarioError, match=r"^sweep\.toml: tcp\.mss:"):
        base.with_values({"tcp.mss": 10}, source="sweep.toml")
    with pytest.raises(ScenarioError, match=r"tcp\.max_rto_ms: must be ≥ min_rto_ms"):
        base.with_values({"tcp.min_rto_ms": 1e6})
    with pytest.raises(ScenarioError, match=r"tcp\.bogus: unknown key"):
        base.with_values({"tcp.bogus": 1})
    with pytest.raises(ScenarioError, match=r"tcp: expected a 'section\.key' name"):
        base.with_values({"tcp": {}})


def test_equal_settings_make_equal_scenarios(tmp_path: Path) -> None:
    from_file = load_scenario(write(tmp_path, '[scenario]\nname = "a"\n'))
    assert from_file == scenario_from_dict({"scenario": {"name": "a"}}, source="elsewhere.toml")
    assert hash(from_file) == hash(from_file.with_values({}))


def test_scenario_is_immutable() -> None:
    scenario = Scenario()
    with pytest.raises(pydantic.ValidationError):
        scenario.tcp.sack = False  # type: ignore[misc]


# --- the shipped scenario files --------------------------------------------------------


@pytest.mark.parametrize(("stem", "limit_bytes"), [("large-buffer", 2_500_000), ("small-buffer", 25_000)])
def test_ogawa2011_scenarios_match_spec_section_3(stem: str, limit_bytes: int) -> None:
    s = load_scenario(SCENARIOS / "ogawa2011" / f"{stem}.toml")
    assert s.name == f"ogawa2011-{stem}"
    assert (s.scenario.duration_s, s.scenario.runs, s.scenario.start_stagger_ms) == (300.0, 7, 0.25)
    assert (s.topology.pairs, s.topology.access_rate_mbps, s.topology.access_delay_ms) == (100, 100.0, 1.0)
    assert (s.topology.bottleneck_rate_mbps, s.topology.bottleneck_delay_ms) == (10.0, 20.0)
    assert (s.queue.discipline, s.queue.limit_bytes, s.queue.limit_packets) == ("droptail", limit_bytes, 0)
    assert (s.tcp.recovery, s.tcp.sack, s.tcp.nagle) == ("reno", False, False)
    assert (s.tcp.delayed_ack, s.tcp.slow_start_restart) == (False, False)
    assert s.records.traces is True


# Keys added after the ogawa2011 files were written (for the thin-stream mux test grid);
# those files predate them and leave them at their defaults (no loss, no jitter, dumbbell).
ADDED_AFTER_OGAWA2011 = {
    "topology": {
        "bottleneck_loss",
        "bottleneck_loss_rev",
        "bottleneck_jitter_pct",
        "last_hop_delay_ms",
        "last_hop_rate_mbps",
        "servers",
        "client_delay_mean_ms",
        "client_delay_sd_ms",
        "client_delay_min_ms",
        "client_delay_max_ms",
    },
    "mux": {
        "mode",
        "trunks",
        "frame_payload_bytes",
        "notsent_lowat_bytes",
        "lanes",
        "max_lanes",
        "lane_rule",
        "bulk_limit",
        "shed",
        "shed_slack_ms",
        "thin_linear_timeouts",
        "rto_min_ms",
    },
    # Issue #21's RACK-TLP completion and Linux details (off: today's TCP).
    "tcp": {
        "profile",
        "congestion_control",
        "cwnd_unit",
        "dsack",
        "rack_reo_wnd",
        "prr",
        "rack_bands",
        "send_buffer_autotune",
        "quick_ack",
        "hystart",
        "tlp_timer",
        "rto_restart",
        "ecn",
    },
    "traffic": {
        "pcap_file",
        "pcap_server_port",
        "gap_lognormal_sigma_ii",
        "gap_lognormal_sigma_ib",
        "gap_lognormal_sigma_bi",
        "gap_lognormal_sigma_bb",
        "session_activity",
        "session_activity_sigma",
        "video_rate_mbps",
        "video_fps",
        "video_frame_spread",
        "data_rate_mbps",
        "data_object_kb",
        "data_object_sigma",
        "mix",
        "mix_change_s",
        "mix_shift",
    },
    "records": {"packet_rtt", "pcap", "pcap_conns"},
    "qds": set(DOCUMENTED_DEFAULTS["qds"]),
    "queue": {
        "fq_codel_target_ms",
        "fq_codel_interval_ms",
        "fq_codel_quantum_bytes",
        "fq_codel_flows",
        "fq_codel_hash_seed",
        "class_quantum_bytes",
        "class_rate_shares",
        "class_ceil_shares",
        "class_interactive",
        "class_flows",
        "class_codel",
        "qds_order",
        "class_change",
        "ecn",
    },
}


def test_ogawa2011_files_list_every_key() -> None:
    for stem in ("large-buffer", "small-buffer"):
        with open(SCENARIOS / "ogawa2011" / f"{stem}.toml", "rb") as f:
            data = tomllib.load(f)
        for section, keys in DOCUMENTED_DEFAULTS.items():
            later = ADDED_AFTER_OGAWA2011.get(section, set())
            if later == set(keys):
                assert section not in data, (stem, section)
                continue
            assert set(data[section]) - {"name"} == set(keys) - later, (stem, section)
        scenario = load_scenario(SCENARIOS / "ogawa2011" / f"{stem}.toml").model_dump()
        for section, later in ADDED_AFTER_OGAWA2011.items():
            assert all(scenario[section][k] == DOCUMENTED_DEFAULTS[section][k] for k in later)


def test_mux_frame_payload_default_is_the_sessions() -> None:
    from thinwan import _native

    assert MuxSection().frame_payload_bytes == _native.mux_frame_payload_default() == 16384


def test_carlmar2011_files_load_and_run_the_published_grid() -> None:
    s = load_scenario(SCENARIOS / "carlmar2011" / "base.toml")
    assert (s.topology.kind, s.traffic.model, s.topology.last_hop_delay_ms) == ("mux", "game", 50.0)
    assert (s.tcp.sack, s.tcp.nagle, s.tcp.min_rto_ms) == (True, False, 200.0)
    assert s.topology.pairs >= 100


def test_tiny_example_loads() -> None:
    s = load_scenario(SCENARIOS / "examples" / "tiny.toml")
    assert (s.name, s.topology.pairs, s.scenario.duration_s) == ("tiny", 3, 10.0)


# --- inherits -------------------------------------------------------------------------


def test_inherits_merges_key_by_key_and_names_after_the_child(tmp_path: Path) -> None:
    write(tmp_path, '[scenario]\nname = "base"\nduration_s = 5.0\n[tcp]\nsack = false\nmss = 1000\n', name="base.toml")
    child = write(tmp_path, 'inherits = "base.toml"\n[tcp]\nsack = true\n', name="child.toml")
    sc = load_scenario(child)
    assert (sc.name, sc.scenario.duration_s, sc.tcp.sack, sc.tcp.mss) == ("child", 5.0, True, 1000)


def test_inherits_errors_name_the_file(tmp_path: Path) -> None:
    missing = write(tmp_path, 'inherits = "nope.toml"\n', name="a.toml")
    with pytest.raises(ScenarioError, match="nope.toml: no such file"):
        load_scenario(missing)
    loop = write(tmp_path, 'inherits = "b.toml"\n', name="b.toml")
    with pytest.raises(ScenarioError, match="b.toml: inherits: .*cycle"):
        load_scenario(loop)


def test_lab_section_is_checked_but_not_part_of_the_simulated_scenario(tmp_path: Path) -> None:
    ok = write(tmp_path, '[lab]\ncongestion_control = "cubic"\n', name="ok.toml")
    assert "lab" not in json.loads(load_scenario(ok).to_native_json())
    bad = write(tmp_path, "[lab]\nfoo = 1\n", name="bad.toml")
    with pytest.raises(ScenarioError, match="bad.toml: lab.foo: unknown key"):
        load_scenario(bad)


def test_lab_congestion_control_follows_the_tcp_section_unless_set(tmp_path: Path) -> None:
    from thinwan.substrates.lab.linkspec import lab_spec

    cubic = '[tcp]\ncongestion_control = "cubic"\n'
    spec = lab_spec(load_scenario(write(tmp_path, cubic, name="cubic.toml")))
    assert spec.tcp.sysctls()["net.ipv4.tcp_congestion_control"] == "cubic"
    assert "cubic" in spec.tcp.route_options(rto_min_sysctl=True)
    assert any("tcp.cwnd_unit=bytes" in n for n in spec.notes), "Linux counts packets"
    bbr = load_scenario(write(tmp_path, cubic + '[lab]\ncongestion_control = "bbr"\n', name="bbr.toml"))
    assert lab_spec(bbr).tcp.congestion_control == "bbr"
    packets = load_scenario(write(tmp_path, '[tcp]\ncwnd_unit = "packets"\n', name="packets.toml"))
    assert lab_spec(packets).tcp.congestion_control == "reno"
    assert not any("cwnd_unit" in n for n in lab_spec(packets).notes)


def test_lab_section_is_part_of_the_model_and_overrides_the_topology(tmp_path: Path) -> None:
    from thinwan.substrates.lab.linkspec import lab_spec

    lossy = "[topology]\nbottleneck_loss = 0.02\nbottleneck_loss_rev = 0.01\n"
    plain = load_scenario(write(tmp_path, lossy, name="lossy.toml"))
    assert plain.lab.loss is None  # unset: the topology's loss applies
    assert (lab_spec(plain).link.fwd.loss, lab_spec(plain).link.rev.loss) == (0.02, 0.01)
    off = load_scenario(write(tmp_path, lossy + "[lab]\nloss = 0\nloss_rev = 0.0\n", name="off.toml"))
    assert (lab_spec(off).link.fwd.loss, lab_spec(off).link.rev.loss) == (0.0, 0.0)
    ge = load_scenario(write(tmp_path, '[lab]\nge = [0.01, 0.5]\ncongestion_control = "cubic"\n', name="ge.toml"))
    assert ge.lab.ge == (0.01, 0.5, 0.0, 1.0) and ge.lab.congestion_control == "cubic"
    # The [lab] section is not part of what is simulated or recorded.
    assert "lab" not in ge.model_dump() and "[lab]" not in ge.to_toml()
    assert ge.with_values({"tcp.sack": False}).lab == ge.lab
    with pytest.raises(ScenarioError, match=r"bad\.toml: lab\.loss: Input should be less than or equal to 1"):
        load_scenario(write(tmp_path, "[lab]\nloss = 2\n", name="bad.toml"))


def test_a_file_that_is_not_utf8_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "latin1.toml"
    path.write_bytes(b'[scenario]\ndescription = "caf\xe9"\n')
    with pytest.raises(ScenarioError, match=r"latin1\.toml: not UTF-8"):
        load_scenario(path)


def test_the_lab_notes_what_linux_does_whatever_the_scenario_says(tmp_path: Path) -> None:
    from thinwan.substrates.lab.linkspec import lab_spec

    rack = lab_spec(load_scenario(write(tmp_path, "[tcp]\nrack_tlp = true\n", name="rack.toml"))).notes
    for key in (
        "tcp.dsack=false",
        "tcp.prr=false",
        "tcp.rack_reo_wnd=static",
        "tcp.quick_ack=false",
        "tcp.send_buffer_autotune=false",
    ):
        assert any(n.startswith(key) for n in rack), key
    linux = lab_spec(load_scenario(write(tmp_path, '[tcp]\nprofile = "linux"\n', name="linux.toml"))).notes
    assert not any(
        n.startswith(
            ("tcp.dsack", "tcp.prr", "tcp.rack_reo_wnd", "tcp.quick_ack", "tcp.cwnd_unit", "tcp.rack_bands", "tcp.send")
        )
        for n in linux
    )
    bands = write(tmp_path, '[tcp]\nprofile = "linux"\nrack_bands = true\n', name="bands.toml")
    assert any(n.startswith("tcp.rack_bands: not in Linux") for n in lab_spec(load_scenario(bands)).notes)
