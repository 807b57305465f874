#!/usr/bin/env python3
"""thinwan's dumbbell in ns-3 (3.44, PyPI ``ns3`` cppyy bindings), for cross-checks and speed.

Topology (data flows server -> client, ACKs flow back)::

     server_0 --+                                          +-- client_0
     server_1 --+  access                                  +-- client_1
        ...     +---------- R1 ======================= R2 -+     ...
     server_N-1-+  (rate,      bottleneck (rate, delay)     +-- client_N-1
                   delay,      tail-drop at R1's port
                   1000p)      (and at R2's, same limits)

* Every link is a PointToPoint link. Access links (both ends, both directions) have a
  DropTail device queue of ``--access-queue-packets`` packets. The bottleneck ports
  (R1->R2 and R2->R1) are tail-drop with ``--limit-bytes`` and/or ``--limit-packets``.
* The device queue is the only queue: flow control is disabled on every PointToPoint
  device (``PointToPointHelper::DisableFlowControl``), so ``Ipv4AddressHelper`` installs no
  queue disc, and any root queue disc found is removed (``TrafficControlHelper::Uninstall``).
  A packet that does not fit is dropped by the device queue (its ``Drop`` trace).
* By default the bottleneck limits count IP bytes (IP + TCP header + payload), as thinwan
  does; ns-3's PointToPoint device adds a 2-byte PPP header to every packet before
  queueing, which a stock ``DropTailQueue`` would count (``--stock-queue``).
* TCP: ``TcpNewReno`` congestion control with ``TcpClassicRecovery`` (not PRR), SACK on or
  off, MSS 1460, IW 10, min RTO 200 ms, clock granularity 1 ms, initial RTO 1 s, delayed
  ACK on (every 2nd segment, 40 ms timer) or off (every segment), Nagle off, timestamps
  off, 4 MiB receive buffer, window scaling on, unlimited send buffer. See
  bench/ns3/README.md for every remaining difference (read it before comparing runs
  without SACK: ns-3 has no Reno, and its NewReno recovery is pipe-based).
* ``--scenario-json`` takes the defaults from a validated thinwan scenario, so both
  simulators run the same parameters; settings ns-3 cannot reproduce are listed under
  ``warnings`` in the output.
* Connections are opened (three-way handshake) during a warm-up of ``--warmup-s``
  before scenario time 0; scenario time t is ns-3 time ``warmup + t``. Unless
  ``--keep-handshake-rtt``, each sender's RTT estimator is replaced after the handshake
  so the first RTO is the initial RTO (1 s) as in thinwan, not one derived from the SYN.

Traffic:
  --traffic bulk       greedy sender per pair, starting at i * --stagger-ms.
  --traffic schedule   replay a thinwan messages Parquet (conn, pair, t_write, bytes):
                       one persistent connection per distinct conn (a pair without
                       writes gets none), each write of ``bytes`` is handed to the
                       socket at ``t_write``.

Output: one JSON object on stdout (goodput over [0, duration], per-pair bytes, bottleneck
drops and transmissions, timeouts, ns-3 event count, timings and all parameters).

Example::

    .venv/bin/python bench/ns3/dumbbell.py --pairs 2 --duration 10 --limit-bytes 25000 \\
        --limit-packets 0 --no-sack --delayed-ack off
"""

# Measure from the very start (before the slow ns-3 import).
import time

_T_IMPORT = time.perf_counter()

import argparse
import json
import os
import sys

import numpy as np

EXIT_NO_NS3 = 77  # `from ns import ns` failed (the automake "skipped" code)


def _process_elapsed_s() -> float:
    """Seconds since this process started (kernel start time, 10 ms resolution)."""
    try:
        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        start_ticks = int(fields[19])  # field 22 of stat(5); fields[0] is field 3
        return time.clock_gettime(time.CLOCK_BOOTTIME) - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return time.perf_counter() - _T_IMPORT


