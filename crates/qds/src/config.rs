//! The daemon's TOML configuration: parsed once into typed values at load, every key
//! documented (docs/qds-lab.md), a bad value failing with the file and the key named
//! (STYLE.md §11). Unknown keys are errors, so a misspelt key is never silently ignored.

use std::fmt;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
pub use thinwan_proto::qds::keys::{ClassifierName, QdsKeys};

/// The whole configuration file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Interface toward the clients: HTB is installed on its egress, and packets
    /// arriving on it travel toward the servers.
    pub downlink: String,
    /// Interface toward the servers: packets arriving on it travel toward the clients
    /// (captured there, before the HTB queue, so the flow RTT includes that queue).
    pub uplink: String,
    /// Capacity of the downlink in Mbit/s: HTB's root class rate and every class's ceil.
    pub capacity_mbps: f64,
    /// `host:port` of the Prometheus endpoint (`GET /metrics`); absent = no endpoint.
    #[serde(default)]
    pub metrics: Option<SocketAddr>,
    /// Leaf queue of every class: a `pfifo` of this many packets; absent = HTB's default
    /// leaf (a pfifo of the device's txqueuelen, 1000 on most NICs, 10000 on the lab's
    /// TUNs — long enough to hide any scheduling behind seconds of queue).
    #[serde(default)]
    pub class_queue_packets: Option<u32>,
    /// Directory of the state file that records the downlink's original root qdisc.
    #[serde(default = "default_state_dir")]
    pub state_dir: PathBuf,
    /// Which end of a TCP connection is the server.
    pub servers: Servers,
    /// Who decides each flow's class and the class rates.
    pub controller: ControllerKind,
    /// `[qds]`: the control period (both controllers) and the QDS controller, monitor
    /// and classifier — the core's `[qds]` keys (`thinwan_proto::qds::keys::QdsKeys`,
    /// docs/scenario.md "[qds]"), so one table configures the simulator, the emulator and
    /// this daemon.
    #[serde(default)]
    pub qds: QdsKeys,
    /// Fixed classes (`controller = "static"`).
    #[serde(default, rename = "static")]
    pub static_classes: Option<StaticKeys>,
}

fn default_state_dir() -> PathBuf {
    PathBuf::from("/run/thinwan-qds")
}

/// The server side of the managed flows: a TCP flow is managed when its server end
/// matches one of `nets` (and one of `ports`, when given).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Servers {
    /// IPv4 networks of the servers, `"198.18.1.0/24"`.
    pub nets: Vec<Ipv4Net>,
    /// Server ports; empty = any port.
    #[serde(default)]
    pub ports: Vec<u16>,
}

/// Who decides the classes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ControllerKind {
    /// The QDS controller (`thinwan_proto::qds::controller::plan`) every period.
    Qds,
    /// Fixed class rates and a fixed flow → class table (`[static]`): HTB and filters
    /// without the controller, to check the shaping itself.
    Static,
}

/// Which flows an entry of a table matches: by server port and/or server address
/// (at least one of them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowMatch {
    /// Server port.
    #[serde(default)]
    pub port: Option<u16>,
    /// Server address.
    #[serde(default)]
    pub address: Option<Ipv4Addr>,
}

impl FlowMatch {
    /// Does a flow with server end `addr:port` match?
    pub fn matches(&self, addr: Ipv4Addr, port: u16) -> bool {
        self.port.is_none_or(|p| p == port) && self.address.is_none_or(|a| a == addr)
    }
}

/// `[static]`: fixed classes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StaticKeys {
    /// Guaranteed rate of each class in Mbit/s (ceil = capacity); unmatched flows go to
    /// the last class.
    pub rates_mbps: Vec<f64>,
    /// Flow → class index.
    #[serde(default)]
    pub flows: Vec<StaticFlow>,
}

/// One line of the static flow table.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StaticFlow {
    /// Which flows.
    #[serde(flatten)]
    pub flow: FlowMatch,
    /// Their class (0-based index into `rates_mbps`).
    pub class: usize,
}

/// An IPv4 network `a.b.c.d/len`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Ipv4Net {
    /// Network address (host bits cleared).
    pub addr: Ipv4Addr,
    /// Prefix length, 0..=32.
    pub len: u8,
}

impl Ipv4Net {
    /// Does the network contain `a`?
    pub fn contains(&self, a: Ipv4Addr) -> bool {
        u32::from(a) & self.mask() == u32::from(self.addr)
    }

    fn mask(&self) -> u32 {
        if self.len == 0 {
            0
        } else {
            u32::MAX << (32 - self.len)
        }
    }
}

