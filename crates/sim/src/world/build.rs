//! Building a [`World`] from the scenario: ports and links, connections and their
//! traffic sources, routes, the tunnel's lanes. Runs once per run: cold.

use super::*;
use crate::config::{
    CongestionControlName, CwndUnitName, MuxMode, RackReoWnd, RecoveryName, RtoFormula, RtoRestartName,
    RttGain, TlpTimerName, TopologyKind, TraceConnections,
};
use thinwan_proto::link::{Impairment, Jitter, LinkDir, LossModel};
use thinwan_proto::qdisc::QueueSpec;
use thinwan_proto::tcp::{
    idle_rto_after_handshake, CongestionControl, CwndUnit, ReceiverOptions, ReceiverShared, ReoWnd,
    RtoRestart, TlpTimer,
};
use thinwan_proto::traffic::{Calibrated, GameCalibrated, GameParams, Model, ParamError, TrafficSpec};

impl World {
    /// Build run `run` of a scenario: its seed is `scenario.seed + run`.
    pub fn new(cfg: Config, run: u64) -> Result<World, String> {
        let seed = cfg.scenario.seed.wrapping_add(run);
        let t = &cfg.topology;
        let n = t.pairs;
        let mbps = |x: f64| (x * 1e6).round() as u64;
        let access_limits = Limits { bytes: None, packets: Some(t.access_queue_packets as usize) };
        let bneck = QueueSpec::try_from(&cfg.queue).map_err(|e| format!("queue.{e}"))?;
        let port =
            |name, rate, delay_ms: f64, queue: Box<dyn QueueDisc<QItem> + Send>, bottleneck, wan: bool| {
                let link = Port {
                    busy_until: Instant::ZERO,
                    link: 0,
                    free_scheduled: false,
                    bottleneck,
                    wan,
                    plain_fifo: !wan,
                    waiting: false,
                };
                let rest = PortQueue {
                    name,
                    rate_bps: mbps(rate),
                    delay: Duration::from_millis_f64(delay_ms),
                    queue,
                    impair: None,
                    drops_loss: 0,
                    wake_at: Instant::MAX,
                    bytes_tx: 0,
                    bytes_tx_interactive: 0,
                    packets_tx: 0,
                };
                (link, rest)
            };
        // Port layout: 0 = R1→R2, 1 = R2→R1, then per pair i: server NIC, R2→client,
        // client NIC, R1→server.
        // A FIFO needs no link rate.
        let droptail = |limits| QueueSpec::DropTail { limits }.build::<QItem>(0);
        // The scenario's discipline on R1→R2; the ACK direction is a FIFO with its limits.
        let bneck_queue = bneck.build::<QItem>(mbps(t.bottleneck_rate_mbps));
        let (mut ports, mut queues): (Vec<Port>, Vec<PortQueue>) = [
            port("bottleneck", t.bottleneck_rate_mbps, t.bottleneck_delay_ms, bneck_queue, true, true),
            port(
                "bottleneck-rev",
                t.bottleneck_rate_mbps,
                t.bottleneck_delay_ms,
                droptail(bneck.limits()),
                false,
                true,
            ),
        ]
        .into_iter()
        .unzip();
        queues[0].impair = wan_impairment(&cfg, seed, LinkDir::Fwd);
        queues[1].impair = wan_impairment(&cfg, seed, LinkDir::Rev);
        let tcp = &cfg.tcp;
        let recovery = match (tcp.sack, tcp.recovery) {
            (true, _) => Recovery::Sack,
            (false, RecoveryName::Reno) => Recovery::Reno,
            (false, RecoveryName::Newreno) => Recovery::NewReno,
        };
        // One configuration shared by every sender (read on every ACK: it stays cached).
        let scfg = Arc::new(SenderConfig {
            mss: tcp.mss,
            initial_cwnd_segments: tcp.initial_cwnd_segments,
            nagle: tcp.nagle,
            slow_start_restart: tcp.slow_start_restart,
            recovery,
            dupthresh: tcp.dupthresh,
            rto: RtoConfig {
                min: Duration::from_millis_f64(tcp.min_rto_ms),
                max: Duration::from_millis_f64(tcp.max_rto_ms),
                initial: Duration::from_millis_f64(tcp.initial_rto_ms),
                granularity: Duration::from_millis_f64(tcp.clock_granularity_ms),
                min_on_variance: tcp.rto_formula == RtoFormula::Linux,
            },
            send_buffer: (tcp.send_buffer_bytes > 0).then_some(tcp.send_buffer_bytes),
            send_buffer_autotune: tcp.send_buffer_autotune,
            mechanisms: Mechanisms {
                asymmetric_rtt_gain: tcp.rtt_gain == RttGain::Asymmetric,
                rto_reset_after_idle: tcp.rto_reset_after_idle,
                sack_off_after_timeout: tcp.sack_off_after_timeout,
                rack_tlp: tcp.rack_tlp,
                thin_linear_timeouts: tcp.thin_linear_timeouts,
                dsack: tcp.dsack,
                rack_reo_wnd: match tcp.rack_reo_wnd {
                    RackReoWnd::Static => ReoWnd::Static,
                    RackReoWnd::Adaptive => ReoWnd::Adaptive,
                    RackReoWnd::Linux => ReoWnd::Linux,
                },
                prr: tcp.prr,
                rack_bands: tcp.rack_bands,
                tlp_timer: match tcp.tlp_timer {
                    TlpTimerName::Rfc => TlpTimer::Rfc,
                    TlpTimerName::Linux => TlpTimer::Linux,
                },
                rto_restart: match tcp.rto_restart {
                    RtoRestartName::Rfc6298 => RtoRestart::Rfc6298,
                    RtoRestartName::Linux => RtoRestart::Linux,
                },
                ecn: tcp.ecn,
            },
            congestion_control: match tcp.congestion_control {
                CongestionControlName::Reno => CongestionControl::Reno,
                CongestionControlName::Cubic => CongestionControl::Cubic,
            },
            cwnd_unit: match tcp.cwnd_unit {
                CwndUnitName::Bytes => CwndUnit::Bytes,
                CwndUnitName::Packets => CwndUnit::Packets,
            },
            hystart: tcp.hystart,
        });
        let rcfg = Arc::new(ReceiverConfig {
            rwnd: tcp.rwnd_bytes,
            delayed_ack: tcp.delayed_ack,
            delayed_ack_timeout: Duration::from_millis_f64(tcp.delayed_ack_ms),
            sack: tcp.sack,
        });
        // The receivers' configuration, shared by every receiver of a path (read on every
        // segment: it stays cached). Quick-ACK's idle RTO is the one a Linux receiver keeps
        // from its handshake, over the pair's propagation RTT; without quick ACKs one
        // configuration serves all.
        let ropts = ReceiverOptions { dsack: tcp.dsack, quick_ack: tcp.quick_ack, idle_rto: Duration::ZERO };
        let min_rto = Duration::from_millis_f64(tcp.min_rto_ms);
        let rshared_all = Arc::new(ReceiverShared { cfg: *rcfg, opts: ropts });
        let mut rshared_by_path: std::collections::HashMap<u64, Arc<ReceiverShared>> = Default::default();
        let mut idle_rto = |one_way_ms: f64| {
            if !tcp.quick_ack {
                return rshared_all.clone();
            }
            let rtt = Duration::from_millis_f64(2.0 * one_way_ms);
            let opts = ReceiverOptions { idle_rto: idle_rto_after_handshake(rtt, min_rto), ..ropts };
            rshared_by_path
                .entry(rtt.as_nanos())
                .or_insert_with(|| Arc::new(ReceiverShared { cfg: *rcfg, opts }))
                .clone()
        };
        let traffic = traffic_spec(&cfg)?;
        let mux_topology = t.kind == TopologyKind::Mux;
        let tunnel_mode = mux_topology && cfg.mux.mode == MuxMode::Mux;
        // Client-side links: the access links, or the last hop of the mux topology.
        let (client_rate, client_delay) = if mux_topology {
            (t.last_hop_rate_mbps, t.last_hop_delay_ms)
        } else {
            (t.access_rate_mbps, t.access_delay_ms)
        };
        let duration = Instant::from_secs_f64(cfg.scenario.duration_s);
        let stagger = Duration::from_millis_f64(cfg.scenario.start_stagger_ms);
        let separate = cfg.traffic.separate_connections;
        let mut conns = Vec::with_capacity(n as usize * (1 + separate as usize));
        let mut conn_routes = Vec::with_capacity(conns.capacity());
        let mut pairs = Vec::with_capacity(n as usize);
        let mut events = EventQueue::new(WAN_PORTS);
        let middlebox = t.kind == TopologyKind::Middlebox;
        // The middlebox topology: per client its link R2 ↔ client (both directions with
        // the client's own delay), then per server its NIC and R1 → server, shared by
        // the pairs it serves.
        let client_delays = if middlebox { client_delays(t, seed, n)? } else { Vec::new() };
        let servers = match t.servers {
            0 => n.div_ceil(2),
            s => s.min(n),
        };
        let server_base = 2 + 2 * n;
        for i in 0..n {
            let base = ports.len() as u32;
            if middlebox {
                for name in ["r2-to-client", "client-nic"] {
                    let d = client_delays[i as usize];
                    let (link, rest) =
                        port(name, t.access_rate_mbps, d, droptail(access_limits), false, false);
                    ports.push(link);
                    queues.push(rest);
                }
            } else {
                for (name, client_side) in [
                    ("server-nic", false),
                    ("r2-to-client", true),
                    ("client-nic", true),
                    ("r1-to-server", false),
                ] {
                    let (rate, delay) = if client_side {
                        (client_rate, client_delay)
                    } else {
                        (t.access_rate_mbps, t.access_delay_ms)
                    };
                    let (link, rest) = port(name, rate, delay, droptail(access_limits), false, false);
                    ports.push(link);
                    queues.push(rest);
                }
            }
            let start = Instant::ZERO + stagger.saturating_mul(i as u64);
            let mut source = Source::new(&traffic, seed, i, start).map_err(|e| e.0)?;
            let next_starts_flow = source.next_starts_flow();
            let first = source.next_write();
            // In mux mode the stream's own connection is only the last hop edge → client.
            let (role0, routes) = if tunnel_mode {
                (ROLE_LAST_HOP, [[base + 1, NO_PORT, NO_PORT], [base + 2, NO_PORT, NO_PORT]])
            } else if middlebox {
                let server = server_base + 2 * (i % servers);
                (0, [[server, 0, base], [base + 1, 1, server + 1]])
            } else {
                (0, [[base, 0, base + 1], [base + 2, 1, base + 3]])
            };
            let first_conn = conns.len() as u32;
            let path_ms = t.access_delay_ms
                + t.bottleneck_delay_ms
                + if middlebox { client_delays[i as usize] } else { client_delay };
            for role in 0..=separate as u8 {
                conns.push(Conn::new(
                    i,
                    role.max(role0),
                    Sender::new(scfg.clone()),
                    Receiver::with_shared(idle_rto(path_ms)),
                    tunnel_mode,
                ));
                conn_routes.push(routes);
            }
            if let Some(w) = first.filter(|w| w.at < duration) {
                events.push(w.at, Event::AppWrite { pair: i });
            }
            pairs.push(Pair {
                source,
                next_write: first,
                conns: [first_conn, first_conn + separate as u32],
                next_starts_flow,
            });
        }
        if middlebox {
            for _ in 0..servers {
                for name in ["server-nic", "r1-to-server"] {
                    let (link, rest) = port(
                        name,
                        t.access_rate_mbps,
                        t.access_delay_ms,
                        droptail(access_limits),
                        false,
                        false,
                    );
                    ports.push(link);
                    queues.push(rest);
                }
            }
        }
        // Trunk lanes: core host k beside R1 (access link) ↔ R1 ══WAN══ R2 = the edge
        // proxy. Forward connections (core → edge) first, then the reverse ones.
        let tunnel = match tunnel_mode {
            true => Some(Box::new(Tunnel::establish(&cfg.mux, n, conns.len() as u32, seed)?)),
            false => None,
        };
        let mut lane_ports = Vec::new();
        for _ in 0..tunnel.as_ref().map_or(0, |tn| tn.lanes) {
            lane_ports.push(ports.len() as u32);
            for name in ["core-nic", "r1-to-core"] {
                let (link, rest) =
                    port(name, t.access_rate_mbps, t.access_delay_ms, droptail(access_limits), false, false);
                ports.push(link);
                queues.push(rest);
            }
        }
        // The trunk sockets' own options (the daemons' `trunk.thin_linear_timeouts` and
        // `trunk.rto_min_ms`): only the lanes differ from the scenario's TCP, the
        // streams' direct connections do not.
        let mut trunk_cfg = *scfg;
        trunk_cfg.mechanisms.thin_linear_timeouts |= cfg.mux.thin_linear_timeouts;
        if let Some(ms) = cfg.mux.rto_min_ms {
            trunk_cfg.rto.min = Duration::from_millis_f64(ms.into());
        }
        let trunk_cfg = Arc::new(trunk_cfg);
        for (role, reverse) in [(ROLE_TRUNK, false), (ROLE_TRUNK_REV, true)] {
            for (k, &base) in lane_ports.iter().enumerate() {
                let (to_edge, to_core) = ([base, 0, NO_PORT], [1, base + 1, NO_PORT]);
                let routes = if reverse { [to_core, to_edge] } else { [to_edge, to_core] };
                conns.push(Conn::new(
                    k as u32,
                    role,
                    Sender::new(trunk_cfg.clone()),
                    Receiver::with_shared(idle_rto(t.access_delay_ms + t.bottleneck_delay_ms)),
                    false,
                ));
                conn_routes.push(routes);
            }
        }
        let mut links: Vec<Link> = Vec::new();
        for (pt, pq) in ports.iter_mut().zip(&queues) {
            let i = match links.iter().position(|l| (l.rate_bps, l.delay) == (pq.rate_bps, pq.delay)) {
                Some(i) => i,
                None => {
                    let tx = |bytes: u32| Duration::transmission(bytes as u64, pq.rate_bps);
                    let (tx_ack, tx_full) = (tx(tcp.header_bytes), tx(tcp.header_bytes + tcp.mss));
                    links.push(Link { rate_bps: pq.rate_bps, delay: pq.delay, tx_ack, tx_full });
                    links.len() - 1
                }
            };
            pt.link =
                u16::try_from(i).map_err(|_| "topology: more than 65,536 distinct link rates and delays")?;
        }
        let per_pair = 1 + separate as u32;
        let routes =
            match conn_routes.iter().enumerate().all(|(c, r)| *r == dumbbell_route(c as u32, per_pair)) {
                true => Routes::Dumbbell { per_pair },
                false => Routes::Table(conn_routes),
            };
        let mut logged = vec![false; conns.len()];
        for &c in &cfg.records.packet_log_conns {
            if let Some(l) = logged.get_mut(c as usize) {
                *l = true;
            }
        }
        let tracing = cfg.records.traces;
        if tracing {
            events.push(Instant::ZERO, Event::TraceSample);
        }
        let end = Instant::from_secs_f64(cfg.scenario.duration_s + cfg.scenario.drain_s);
        // The QDS loop drives the downlink's class scheduler; its first period ends one
        // period after the start.
        let qds = match bneck {
            QueueSpec::Qds { .. } => {
                let q = qds::Qds::new(&cfg.qds, mbps(t.bottleneck_rate_mbps))?;
                events.push(Instant::ZERO + q.period(), Event::QdsTick);
                Some(Box::new(q))
            }
            _ => None,
        };
        let roles: Vec<(u8, u32)> = conns.iter().map(|c| (c.role, c.pair)).collect();
        let pcap = pcap::PcapTap::new(&cfg, &roles)?;
        let rows_at = vec![0; conns.len()];
        let n_conns = conns.len();
        let prefetch = conns.len() >= PREFETCH_MIN_CONNS;
        let timers = vec![[IDLE; 2]; conns.len()];
        let mut world = World {
            seed,
            now: Instant::ZERO,
            end,
            window: duration,
            events,
            ports,
            links,
            queues,
            pairs,
            conns,
            routes,
            logged,
            slab: Vec::new(),
            rows_at,
            timers,
            free: Vec::new(),
            drop_buf: Vec::new(),
            header: tcp.header_bytes,
            mss: tcp.mss,
            tunnel,
            trace_tcp: tracing && cfg.records.trace_connections == TraceConnections::All,
            trace_interval: Duration::from_millis_f64(cfg.records.trace_interval_ms.max(1e-3)),
            prefetch,
            rtt: (cfg.records.packet_rtt || middlebox || qds.is_some())
                .then(|| Box::new(rtt::RttLog::new(n_conns))),
            qds,
            pcap,
            out: RunRecords::default(),
            cfg,
        };
        if world.tunnel.is_some() {
            world.pump(false);
            world.pump(true);
        }
        Ok(world)
    }
}