# --------------------------------------------------------------------------------------
# C++ part: queue with thinwan's limits, greedy/scheduled source, sink, counters,
# topology. JIT-compiled by cling through cppyy once per process.
# --------------------------------------------------------------------------------------
CPP = r"""
#include <cstdint>
#include <limits>
#include <vector>

namespace thinwan_ns3 {
using namespace ns3;

// Per-pair counters (index = pair).
struct PairStats {
    uint64_t rxWindow = 0;      // application bytes read by the client in [0, duration]
    uint64_t rxTotal = 0;       // ... until the end of the run (incl. drain)
    uint64_t written = 0;       // application bytes handed to the sender socket
    uint32_t timeouts = 0;      // retransmission timeouts (RTO doublings)
    uint32_t recoveries = 0;    // entries into fast recovery
    uint64_t retxSegments = 0;  // retransmitted segments (any cause)
    uint32_t connections = 0;   // connections of this pair
    uint32_t lateWrites = 0;    // writes scheduled before the connection was up
};

// One router output port.
struct PortStats {
    uint64_t drops = 0;
    uint64_t pktsTx = 0;      // transmissions ended inside the window
    uint64_t bytesTx = 0;     // wire bytes (incl. the 2-byte PPP header) inside the window
    uint64_t ipBytesTx = 0;   // the same without the PPP header
    uint64_t maxQBytes = 0;   // largest backlog (device queue bytes, incl. PPP headers)
    uint64_t maxQIpBytes = 0; // the same without PPP headers
    uint64_t maxQPkts = 0;
    Ptr<Queue<Packet>> queue;
};

struct Global {
    std::vector<PairStats> pairs;
    PortStats bottleneck;
    PortStats bottleneckRev;
    uint64_t otherDrops = 0;  // drops in any access-link queue
    uint32_t qdiscsRemoved = 0;
    Time windowStart;         // scenario time 0
    Time windowEnd;           // scenario time duration
};
static Global G;

static const uint32_t kL2 = 2;  // PPP header bytes added by PointToPointNetDevice

// Tail-drop FIFO with thinwan's semantics: a packet limit and/or a byte limit, bytes
// counted at the IP layer (the PPP header is not counted), 0 = no limit.
class ThinwanDropTail : public DropTailQueue<Packet> {
  public:
    uint32_t limitPackets = 0;
    uint64_t limitBytes = 0;
    bool Enqueue(Ptr<Packet> p) override {
        uint64_t n = GetNPackets();
        if (limitPackets && n >= limitPackets) { DropBeforeEnqueue(p); return false; }
        if (limitBytes) {
            uint64_t ipBytes = GetNBytes() - kL2 * n;
            if (ipBytes + (p->GetSize() - kL2) > limitBytes) { DropBeforeEnqueue(p); return false; }
        }
        return DropTailQueue<Packet>::Enqueue(p);
    }
};

static void OnPortDrop(PortStats* s, Ptr<const Packet>) { s->drops++; }
static void OnOtherDrop(Ptr<const Packet>) { G.otherDrops++; }
static void OnPortEnqueue(PortStats* s, Ptr<const Packet>) {
    uint64_t b = s->queue->GetNBytes(), n = s->queue->GetNPackets();
    if (b > s->maxQBytes) s->maxQBytes = b;
    if (b - kL2 * n > s->maxQIpBytes) s->maxQIpBytes = b - kL2 * n;
    if (n > s->maxQPkts) s->maxQPkts = n;
}
static void OnPortTxEnd(PortStats* s, Ptr<const Packet> p) {
    Time now = Simulator::Now();
    if (now > G.windowStart && now <= G.windowEnd) {
        s->pktsTx++;
        s->bytesTx += p->GetSize();
        s->ipBytesTx += p->GetSize() - kL2;
    }
}

// Sender: one TCP connection; greedy (bulk) or replaying a list of timed writes.
class Source : public Application {
  public:
    static TypeId GetTypeId() {
        static TypeId tid = TypeId("thinwan_ns3::Source").SetParent<Application>();
        return tid;
    }
    Address peer;
    uint32_t pair = 0;
    bool bulk = false;
    Time bulkStart;
    uint32_t chunk = 65536;
    bool freshRtt = true;
    uint32_t rcvBuf = 0;
    bool lean = false;            // no per-socket traces (timeouts etc. not counted)
    Time offset;                  // ns-3 time of scenario time 0
    std::vector<double> tWrite;   // scenario seconds, sorted
    std::vector<uint32_t> bytes;

  private:
    Ptr<Socket> m_sock;
    bool m_armed = false;         // count timeouts only once connected
    size_t m_next = 0;
    uint64_t m_backlog = 0;       // written by the app, not yet accepted by the socket
    bool m_bulkOn = false;

    void StartApplication() override {
        m_sock = Socket::CreateSocket(GetNode(), TcpSocketFactory::GetTypeId());
        if (!lean) {
            m_sock->TraceConnectWithoutContext("RTO", MakeCallback(&Source::OnRto, this));
            m_sock->TraceConnectWithoutContext("CongState", MakeCallback(&Source::OnCongState, this));
            m_sock->TraceConnectWithoutContext("Retransmission", MakeCallback(&Source::OnRetx, this));
        }
        m_sock->SetConnectCallback(MakeCallback(&Source::OnConnected, this),
                                   MakeCallback(&Source::OnConnectFailed, this));
        m_sock->SetSendCallback(MakeCallback(&Source::OnSendSpace, this));
        m_sock->Bind();
        m_sock->Connect(peer);
    }
    void StopApplication() override {}

    void OnConnected(Ptr<Socket> s) {
        if (freshRtt) {
            // Forget the SYN/SYN-ACK sample: thinwan's connections start with no RTT
            // sample and RTO = initial RTO (RFC 6298 (2.1)). A fresh estimator has
            // estimate = RttEstimator::InitialEstimation (= initial RTO - G) and variation
            // 0, so RTO = max(est + max(G, 4*0), MinRto) = initial RTO. Growing the receive
            // buffer by one byte makes the socket send a (harmless) window-update ACK,
            // which is where ns-3 recomputes m_rto from the new estimator.
            Ptr<TcpSocketBase> tcp = DynamicCast<TcpSocketBase>(s);
            tcp->SetRtt(CreateObject<RttMeanDeviation>());
            s->SetAttribute("RcvBufSize", UintegerValue(rcvBuf + 1));
        }
        m_armed = true;
        if (bulk) {
            Time d = bulkStart - Simulator::Now();
            if (d.IsNegative()) { G.pairs[pair].lateWrites++; d = Seconds(0); }
            Simulator::Schedule(d, &Source::StartBulk, this);
        } else {
            ScheduleNext();
        }
    }
    void OnConnectFailed(Ptr<Socket>) { NS_FATAL_ERROR("connection failed for pair " << pair); }

    void StartBulk() { m_bulkOn = true; Fill(); }
    void Fill() {
        for (;;) {
            uint32_t a = m_sock->GetTxAvailable();
            if (a == 0) break;
            uint32_t n = std::min(a, chunk);
            if (m_sock->Send(Create<Packet>(n)) < 0) break;
            G.pairs[pair].written += n;
        }
    }

    void ScheduleNext() {
        if (m_next >= tWrite.size()) return;
        Time d = offset + Seconds(tWrite[m_next]) - Simulator::Now();
        if (d.IsNegative()) {
            // Writes < 1 ns apart can round to a time just before the previous one.
            if (d < MicroSeconds(-1)) G.pairs[pair].lateWrites++;
            d = Seconds(0);
        }
        Simulator::Schedule(d, &Source::DoWrite, this);
    }
    void DoWrite() {
        m_backlog += bytes[m_next];
        G.pairs[pair].written += bytes[m_next];
        m_next++;
        Drain();
        ScheduleNext();
    }
    // Hand backlog to the socket; with a limited send buffer the rest waits for space
    // (a blocking write), with the default (4 GiB - 1) it never waits.
    void Drain() {
        while (m_backlog > 0) {
            uint32_t a = m_sock->GetTxAvailable();
            if (a == 0) break;
            uint32_t n = (uint32_t)std::min<uint64_t>(m_backlog, a);
            if (m_sock->Send(Create<Packet>(n)) < 0) break;
            m_backlog -= n;
        }
    }
    void OnSendSpace(Ptr<Socket>, uint32_t) {
        if (m_bulkOn) Fill();
        else if (m_backlog) Drain();
    }

    // ns-3 has no timeout trace; TcpSocketBase::ReTxTimeout doubles m_rto (capped at
    // 60 s), a recomputation from srtt/rttvar essentially never yields exactly 2x.
    void OnRto(Time oldV, Time newV) {
        if (!m_armed) return;
        if (newV == oldV + oldV || (newV == Seconds(60) && oldV >= Seconds(30)))
            G.pairs[pair].timeouts++;
    }
    void OnCongState(TcpSocketState::TcpCongState_t, TcpSocketState::TcpCongState_t n) {
        if (n == TcpSocketState::CA_RECOVERY) G.pairs[pair].recoveries++;
    }
    void OnRetx(Ptr<const Packet>, const TcpHeader&, const Address&, const Address&,
                Ptr<const TcpSocketBase>) {
        G.pairs[pair].retxSegments++;
    }
};

// Receiver: accepts connections and reads everything as soon as it arrives.
class Sink : public Application {
  public:
    static TypeId GetTypeId() {
        static TypeId tid = TypeId("thinwan_ns3::Sink").SetParent<Application>();
        return tid;
    }
    uint16_t port = 5000;
    uint32_t pair = 0;

  private:
    Ptr<Socket> m_listen;
    std::vector<Ptr<Socket>> m_accepted;
    void StartApplication() override {
        m_listen = Socket::CreateSocket(GetNode(), TcpSocketFactory::GetTypeId());
        m_listen->Bind(InetSocketAddress(Ipv4Address::GetAny(), port));
        m_listen->Listen();
        m_listen->SetAcceptCallback(MakeNullCallback<bool, Ptr<Socket>, const Address&>(),
                                    MakeCallback(&Sink::OnAccept, this));
    }
    void StopApplication() override {}
    void OnAccept(Ptr<Socket> s, const Address&) {
        s->SetRecvCallback(MakeCallback(&Sink::OnRecv, this));
        m_accepted.push_back(s);
    }
    void OnRecv(Ptr<Socket> s) {
        Ptr<Packet> p;
        while ((p = s->Recv()) && p->GetSize() > 0) {
            uint32_t n = p->GetSize();
            G.pairs[pair].rxTotal += n;
            if (Simulator::Now() <= G.windowEnd) G.pairs[pair].rxWindow += n;
        }
    }
};

struct Params {
    uint32_t pairs = 10;
    uint64_t accessRateBps = 100000000;
    double accessDelayS = 0.001;
    uint32_t accessQueuePackets = 1000;
    uint64_t bnRateBps = 10000000;
    double bnDelayS = 0.020;
    uint64_t limitBytes = 0;
    uint32_t limitPackets = 1000;
    bool stockQueue = false;
    double warmupS = 1.0;
    double durationS = 60.0;
    double drainS = 0.0;
    double staggerS = 0.00025;
    bool bulk = true;
    uint32_t chunk = 65536;
    bool freshRtt = true;
    uint32_t rcvBuf = 4194304;
    bool lean = false;
};

static NodeContainer gServers, gClients, gRouters;
static std::vector<Ipv4Address> gClientAddr;

static void AttachPortTraces(Ptr<NetDevice> dev, PortStats* s, bool lean) {
    Ptr<PointToPointNetDevice> p2p = DynamicCast<PointToPointNetDevice>(dev);
    s->queue = p2p->GetQueue();
    s->queue->TraceConnectWithoutContext("Drop", MakeBoundCallback(&OnPortDrop, s));
    if (lean) return;
    s->queue->TraceConnectWithoutContext("Enqueue", MakeBoundCallback(&OnPortEnqueue, s));
    p2p->TraceConnectWithoutContext("PhyTxEnd", MakeBoundCallback(&OnPortTxEnd, s));
}

static Ptr<Queue<Packet>> MakeBottleneckQueue(const Params& P) {
    if (P.stockQueue) {
        Ptr<DropTailQueue<Packet>> q = CreateObject<DropTailQueue<Packet>>();
        q->SetMaxSize(P.limitBytes ? QueueSize(QueueSizeUnit::BYTES, (uint32_t)P.limitBytes)
                                   : QueueSize(QueueSizeUnit::PACKETS, P.limitPackets));
        return q;
    }
    Ptr<ThinwanDropTail> q = CreateObject<ThinwanDropTail>();
    q->SetMaxSize(QueueSize(QueueSizeUnit::PACKETS, std::numeric_limits<uint32_t>::max()));
    q->limitPackets = P.limitPackets;
    q->limitBytes = P.limitBytes;
    return q;
}

// Build nodes, links, addresses, routes and the sinks. Sources are added afterwards
// (AddSource) because their traffic comes from Python.
void Build(const Params& P) {
    G = Global();
    G.pairs.assign(P.pairs, PairStats());
    G.windowStart = Seconds(P.warmupS);
    G.windowEnd = Seconds(P.warmupS + P.durationS);

    gServers.Create(P.pairs);
    gClients.Create(P.pairs);
    gRouters.Create(2);
    InternetStackHelper stack;
    stack.Install(gServers);
    stack.Install(gClients);
    stack.Install(gRouters);

    PointToPointHelper access;
    access.SetDeviceAttribute("DataRate", DataRateValue(DataRate(P.accessRateBps)));
    access.SetChannelAttribute("Delay", TimeValue(Seconds(P.accessDelayS)));
    access.SetQueue("ns3::DropTailQueue<Packet>", "MaxSize",
                    QueueSizeValue(QueueSize(QueueSizeUnit::PACKETS, P.accessQueuePackets)));
    access.DisableFlowControl();

    PointToPointHelper bn;
    bn.SetDeviceAttribute("DataRate", DataRateValue(DataRate(P.bnRateBps)));
    bn.SetChannelAttribute("Delay", TimeValue(Seconds(P.bnDelayS)));
    bn.DisableFlowControl();

    Ipv4AddressHelper addr;
    addr.SetBase("10.0.0.0", "255.255.255.0");
    NetDeviceContainer all;

    NetDeviceContainer core = bn.Install(gRouters.Get(0), gRouters.Get(1));
    DynamicCast<PointToPointNetDevice>(core.Get(0))->SetQueue(MakeBottleneckQueue(P));
    DynamicCast<PointToPointNetDevice>(core.Get(1))->SetQueue(MakeBottleneckQueue(P));
    addr.Assign(core);
    addr.NewNetwork();
    all.Add(core);

    gClientAddr.clear();
    for (uint32_t i = 0; i < P.pairs; ++i) {
        NetDeviceContainer s = access.Install(gServers.Get(i), gRouters.Get(0));
        addr.Assign(s);
        addr.NewNetwork();
        NetDeviceContainer c = access.Install(gRouters.Get(1), gClients.Get(i));
        Ipv4InterfaceContainer ci = addr.Assign(c);
        addr.NewNetwork();
        gClientAddr.push_back(ci.GetAddress(1));
        all.Add(s);
        all.Add(c);
    }

    // The device queue must be the only queue: remove any root queue disc (none is
    // installed when flow control is disabled, but check rather than assume).
    TrafficControlHelper tch;
    for (uint32_t i = 0; i < all.GetN(); ++i) {
        Ptr<NetDevice> d = all.Get(i);
        Ptr<TrafficControlLayer> tc = d->GetNode()->GetObject<TrafficControlLayer>();
        if (tc && tc->GetRootQueueDiscOnDevice(d)) {
            tch.Uninstall(d);
            G.qdiscsRemoved++;
        }
    }

    Ipv4GlobalRoutingHelper::PopulateRoutingTables();

    AttachPortTraces(core.Get(0), &G.bottleneck, P.lean);
    AttachPortTraces(core.Get(1), &G.bottleneckRev, P.lean);
    for (uint32_t i = 2; i < all.GetN(); ++i) {
        Ptr<PointToPointNetDevice> p2p = DynamicCast<PointToPointNetDevice>(all.Get(i));
        p2p->GetQueue()->TraceConnectWithoutContext("Drop", MakeCallback(&OnOtherDrop));
    }

    for (uint32_t i = 0; i < P.pairs; ++i) {
        Ptr<Sink> sink = CreateObject<Sink>();
        sink->pair = i;
        gClients.Get(i)->AddApplication(sink);
        sink->SetStartTime(Seconds(0));
    }
}

// One connection on pair `pair`; writes (scenario seconds, bytes) or bulk if n == 0 and
// P.bulk. Sources connect at t = 0 (after the sinks listen, same instant, added later).
void AddSource(const Params& P, uint32_t pair, const double* t, const uint32_t* b, size_t n) {
    Ptr<Source> src = CreateObject<Source>();
    src->peer = InetSocketAddress(gClientAddr[pair], 5000);
    src->pair = pair;
    src->bulk = P.bulk;
    src->bulkStart = Seconds(P.warmupS + pair * P.staggerS);
    src->chunk = P.chunk;
    src->freshRtt = P.freshRtt;
    src->rcvBuf = P.rcvBuf;
    src->lean = P.lean;
    src->offset = Seconds(P.warmupS);
    src->tWrite.assign(t, t + n);
    src->bytes.assign(b, b + n);
    gServers.Get(pair)->AddApplication(src);
    src->SetStartTime(Seconds(0));
    G.pairs[pair].connections++;
}

const Global& Stats() { return G; }
}  // namespace thinwan_ns3
"""