impl TryFrom<String> for Ipv4Net {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        let (a, l) = s.split_once('/').unwrap_or((&s, "32"));
        let addr: Ipv4Addr = a.parse().map_err(|_| format!("{s:?}: not an IPv4 address/prefix"))?;
        let len: u8 = l
            .parse()
            .ok()
            .filter(|l| *l <= 32)
            .ok_or_else(|| format!("{s:?}: prefix length must be 0..=32"))?;
        let net = Ipv4Net { addr, len };
        if u32::from(addr) & !net.mask() != 0 {
            return Err(format!(
                "{s:?}: host bits set (did you mean {}/{len}?)",
                Ipv4Addr::from(u32::from(addr) & net.mask())
            ));
        }
        Ok(net)
    }
}

impl From<Ipv4Net> for String {
    fn from(n: Ipv4Net) -> String {
        format!("{}/{}", n.addr, n.len)
    }
}

/// A configuration error: the file and the key, then what is wrong.
#[derive(Debug)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

impl Config {
    /// Read and validate `path`.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text =
            std::fs::read_to_string(path).map_err(|e| ConfigError(format!("{}: {e}", path.display())))?;
        Config::parse(&text).map_err(|e| ConfigError(format!("{}: {e}", path.display())))
    }

    /// Parse and validate TOML text (errors name the key, not the file).
    pub fn parse(text: &str) -> Result<Config, ConfigError> {
        let de = toml::Deserializer::new(text);
        let cfg: Config = serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            // toml's own message carries the line and column; keep its first line.
            let inner = e.into_inner().to_string();
            let inner = inner.trim().replace('\n', " ");
            ConfigError(if path == "." { inner } else { format!("{path}: {inner}") })
        })?;
        cfg.validate()?;
        Ok(cfg)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let err = |key: &str, what: String| Err(ConfigError(format!("{key}: {what}")));
        for (key, name) in [("downlink", &self.downlink), ("uplink", &self.uplink)] {
            if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains('/') {
                return err(key, format!("{name:?} is not an interface name"));
            }
        }
        if self.downlink == self.uplink {
            return err("uplink", "must differ from downlink".into());
        }
        if !(self.capacity_mbps.is_finite() && self.capacity_mbps > 0.0) {
            return err("capacity_mbps", format!("must be a positive number, got {}", self.capacity_mbps));
        }
        if self.class_queue_packets == Some(0) {
            return err("class_queue_packets", "must be at least 1 packet".into());
        }
        self.qds.validate().map_err(|e| ConfigError(e.to_string()))?;
        if !(10.0..=10_000.0).contains(&self.qds.period_ms) {
            return err("qds.period_ms", format!("must be 10..=10000 ms here, got {}", self.qds.period_ms));
        }
        if self.servers.nets.is_empty() {
            return err("servers.nets", "name at least one server network".into());
        }
        match self.controller {
            ControllerKind::Qds => {
                // A model is read and checked when the controller is built (its errors
                // name qds.model_file); an oracle needs its table.
                if self.qds.classifier == ClassifierName::Oracle && self.qds.oracle.is_empty() {
                    return err(
                        "qds.oracle",
                        "classifier = \"oracle\" needs a table of [[qds.oracle]] rows".into(),
                    );
                }
                if self.static_classes.is_some() {
                    return err("static", "only used with controller = \"static\"".into());
                }
            }
            ControllerKind::Static => {
                let Some(s) = &self.static_classes else {
                    return err("static", "controller = \"static\" needs a [static] table".into());
                };
                if s.rates_mbps.is_empty() || s.rates_mbps.len() > MAX_CLASSES {
                    return err("static.rates_mbps", format!("give 1..={MAX_CLASSES} class rates"));
                }
                if let Some(r) =
                    s.rates_mbps.iter().find(|r| !(r.is_finite() && **r > 0.0 && **r <= self.capacity_mbps))
                {
                    return err(
                        "static.rates_mbps",
                        format!("{r}: every rate must be in (0, capacity_mbps]"),
                    );
                }
                for (i, f) in s.flows.iter().enumerate() {
                    if f.flow.port.is_none() && f.flow.address.is_none() {
                        return err(&format!("static.flows[{i}]"), "give a port or an address".into());
                    }
                    if f.class >= s.rates_mbps.len() {
                        return err(
                            &format!("static.flows[{i}].class"),
                            format!("{} is not a class (0..{})", f.class, s.rates_mbps.len()),
                        );
                    }
                }
            }
        }
        Ok(())
    }

    /// Downlink capacity in bytes per second (HTB's unit).
    pub fn capacity_bytes(&self) -> u64 {
        (self.capacity_mbps * 1e6 / 8.0).round() as u64
    }

    /// The state file of the downlink.
    pub fn state_file(&self) -> PathBuf {
        self.state_dir.join(format!("thinwan-qds-{}.json", self.downlink))
    }

    /// Is `addr:port` a server end of a managed flow?
    pub fn is_server(&self, addr: Ipv4Addr, port: u16) -> bool {
        self.servers.nets.iter().any(|n| n.contains(addr))
            && (self.servers.ports.is_empty() || self.servers.ports.contains(&port))
    }
}