/// The loss and jitter of WAN direction `dir` in a run seeded `seed`: the core's
/// [`Impairment`] on the stream of [`LinkDir::stream`], as the lab's link emulator has
/// it (docs/model.md, "Random streams"); `None` when the link has neither, so that an
/// unimpaired link draws no random numbers.
pub fn wan_impairment(cfg: &Config, seed: u64, dir: LinkDir) -> Option<Impairment> {
    let t = &cfg.topology;
    let loss = match dir {
        LinkDir::Fwd => t.bottleneck_loss,
        LinkDir::Rev => t.bottleneck_loss_rev,
    };
    let imp =
        Impairment::new(LossModel::iid(loss), Jitter::uniform_pct(t.bottleneck_jitter_pct), false, seed, dir);
    (!imp.is_none()).then_some(imp)
}

/// First random stream of the middlebox topology's client delays (the core's).
pub use thinwan_proto::clients::CLIENT_DELAY_STREAM;

/// The middlebox topology's per-client base one-way delays, ms: the core's draw
/// ([`thinwan_proto::clients::client_delays_ms`]), which the lab applies too.
pub fn client_delays(t: &crate::config::TopologySec, seed: u64, clients: u32) -> Result<Vec<f64>, String> {
    let law = thinwan_proto::clients::DelayLaw {
        mean_ms: t.client_delay_mean_ms,
        sd_ms: t.client_delay_sd_ms,
        min_ms: t.client_delay_min_ms,
        max_ms: t.client_delay_max_ms,
    };
    thinwan_proto::clients::client_delays_ms(law, seed, clients)
}