# --------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------
def scenario_defaults(cfg: dict) -> tuple[dict, list[str]]:
    """Map a validated thinwan scenario (docs/scenario.md; the JSON handed to the native
    simulator, or meta.json's `config`) to this script's option defaults.

    Returns (defaults, warnings): warnings name every setting ns-3 cannot reproduce."""
    warn = []
    sc, topo = cfg.get("scenario", {}), cfg.get("topology", {})
    q, tcp, tr = cfg.get("queue", {}), cfg.get("tcp", {}), cfg.get("traffic", {})
    d = {}

    def put(opt, section, key, conv=lambda v: v):
        if key in section:
            d[opt] = conv(section[key])

    put("duration", sc, "duration_s", float)
    put("drain", sc, "drain_s", float)
    put("stagger_ms", sc, "start_stagger_ms", float)
    put("seed", sc, "seed", int)
    if topo.get("kind", "dumbbell") != "dumbbell":
        warn.append(f"topology.kind = {topo.get('kind')!r}: only the dumbbell is modelled")
    put("pairs", topo, "pairs", int)
    put("access_rate_mbps", topo, "access_rate_mbps", float)
    put("access_delay_ms", topo, "access_delay_ms", float)
    put("access_queue_packets", topo, "access_queue_packets", int)
    put("bottleneck_rate_mbps", topo, "bottleneck_rate_mbps", float)
    put("bottleneck_delay_ms", topo, "bottleneck_delay_ms", float)
    if q.get("discipline", "droptail") != "droptail":
        warn.append(f"queue.discipline = {q.get('discipline')!r}: ns-3 side is drop-tail")
    put("limit_bytes", q, "limit_bytes", int)
    put("limit_packets", q, "limit_packets", int)
    put("recovery", tcp, "recovery", str)
    put("sack", tcp, "sack", bool)
    put("mss", tcp, "mss", int)
    put("initial_cwnd", tcp, "initial_cwnd_segments", int)
    put("nagle", tcp, "nagle", bool)
    put("delayed_ack", tcp, "delayed_ack", lambda v: "on" if v else "off")
    put("delayed_ack_ms", tcp, "delayed_ack_ms", float)
    put("min_rto_ms", tcp, "min_rto_ms", float)
    put("initial_rto_ms", tcp, "initial_rto_ms", float)
    put("clock_granularity_ms", tcp, "clock_granularity_ms", float)
    put("rwnd_bytes", tcp, "rwnd_bytes", int)
    put("sndbuf_bytes", tcp, "send_buffer_bytes", int)
    put("dupthresh", tcp, "dupthresh", int)
    if tcp.get("header_bytes", 40) != 40:
        warn.append(
            f"tcp.header_bytes = {tcp['header_bytes']}: ns-3 sends 20 B IP + 20 B TCP (+ options) and cannot change it"
        )
    if float(tcp.get("max_rto_ms", 60000.0)) != 60000.0:
        warn.append(f"tcp.max_rto_ms = {tcp['max_rto_ms']}: ns-3 caps the RTO at 60 s (fixed)")
    if tcp.get("slow_start_restart", False):
        warn.append(
            "tcp.slow_start_restart = true: ns-3's TcpNewReno never restarts slow "
            "start after idle (only matters for traffic with idle periods)"
        )
    if tcp.get("recovery") == "reno" and not tcp.get("sack", True):
        warn.append(
            "tcp.recovery = 'reno': ns-3 has no Reno recovery and runs NewReno (partial ACKs keep it in fast recovery)"
        )
    if tr.get("model", "thin-client") == "bulk":
        d["traffic"] = "bulk"
    else:
        d["traffic"] = "schedule"
    known = {"scenario", "topology", "queue", "tcp", "traffic", "records"}
    for k in cfg:
        if k not in known:
            warn.append(f"[{k}] is not modelled on the ns-3 side")
    return d, warn


