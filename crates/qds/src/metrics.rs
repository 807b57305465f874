//! Prometheus metrics (OpenMetrics text at `GET /metrics`) from a small `std::net`
//! listener thread. The daemon's loop writes the atomics; the thread only encodes.
//! Every metric is listed in docs/qds-lab.md.

use std::io::{self, BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

type Labels = Vec<(&'static str, String)>;

/// The daemon's metrics.
pub struct Metrics {
    registry: Registry,
    /// Packets taken from the capture sockets, by direction (`to_client`, `to_server`).
    pub packets: Family<Labels, Counter>,
    /// Managed flows per class (label `class` = index).
    pub flows: Family<Labels, Gauge>,
    /// Managed flows per application type.
    pub flows_by_type: Family<Labels, Gauge>,
    /// Guaranteed rate of each class, bits/s.
    pub class_rate: Family<Labels, Gauge<f64, AtomicU64>>,
    /// Estimated flow RTTs (seconds), one observation per flow per period.
    pub rtt: Histogram,
    /// Latency of one netlink update (all class rates and filter changes), seconds.
    pub update_latency: Histogram,
    /// Requests the kernel refused.
    pub netlink_errors: Counter,
    /// Installed u32 filters.
    pub filters: Gauge,
}

impl Metrics {
    /// A registry with every metric registered.
    pub fn new() -> Arc<Metrics> {
        let mut registry = Registry::with_prefix("thinwan_qds");
        let packets = Family::<Labels, Counter>::default();
        let flows = Family::<Labels, Gauge>::default();
        let flows_by_type = Family::<Labels, Gauge>::default();
        let class_rate = Family::<Labels, Gauge<f64, AtomicU64>>::default();
        // 1 ms … ~1 s in 16 steps of ×1.58: QTs are 50–100 ms.
        let rtt = Histogram::new(exponential_buckets(0.001, 1.585, 16));
        // 50 µs … ~100 ms: the target is < 5 ms.
        let update_latency = Histogram::new(exponential_buckets(0.000_05, 1.6, 17));
        let netlink_errors = Counter::default();
        let filters = Gauge::default();
        registry.register("packets", "Packets captured, by direction", packets.clone());
        registry.register("flows", "Managed flows per QDS class", flows.clone());
        registry.register("flows_by_type", "Managed flows per application type", flows_by_type.clone());
        registry.register(
            "class_rate_bits_per_second",
            "Guaranteed HTB rate of each class",
            class_rate.clone(),
        );
        registry.register(
            "flow_rtt_seconds",
            "Estimated flow RTT, one sample per flow per period",
            rtt.clone(),
        );
        registry.register(
            "update_seconds",
            "Latency of one netlink update of all class rates and filters",
            update_latency.clone(),
        );
        registry.register("netlink_errors", "Netlink requests the kernel refused", netlink_errors.clone());
        registry.register("filters", "Installed u32 flow filters", filters.clone());
        Arc::new(Metrics {
            registry,
            packets,
            flows,
            flows_by_type,
            class_rate,
            rtt,
            update_latency,
            netlink_errors,
            filters,
        })
    }

    /// The OpenMetrics text.
    pub fn render(&self) -> String {
        let mut s = String::new();
        // Writing to a String cannot fail.
        let _ = encode(&mut s, &self.registry);
        s
    }

    /// Serve `GET /metrics` on `listener` from a background thread.
    pub fn serve(self: &Arc<Self>, listener: TcpListener) {
        let me = Arc::clone(self);
        std::thread::Builder::new()
            .name("metrics".into())
            .spawn(move || {
                for conn in listener.incoming().flatten() {
                    // One slow client must not stall the next scrape for long.
                    let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
                    let _ = me.answer(conn);
                }
            })
            .map(drop)
            .unwrap_or_else(|e| eprintln!("thinwan-qds: metrics thread: {e}"));
    }

    fn answer(&self, conn: TcpStream) -> io::Result<()> {
        let mut r = BufReader::new(conn);
        let mut line = String::new();
        r.read_line(&mut line)?;
        // Skip the request headers.
        let mut h = String::new();
        while r.read_line(&mut h)? > 2 {
            h.clear();
        }
        let mut w = r.into_inner();
        let path = line.split_whitespace().nth(1).unwrap_or("");
        if path == "/metrics" || path == "/" {
            let body = self.render();
            write!(
                w,
                "HTTP/1.1 200 OK\r\nContent-Type: application/openmetrics-text; version=1.0.0; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            )
        } else {
            w.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        }
    }
}

/// Bind the metrics address (before the interface is touched, so a taken port fails
/// early).
pub fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    TcpListener::bind(addr)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn scrape_over_http() {
        let m = Metrics::new();
        m.packets.get_or_create(&vec![("direction", "to_client".into())]).inc_by(5);
        m.update_latency.observe(0.001);
        let l = bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = l.local_addr().unwrap();
        m.serve(l);
        let mut c = TcpStream::connect(addr).unwrap();
        c.write_all(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
        let mut s = String::new();
        c.read_to_string(&mut s).unwrap();
        assert!(s.starts_with("HTTP/1.1 200"), "{s}");
        assert!(s.contains("thinwan_qds_packets_total{direction=\"to_client\"} 5"), "{s}");
        assert!(s.contains("thinwan_qds_update_seconds_count 1"), "{s}");
    }
}