/// What every pair's source is built from (calibrated once for all of them).
pub fn traffic_spec(cfg: &Config) -> Result<TrafficSpec, String> {
    let err = |e: ParamError| format!("traffic: {}", e.0);
    Ok(match cfg.traffic.model {
        Model::ThinClient => {
            let params = cfg.traffic.thin_client.params(cfg.tcp.mss).map_err(|e| e.0)?;
            TrafficSpec::ThinClient(Arc::new(Calibrated::new(params).map_err(err)?))
        }
        Model::Game => TrafficSpec::Game(Arc::new(GameCalibrated::new(GameParams::default()).map_err(err)?)),
        Model::Video | Model::Data | Model::Mix => {
            cfg.traffic.apps.spec(cfg.traffic.model, &cfg.traffic.thin_client, cfg.tcp.mss).map_err(err)?
        }
        Model::Pcap => TrafficSpec::Trace(cfg.traffic.trace.clone()),
        Model::Bulk => {
            // Enough 1 MiB writes to keep the bottleneck busy to the end, and one more.
            let t = &cfg.topology;
            let horizon = cfg.scenario.duration_s + cfg.scenario.drain_s;
            let bytes = t.bottleneck_rate_mbps.min(t.access_rate_mbps) * 1e6 / 8.0 * horizon * 1.1;
            let chunks = (bytes / BULK_CHUNK as f64).ceil() as u32 + 1;
            TrafficSpec::Bulk { bytes: BULK_CHUNK, writes: Some(chunks) }
        }
        Model::Constant => return Err("traffic.model: \"constant\" is the lab pump's alone".into()),
    })
}
