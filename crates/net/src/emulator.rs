//! The real-clock driver of the link: one thread per direction, plus a logger thread.
//!
//! Each direction thread owns a [`Direction`] and loops: read every packet waiting on
//! its input TUN (stamped with `CLOCK_MONOTONIC` right after `read`), advance the
//! direction to now, write due packets to the output TUN, then wait until the input is
//! readable or the direction's next deadline ([`clock::wait_readable`]: `ppoll`, then a
//! spin for the last 50 µs). Log records and pcap copies go to the logger thread in one
//! batch per loop turn, so file I/O never delays a packet.
//!
//! With `fwd.queue.discipline = "qds"` both threads feed one [`QdsLoop`] (behind a
//! mutex: `fwd` packets as they arrive, `rev` packets as they are delivered to the
//! server side), and the `fwd` thread, which owns the class scheduler, also wakes for its
//! periods and applies each plan; the period's records go to the logger with the events.

use crate::clock;
use crate::config::LinkConfig;
use crate::evlog::EventWriter;
use crate::link::{Delivery, DirStats, Direction, Event};
use crate::pcap::PcapSide;
use crate::qds::log::{QdsWriter, Record};
use crate::qds::QdsLoop;
use crate::tun::Tun;
use serde::Serialize;
use std::fs::File;
use std::io::{self, BufWriter};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use thinwan_proto::link::LinkDir;
use thinwan_proto::qds::monitor::Toward;
use thinwan_proto::{Duration, Instant};

/// Longest single wait, so a stop request is seen promptly.
const MAX_WAIT: Duration = Duration::from_millis(20);
/// Packets read per loop turn before timers are served again.
const READ_BATCH: usize = 64;
/// Largest frame a TUN hands us (64 KiB IP packets with GSO off).
const MAX_FRAME: usize = 65536;

/// Where the two sides are.
#[derive(Clone, Debug)]
pub struct Side {
    /// TUN interface name.
    pub ifname: String,
    /// Its network namespace (name under /run/netns, or a path); `None` = ours.
    pub netns: Option<String>,
}

/// Everything the emulator needs.
#[derive(Clone, Debug)]
pub struct Options {
    /// Link parameters.
    pub link: LinkConfig,
    /// Server side (input of `fwd`).
    pub server: Side,
    /// Client side (input of `rev`).
    pub client: Side,
    /// Event log file ([`crate::evlog`]).
    pub events: Option<PathBuf>,
    /// Write `server.pcap` and `client.pcap` here.
    pub pcap_dir: Option<PathBuf>,
    /// The QDS log ([`crate::qds::log`]), when `fwd` runs the `qds` discipline.
    pub qds_log: Option<PathBuf>,
}

/// Counters of a finished run.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// Server → client.
    pub fwd: DirStats,
    /// Client → server.
    pub rev: DirStats,
    /// Packets inside the emulator when it stopped (fwd, rev).
    pub in_flight_at_stop: [usize; 2],
    /// Log records written.
    pub events_logged: u64,
    /// QDS control periods run (0 without the `qds` discipline).
    pub qds_periods: u64,
    /// QDS log records written.
    pub qds_logged: u64,
    /// Run length, seconds.
    pub wall_s: f64,
}

/// Attach both TUNs; returns them so the caller can report readiness before [`run`].
pub fn attach(opts: &Options) -> io::Result<(Tun, Tun)> {
    let s = Tun::attach(&opts.server.ifname, opts.server.netns.as_deref())?;
    let c = Tun::attach(&opts.client.ifname, opts.client.netns.as_deref())?;
    Ok((s, c))
}