/// HTB minor ids are 16 bits; QDS uses tens of classes. A bound keeps a typo from
/// creating thousands.
pub const MAX_CLASSES: usize = 64;

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
downlink = "qd-l"
uplink = "qd-w"
capacity_mbps = 20
metrics = "127.0.0.1:9464"
state_dir = "/tmp/x"
controller = "qds"
[servers]
nets = ["198.18.1.0/24"]
[qds]
alpha = 0.3
variant = "delay_only"
classifier = "oracle"
oracle = [{ server_port = 5001, app = "video" }, { server_addr = "198.18.1.1", server_port = 5002, app = "data" }]
"#;

    #[test]
    fn good_config_parses_with_defaults() {
        let c = Config::parse(GOOD).unwrap();
        assert_eq!(c.qds.period_ms, 100.0, "the core's period");
        assert_eq!(c.capacity_bytes(), 2_500_000);
        assert_eq!(c.qds.beta, 1.0);
        assert_eq!(c.qds.alpha, 0.3);
        assert_eq!(c.qds.classes, 10);
        assert_eq!(c.qds.oracle.len(), 2);
        assert!(c.is_server("198.18.1.7".parse().unwrap(), 1));
        assert!(!c.is_server("198.18.2.1".parse().unwrap(), 1));
        assert_eq!(c.state_file(), PathBuf::from("/tmp/x/thinwan-qds-qd-l.json"));
    }

    fn error_of(text: &str) -> String {
        Config::parse(text).unwrap_err().0
    }

    #[test]
    fn errors_name_the_key() {
        let e = error_of(&GOOD.replace("alpha = 0.3", "alpah = 0.3"));
        assert!(e.starts_with("qds") && e.contains("alpah"), "{e}");
        let e = error_of(&GOOD.replace("alpha = 0.3", "alpha = -1"));
        assert!(e.starts_with("qds.alpha:"), "{e}");
        let e = error_of(&GOOD.replace("alpha = 0.3", "period_ms = 5"));
        assert!(e.starts_with("qds.period_ms:"), "{e}");
        let e = error_of(&GOOD.replace("capacity_mbps = 20", "capacity_mbps = -1"));
        assert!(e.starts_with("capacity_mbps:"), "{e}");
        let e = error_of(&GOOD.replace("\"video\"", "\"vdeo\""));
        assert!(e.starts_with("qds.oracle[0].app:"), "{e}");
        assert!(e.contains("vdeo") && e.contains("video"), "names the bad and the good values: {e}");
        let e = error_of(&GOOD.replace("{ server_port = 5001, app", "{ server_prot = 5001, app"));
        assert!(e.starts_with("qds.oracle[0]") && e.contains("server_prot"), "{e}");
        let e = error_of(&GOOD.replace(
            "oracle = [{ server_port = 5001, app = \"video\" }, { server_addr = \"198.18.1.1\", server_port = 5002, app = \"data\" }]",
            "oracle = []",
        ));
        assert!(e.starts_with("qds.oracle:"), "{e}");
        let e = error_of(&GOOD.replace("198.18.1.0/24", "198.18.1.1/24"));
        assert!(e.starts_with("servers.nets") && e.contains("host bits"), "{e}");
        let e = error_of(&GOOD.replace("delay_only", "fast"));
        assert!(e.starts_with("qds.variant:"), "{e}");
        let e = error_of(&GOOD.replace("controller = \"qds\"", "controller = \"static\""));
        assert!(e.starts_with("static:"), "{e}");
        let e = error_of(&GOOD.replace("metrics = \"127.0.0.1:9464\"", "metrics = \"nowhere\""));
        assert!(e.starts_with("metrics:"), "{e}");
        let e = error_of(&GOOD.replace("uplink = \"qd-w\"", "uplink = \"qd-l\""));
        assert!(e.starts_with("uplink:"), "{e}");
        let e = error_of(&GOOD.replace("downlink = \"qd-l\"\n", ""));
        assert!(e.contains("downlink"), "{e}");
    }

    #[test]
    fn static_table_is_checked() {
        let base = GOOD.replace("controller = \"qds\"", "controller = \"static\"");
        let ok = format!("{base}\n[static]\nrates_mbps = [5, 15]\nflows = [{{ port = 5001, class = 1 }}]\n");
        let c = Config::parse(&ok).unwrap();
        assert_eq!(c.static_classes.unwrap().flows[0].class, 1);
        let e = error_of(&ok.replace("class = 1", "class = 2"));
        assert!(e.starts_with("static.flows[0].class:"), "{e}");
        let e = error_of(&ok.replace("[5, 15]", "[5, 25]"));
        assert!(e.starts_with("static.rates_mbps:"), "{e}");
    }
}