def parse_args(argv=None) -> argparse.Namespace:
    class Fmt(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
        pass

    p = argparse.ArgumentParser(
        description=__doc__,
        epilog="Defaults follow thinwan's docs/scenario.md. See bench/ns3/README.md.",
        formatter_class=Fmt,
    )
    g = p.add_argument_group("topology")
    g.add_argument("--pairs", type=int, default=10, help="server->client pairs")
    g.add_argument("--access-rate-mbps", type=float, default=100.0, help="every access link")
    g.add_argument("--access-delay-ms", type=float, default=1.0, help="one-way, each access link")
    g.add_argument(
        "--access-queue-packets", type=int, default=1000, help="DropTail limit of every access-link device queue"
    )
    g.add_argument("--bottleneck-rate-mbps", type=float, default=10.0, help="R1<->R2")
    g.add_argument("--bottleneck-delay-ms", type=float, default=20.0, help="one-way R1<->R2")
    g = p.add_argument_group("bottleneck queue (R1->R2 and R2->R1)")
    g.add_argument("--limit-bytes", type=int, default=0, help="tail-drop byte limit (IP bytes), 0 = none")
    g.add_argument("--limit-packets", type=int, default=1000, help="tail-drop packet limit, 0 = none")
    g.add_argument(
        "--stock-queue",
        action="store_true",
        help="use ns-3's DropTailQueue<Packet> (one limit only; a byte limit then "
        "also counts the 2-byte PPP header of every packet)",
    )
    g = p.add_argument_group("TCP")
    g.add_argument(
        "--recovery",
        choices=["newreno", "reno"],
        default="newreno",
        help="loss recovery without SACK; ns-3 always does NewReno partial-ACK "
        "handling (TcpClassicRecovery), so 'reno' is accepted but runs NewReno",
    )
    g.add_argument(
        "--sack", action=argparse.BooleanOptionalAction, default=True, help="SACK option and RFC 6675 recovery"
    )
    g.add_argument("--mss", type=int, default=1460, help="segment size (payload bytes)")
    g.add_argument("--initial-cwnd", type=int, default=10, help="initial window, segments")
    g.add_argument(
        "--nagle",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="Nagle's algorithm (ns-3 TcpNoDelay = not nagle)",
    )
    g.add_argument(
        "--delayed-ack",
        choices=["on", "off"],
        default="on",
        help="on = ACK every 2nd segment or after --delayed-ack-ms; off = every segment",
    )
    g.add_argument("--delayed-ack-ms", type=float, default=40.0, help="delayed-ACK timer")
    g.add_argument("--min-rto-ms", type=float, default=200.0, help="MinRto")
    g.add_argument(
        "--initial-rto-ms", type=float, default=1000.0, help="RTO before the first sample (see --keep-handshake-rtt)"
    )
    g.add_argument("--clock-granularity-ms", type=float, default=1.0, help="G of RFC 6298")
    g.add_argument("--dupthresh", type=int, default=3, help="ReTxThreshold")
    g.add_argument(
        "--limited-transmit",
        choices=["auto", "on", "off"],
        default="auto",
        help="RFC 3042 limited transmit without SACK (ns-3's default is on; "
        "thinwan's documented model does not have it). auto = off for bulk "
        "traffic, on for --traffic schedule without SACK: there ns-3 3.44 aborts "
        "(NS_ASSERT in SendPendingData) when an application write is sent while "
        "in CA_DISORDER with limited transmit off",
    )
    g.add_argument("--rwnd-bytes", type=int, default=4194304, help="receive buffer (RcvBufSize)")
    g.add_argument(
        "--sndbuf-bytes",
        type=int,
        default=0,
        help="send buffer; 0 = unlimited (schedule: 4 GiB-1; bulk: rwnd + 1 MiB, "
        "which never limits the window since in-flight <= rwnd)",
    )
    g.add_argument(
        "--timestamps",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="TCP timestamps option (adds 12 bytes to every segment)",
    )
    g.add_argument(
        "--data-retries",
        type=int,
        default=1000,
        help="RTOs in a row before ns-3 aborts a connection (thinwan never aborts)",
    )
    g.add_argument(
        "--keep-handshake-rtt",
        action="store_true",
        help="keep the RTT sample ns-3 takes from the SYN/SYN-ACK exchange "
        "(default: reset the estimator so the first RTO is --initial-rto-ms)",
    )
    g = p.add_argument_group("traffic and time")
    g.add_argument("--traffic", choices=["bulk", "schedule"], default="bulk")
    g.add_argument(
        "--schedule",
        metavar="FILE",
        help="thinwan messages Parquet (conn, pair, t_write, bytes) for --traffic schedule",
    )
    g.add_argument(
        "--duration", type=float, default=60.0, help="seconds of traffic; goodput is measured over [0, duration]"
    )
    g.add_argument(
        "--drain", type=float, default=0.0, help="extra seconds simulated after the duration (thinwan drain_s)"
    )
    g.add_argument("--stagger-ms", type=float, default=0.25, help="bulk: pair i starts at i * stagger")
    g.add_argument("--warmup-s", type=float, default=1.0, help="connection set-up time before scenario time 0")
    g.add_argument("--bulk-chunk", type=int, default=65536, help="bytes per Send() of the greedy source")
    g.add_argument("--seed", type=int, default=1, help="ns-3 RngSeedManager seed (this model draws no random numbers)")
    g.add_argument("--run", type=int, default=0, help="ns-3 RngSeedManager run")
    g.add_argument(
        "--lean",
        action="store_true",
        help="no per-packet/per-socket statistics traces (to time ns-3 itself): "
        "bottleneck packets_tx, queue maxima, timeouts, recoveries and "
        "retransmissions read 0; goodput and drops are still counted",
    )
    p.add_argument(
        "--scenario-json",
        metavar="FILE",
        help="a validated thinwan scenario (JSON as given to the native simulator, "
        "or a run's meta.json, whose `config` is used): its values become the "
        "defaults, explicit options still override them",
    )
    pre, _ = p.parse_known_args(argv)
    a_warn = []
    if pre.scenario_json:
        with open(pre.scenario_json) as f:
            cfg = json.load(f)
        if "config" in cfg and "topology" not in cfg:
            cfg = cfg["config"]
        defaults, a_warn = scenario_defaults(cfg)
        p.set_defaults(**defaults)
    a = p.parse_args(argv)
    a.warnings = a_warn
    if a.limit_bytes <= 0 and a.limit_packets <= 0:
        p.error("at least one of --limit-bytes, --limit-packets must be > 0")
    if a.stock_queue and a.limit_bytes > 0 and a.limit_packets > 0:
        p.error("--stock-queue supports one limit only")
    if a.traffic == "schedule" and not a.schedule:
        p.error("--traffic schedule needs --schedule FILE")
    if a.pairs < 1:
        p.error("--pairs must be >= 1")
    if a.limited_transmit == "auto":
        a.limited_transmit = "on" if (a.traffic == "schedule" and not a.sack) else "off"
    elif a.limited_transmit == "off" and a.traffic == "schedule" and not a.sack:
        print(
            "warning: --limited-transmit off with --no-sack and --traffic schedule can hit "
            "ns-3's NS_ASSERT(congState != CA_DISORDER)",
            file=sys.stderr,
        )
    if a.clock_granularity_ms > a.initial_rto_ms:
        p.error("--clock-granularity-ms must not exceed --initial-rto-ms")
    return a


def load_schedule(path: str, pairs: int):
    """Per connection: (pair, t_write array, bytes array), sorted by time."""
    import pyarrow.parquet as pq

    t = pq.read_table(path, columns=["conn", "pair", "t_write", "bytes"])
    conn = t.column("conn").to_numpy().astype(np.int64)
    pair = t.column("pair").to_numpy().astype(np.int64)
    tw = t.column("t_write").to_numpy().astype(np.float64)
    nb = t.column("bytes").to_numpy().astype(np.uint32)
    if len(conn) and pair.max() >= pairs:
        raise SystemExit(f"{path}: pair {pair.max()} >= --pairs {pairs}")
    order = np.lexsort((tw, conn))
    conn, pair, tw, nb = conn[order], pair[order], tw[order], nb[order]
    out = []
    for c in np.unique(conn):
        lo, hi = np.searchsorted(conn, [c, c + 1])
        ps = np.unique(pair[lo:hi])
        if len(ps) != 1:
            raise SystemExit(f"{path}: conn {c} appears on several pairs {ps.tolist()}")
        out.append((int(ps[0]), np.ascontiguousarray(tw[lo:hi]), np.ascontiguousarray(nb[lo:hi])))
    return out


def configure_tcp(ns, a) -> dict:
    """Config::SetDefault for every TCP knob; returns what was set (for the JSON)."""
    sndbuf = a.sndbuf_bytes
    if sndbuf == 0:
        sndbuf = (2**32 - 1) if a.traffic == "schedule" else a.rwnd_bytes + (1 << 20)
    g_s = a.clock_granularity_ms / 1000.0
    settings = {
        "ns3::TcpL4Protocol::SocketType": ns.TypeIdValue(ns.TcpNewReno.GetTypeId()),
        "ns3::TcpL4Protocol::RecoveryType": ns.TypeIdValue(ns.TcpClassicRecovery.GetTypeId()),
        "ns3::TcpL4Protocol::RttEstimatorType": ns.TypeIdValue(ns.RttMeanDeviation.GetTypeId()),
        "ns3::TcpSocket::SegmentSize": ns.UintegerValue(a.mss),
        "ns3::TcpSocket::InitialCwnd": ns.UintegerValue(a.initial_cwnd),
        "ns3::TcpSocket::SndBufSize": ns.UintegerValue(sndbuf),
        "ns3::TcpSocket::RcvBufSize": ns.UintegerValue(a.rwnd_bytes),
        "ns3::TcpSocket::DelAckCount": ns.UintegerValue(2 if a.delayed_ack == "on" else 1),
        "ns3::TcpSocket::DelAckTimeout": ns.TimeValue(ns.Seconds(a.delayed_ack_ms / 1000.0)),
        "ns3::TcpSocket::TcpNoDelay": ns.BooleanValue(not a.nagle),
        "ns3::TcpSocket::DataRetries": ns.UintegerValue(a.data_retries),
        "ns3::TcpSocketBase::Sack": ns.BooleanValue(a.sack),
        "ns3::TcpSocketBase::Timestamp": ns.BooleanValue(a.timestamps),
        "ns3::TcpSocketBase::WindowScaling": ns.BooleanValue(True),
        "ns3::TcpSocketBase::MinRto": ns.TimeValue(ns.Seconds(a.min_rto_ms / 1000.0)),
        "ns3::TcpSocketBase::ClockGranularity": ns.TimeValue(ns.Seconds(g_s)),
        "ns3::TcpSocketBase::ReTxThreshold": ns.UintegerValue(a.dupthresh),
        "ns3::TcpSocketBase::LimitedTransmit": ns.BooleanValue(a.limited_transmit == "on"),
        # RTO before the first sample = InitialEstimation + max(G, 4 * 0).
        "ns3::RttEstimator::InitialEstimation": ns.TimeValue(ns.Seconds(a.initial_rto_ms / 1000.0 - g_s)),
    }
    for k, v in settings.items():
        ns.Config.SetDefault(k, v)
    return {
        "SocketType": "ns3::TcpNewReno",
        "RecoveryType": "ns3::TcpClassicRecovery",
        "SegmentSize": a.mss,
        "InitialCwnd": a.initial_cwnd,
        "SndBufSize": sndbuf,
        "RcvBufSize": a.rwnd_bytes,
        "DelAckCount": 2 if a.delayed_ack == "on" else 1,
        "DelAckTimeout_ms": a.delayed_ack_ms,
        "TcpNoDelay": not a.nagle,
        "DataRetries": a.data_retries,
        "Sack": a.sack,
        "Timestamp": a.timestamps,
        "WindowScaling": True,
        "MinRto_ms": a.min_rto_ms,
        "ClockGranularity_ms": a.clock_granularity_ms,
        "ReTxThreshold": a.dupthresh,
        "LimitedTransmit": a.limited_transmit == "on",
        "InitialEstimation_ms": a.initial_rto_ms - a.clock_granularity_ms,
        "MaxRto_ms": 60000.0,  # hard-coded in TcpSocketBase::ReTxTimeout
    }


def main(argv=None) -> int:
    a = parse_args(argv)
    schedule = load_schedule(a.schedule, a.pairs) if a.traffic == "schedule" else None

    try:
        import cppyy
        from ns import ns  # slow: loads every ns-3 library and its headers
    except ImportError as e:  # tests skip on this exit code
        print(f"ns-3 Python bindings unavailable: {e}", file=sys.stderr)
        return EXIT_NO_NS3

    cppyy.cppdef(CPP)
    T = cppyy.gbl.thinwan_ns3

    ns.RngSeedManager.SetSeed(a.seed)
    ns.RngSeedManager.SetRun(a.run)
    tcp_attrs = configure_tcp(ns, a)

    P = T.Params()
    P.pairs = a.pairs
    P.accessRateBps = int(round(a.access_rate_mbps * 1e6))
    P.accessDelayS = a.access_delay_ms / 1000.0
    P.accessQueuePackets = a.access_queue_packets
    P.bnRateBps = int(round(a.bottleneck_rate_mbps * 1e6))
    P.bnDelayS = a.bottleneck_delay_ms / 1000.0
    P.limitBytes = a.limit_bytes
    P.limitPackets = a.limit_packets
    P.stockQueue = a.stock_queue
    P.warmupS = a.warmup_s
    P.durationS = a.duration
    P.drainS = a.drain
    P.staggerS = a.stagger_ms / 1000.0
    P.bulk = a.traffic == "bulk"
    P.chunk = a.bulk_chunk
    P.freshRtt = not a.keep_handshake_rtt
    P.rcvBuf = a.rwnd_bytes
    P.lean = a.lean

    T.Build(P)
    empty_t = np.zeros(1, dtype=np.float64)
    empty_b = np.zeros(1, dtype=np.uint32)
    n_writes = 0
    if schedule is None:
        for i in range(a.pairs):
            T.AddSource(P, i, empty_t, empty_b, 0)
    else:
        for pair, tw, nb in schedule:
            T.AddSource(P, pair, tw, nb, len(tw))
            n_writes += len(tw)

    end_s = a.warmup_s + a.duration + a.drain
    ns.Simulator.Stop(ns.Seconds(end_s))
    setup_s = _process_elapsed_s()
    t0 = time.perf_counter()
    ns.Simulator.Run()
    run_s = time.perf_counter() - t0
    events = int(ns.Simulator.GetEventCount())

    S = T.Stats()
    pairs = [S.pairs[i] for i in range(a.pairs)]
    rx_window = [int(p.rxWindow) for p in pairs]
    rx_total = [int(p.rxTotal) for p in pairs]

    def port(s):
        return {
            "drops": int(s.drops),
            "packets_tx": int(s.pktsTx),
            "bytes_tx_wire": int(s.bytesTx),
            "bytes_tx_ip": int(s.ipBytesTx),
            "max_queue_bytes_wire": int(s.maxQBytes),
            "max_queue_bytes_ip": int(s.maxQIpBytes),
            "max_queue_packets": int(s.maxQPkts),
        }

    result = {
        "simulator": "ns-3",
        "ns3_version": "3.44",
        "goodput_bps": sum(rx_window) * 8.0 / a.duration,
        "received_bytes_per_pair": rx_window,
        "received_bytes_per_pair_incl_drain": rx_total,
        "written_bytes_per_pair": [int(p.written) for p in pairs],
        "bottleneck_drops": int(S.bottleneck.drops),
        "bottleneck_packets_tx": int(S.bottleneck.pktsTx),
        "bottleneck_utilisation_ip": S.bottleneck.ipBytesTx * 8.0 / (a.bottleneck_rate_mbps * 1e6 * a.duration),
        "bottleneck": port(S.bottleneck),
        "bottleneck_rev": port(S.bottleneckRev),
        "access_drops": int(S.otherDrops),
        "timeouts": sum(int(p.timeouts) for p in pairs),
        "timeouts_per_pair": [int(p.timeouts) for p in pairs],
        "fast_recoveries": sum(int(p.recoveries) for p in pairs),
        "retransmitted_segments": sum(int(p.retxSegments) for p in pairs),
        "connections": sum(int(p.connections) for p in pairs),
        "writes": n_writes,
        "late_writes": sum(int(p.lateWrites) for p in pairs),
        "qdiscs_removed": int(S.qdiscsRemoved),
        "events": events,
        "sim_time_s": end_s,
        "run_s": run_s,
        "setup_s": setup_s,
        "warnings": a.warnings,
        "params": {k: v for k, v in vars(a).items() if k != "warnings"},
        "tcp_attributes": tcp_attrs,
    }
    ns.Simulator.Destroy()
    result["total_s"] = _process_elapsed_s()
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