/// Run until `stop` is set; then flush the logs and return the counters.
pub fn run(opts: &Options, server: Tun, client: Tun, stop: Arc<AtomicBool>) -> io::Result<Report> {
    let started = clock::now();
    let (server, client) = (Arc::new(server), Arc::new(client));
    let (tx, rx) = mpsc::channel::<Batch>();
    let logger = Logger::open(opts)?;
    let log_thread = thread::Builder::new().name("tw-log".into()).spawn(move || logger.run(rx))?;
    let qds = opts
        .link
        .qds_setup()
        .map_err(io::Error::other)?
        .map(|setup| Arc::new(Mutex::new(QdsLoop::new(setup, opts.link.fwd.rate_bps, started))));
    let mut dirs = Vec::new();
    for (index, (input, output, cfg)) in
        [(&server, &client, &opts.link.fwd), (&client, &server, &opts.link.rev)].into_iter().enumerate()
    {
        let dir = if index == 0 { LinkDir::Fwd } else { LinkDir::Rev };
        let d = Direction::new(cfg, opts.link.seed, dir)
            .map_err(io::Error::other)?
            .with_pair_delays(opts.link.pairs.as_ref().and_then(|p| p.delays(dir)));
        let worker = Worker {
            index: index as u8,
            input: Arc::clone(input),
            output: Arc::clone(output),
            dir: d,
            tx: tx.clone(),
            stop: Arc::clone(&stop),
            pcap: opts.pcap_dir.is_some(),
            qds: qds.clone(),
        };
        let name = if index == 0 { "tw-fwd" } else { "tw-rev" };
        dirs.push(thread::Builder::new().name(name.into()).spawn(move || worker.run())?);
    }
    drop(tx);
    let mut results = Vec::new();
    for h in dirs {
        results.push(h.join().map_err(|_| io::Error::other("direction thread panicked"))??);
    }
    let (events_logged, qds_logged) =
        log_thread.join().map_err(|_| io::Error::other("logger thread panicked"))??;
    let qds_periods = qds.as_ref().map_or(0, |q| lock(q).periods());
    let rev = results.pop().expect("two directions");
    let fwd = results.pop().expect("two directions");
    Ok(Report {
        in_flight_at_stop: [fwd.in_flight(), rev.in_flight()],
        fwd: fwd.stats().clone(),
        rev: rev.stats().clone(),
        events_logged,
        qds_periods,
        qds_logged,
        wall_s: (clock::now() - started).as_secs_f64(),
    })
}

/// Log records and pcap copies of one loop turn.
struct Batch {
    dir: u8,
    events: Vec<Event>,
    /// (side: 0 server / 1 client, time, packet).
    packets: Vec<(u8, Instant, Vec<u8>)>,
    /// The QDS periods' records.
    qds: Vec<Record>,
}

/// The QDS loop both direction threads feed.
type SharedQds = Arc<Mutex<QdsLoop>>;

/// The loop, even if the other thread panicked holding it (its state is still whole:
/// no method leaves it half-updated on a panic path we know of, and the run is ending).
fn lock(q: &SharedQds) -> MutexGuard<'_, QdsLoop> {
    q.lock().unwrap_or_else(|e| e.into_inner())
}

struct Worker {
    index: u8,
    input: Arc<Tun>,
    output: Arc<Tun>,
    dir: Direction,
    tx: mpsc::Sender<Batch>,
    stop: Arc<AtomicBool>,
    pcap: bool,
    qds: Option<SharedQds>,
}

impl Worker {
    fn run(mut self) -> io::Result<Direction> {
        clock::tighten_timer_slack();
        let mut buf = vec![0u8; MAX_FRAME];
        let mut due: Vec<Delivery> = Vec::new();
        let mut batch = self.new_batch();
        // Side of the input / output device, for pcap.
        let (in_side, out_side) = if self.index == 0 { (0, 1) } else { (1, 0) };
        while !self.stop.load(Ordering::Relaxed) {
            for _ in 0..READ_BATCH {
                match self.input.recv(&mut buf) {
                    Ok(n) => {
                        let t = clock::now();
                        // Serve deadlines up to the arrival first, so the direction
                        // sees events in time order.
                        self.serve(t, &mut due, &mut batch, out_side);
                        let data = buf[..n].to_vec();
                        // The middlebox sees the downlink's packets before its queue.
                        if let (0, Some(q)) = (self.index, &self.qds) {
                            lock(q).observe(t, Toward::Client, &data);
                        }
                        if self.pcap {
                            batch.packets.push((in_side, t, data.clone()));
                        }
                        self.dir.arrive(t, data, &mut batch.events);
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        return Err(io::Error::new(e.kind(), format!("read {}: {e}", self.input.name())))
                    }
                }
            }
            self.serve(clock::now(), &mut due, &mut batch, out_side);
            let next_period = self.control(&mut batch);
            if !batch.events.is_empty() || !batch.packets.is_empty() || !batch.qds.is_empty() {
                let full = std::mem::replace(&mut batch, self.new_batch());
                // The logger only goes away when the process is stopping.
                let _ = self.tx.send(full);
            }
            let deadline = match (self.dir.poll_timeout(), next_period) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            clock::wait_readable(self.input.as_raw_fd(), deadline, MAX_WAIT)?;
        }
        Ok(self.dir)
    }

    fn serve(&mut self, now: Instant, due: &mut Vec<Delivery>, batch: &mut Batch, out_side: u8) {
        self.dir.handle_timeout(now, due, &mut batch.events);
        for d in due.drain(..) {
            // Stamped just before the write: the write itself runs the receiving
            // host's stack (up to the socket) synchronously, which is the host's time,
            // not the link's.
            let t = clock::now();
            let ok = self.output.send(&d.packet.data).is_ok();
            self.dir.delivered(t, &d, ok, &mut batch.events);
            // ACKs reach the middlebox once they have crossed the uplink.
            if let (1, Some(q), true) = (self.index, &self.qds, ok) {
                lock(q).observe(t, Toward::Server, &d.packet.data);
            }
            if self.pcap && ok {
                batch.packets.push((out_side, t, d.packet.data));
            }
        }
    }

    /// The `fwd` thread runs the QDS periods that are due and applies their plans;
    /// returns when the next one ends (None: not this thread's job).
    fn control(&mut self, batch: &mut Batch) -> Option<Instant> {
        let q = self.qds.as_ref().filter(|_| self.index == 0)?;
        let mut q = lock(q);
        if let Some(p) = q.handle_timeout(clock::now()) {
            p.apply(&mut self.dir, &mut batch.events);
            batch.qds.extend(p.records);
        }
        Some(q.poll_timeout())
    }

    fn new_batch(&self) -> Batch {
        Batch { dir: self.index, events: Vec::new(), packets: Vec::new(), qds: Vec::new() }
    }
}

struct Logger {
    events: Option<EventWriter<BufWriter<File>>>,
    qds: Option<QdsWriter<BufWriter<File>>>,
    pcap: Option<[PcapSide; 2]>,
}

impl Logger {
    fn open(opts: &Options) -> io::Result<Self> {
        let events = match &opts.events {
            Some(p) => Some(EventWriter::new(BufWriter::with_capacity(1 << 20, File::create(p)?))?),
            None => None,
        };
        let qds = match (&opts.qds_log, opts.link.fwd.queue.discipline) {
            (Some(p), thinwan_proto::qdisc::DisciplineName::Qds) => {
                Some(QdsWriter::new(BufWriter::with_capacity(1 << 16, File::create(p)?))?)
            }
            _ => None,
        };
        let pcap = match &opts.pcap_dir {
            Some(dir) => {
                std::fs::create_dir_all(dir)?;
                let off = clock::realtime_offset_ns();
                Some([
                    PcapSide::create(&dir.join("server.pcap"), off)?,
                    PcapSide::create(&dir.join("client.pcap"), off)?,
                ])
            }
            None => None,
        };
        Ok(Logger { events, qds, pcap })
    }

    /// Returns the records written to the event log and to the QDS log.
    fn run(mut self, rx: mpsc::Receiver<Batch>) -> io::Result<(u64, u64)> {
        let (mut n, mut nq) = (0u64, 0u64);
        for b in rx {
            if let Some(w) = self.events.as_mut() {
                for e in &b.events {
                    w.write(b.dir, e)?;
                    n += 1;
                }
            }
            if let Some(w) = self.qds.as_mut() {
                for r in &b.qds {
                    w.write(r)?;
                    nq += 1;
                }
            }
            if let Some(sides) = self.pcap.as_mut() {
                for (side, t, data) in &b.packets {
                    sides[*side as usize].write(*t, data)?;
                }
            }
        }
        if let Some(w) = self.events {
            w.finish()?;
        }
        if let Some(w) = self.qds {
            w.finish()?;
        }
        if let Some([a, b]) = self.pcap {
            a.finish()?;
            b.finish()?;
        }
        Ok((n, nq))
    }
}
