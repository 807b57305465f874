//! Link configuration: typed, documented defaults, parsed from JSON or command-line
//! values with units (`10mbit`, `20ms`, `uniform:10%`). A bad value fails at load with
//! the key named (STYLE.md §11).

use crate::pairs::PairsConfig;
pub use crate::qds::config::QdsKeys;
use crate::qds::config::QdsSetup;
use serde::{Deserialize, Serialize};
use thinwan_proto::link::{Impairment, Jitter, JitterLaw, JitterSize, LinkDir, LossModel};
pub use thinwan_proto::qdisc::QueueKeys;
use thinwan_proto::qdisc::{DisciplineName, QueueSpec};
use thinwan_proto::Duration;

/// Both directions of the emulated link plus the seed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LinkConfig {
    /// Base seed; each direction draws its loss and jitter from one stream of it, the
    /// simulator's for the same direction (`thinwan_proto::link`, docs/model.md).
    pub seed: u64,
    /// Server → client (`fwd`, the data direction, port `bottleneck`).
    pub fwd: DirConfig,
    /// Client → server (`rev`, the ACK direction, port `bottleneck-rev`).
    pub rev: DirConfig,
    /// The QDS control loop of `fwd.queue.discipline = "qds"` (docs/lab.md "QDS").
    pub qds: QdsKeys,
    /// The run's pairs by their fixed server ports: per-client delays and the oracle's
    /// traffic (docs/lab.md "Pairs"); None = every packet alike.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pairs: Option<PairsConfig>,
}

/// One direction of the link.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DirConfig {
    /// Link rate in bit/s; 0 = unshaped (no serialisation delay).
    pub rate_bps: u64,
    /// One-way propagation delay, milliseconds.
    pub delay_ms: f64,
    /// Jitter added to the propagation delay (`"none"`, `"uniform:10%"`, `"normal:2ms"`).
    pub jitter: String,
    /// Let jitter reorder packets (default: a packet never overtakes its predecessor).
    pub reorder: bool,
    /// I.i.d. loss probability applied after serialisation (0..1).
    pub loss: f64,
    /// Gilbert–Elliott burst loss instead of i.i.d. loss; `None` = off.
    pub ge: Option<GeConfig>,
    /// Queue discipline in front of the link (the scenario's `[queue]` keys).
    pub queue: QueueKeys,
    /// Bytes added to every IP packet when computing its serialisation time (L2 framing).
    pub overhead_bytes: u32,
}

impl Default for DirConfig {
    fn default() -> Self {
        DirConfig {
            rate_bps: 0,
            delay_ms: 0.0,
            jitter: "none".into(),
            reorder: false,
            loss: 0.0,
            ge: None,
            queue: QueueKeys::default(),
            overhead_bytes: 0,
        }
    }
}

/// Gilbert–Elliott two-state loss: per packet, the state moves Good→Bad with `p` and
/// Bad→Good with `r`, then the packet is lost with the state's loss probability.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GeConfig {
    /// P(Good → Bad) per packet.
    pub p: f64,
    /// P(Bad → Good) per packet.
    pub r: f64,
    /// Loss probability in the Good state (default 0).
    #[serde(default)]
    pub loss_good: f64,
    /// Loss probability in the Bad state (default 1).
    #[serde(default = "one")]
    pub loss_bad: f64,
}

fn one() -> f64 {
    1.0
}

/// The TOS byte the pump puts on interactive messages: DSCP CS4 (32), ECN bits clear.
/// The label classifier accepts any nonzero DSCP, so other marking programs work too.
pub const INTERACTIVE_TOS: u8 = 32 << 2;

/// A configuration value that cannot be used; the message names the key.
#[derive(Clone, Debug, PartialEq)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for ConfigError {}

impl LinkConfig {
    /// Parse JSON and check every value.
    pub fn from_json(text: &str) -> Result<Self, ConfigError> {
        // The path names the key of a bad value (`fwd.queue.discipline: unknown variant …`).
        let de = &mut serde_json::Deserializer::from_str(text);
        let cfg: LinkConfig = serde_path_to_error::deserialize(de).map_err(|e| ConfigError(e.to_string()))?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Check every value; errors name the key (`fwd.loss: …`).
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.fwd.validate("fwd")?;
        self.rev.validate("rev")?;
        if self.rev.queue.discipline == DisciplineName::Qds {
            // The controller shapes the downlink toward the clients; the monitor needs the
            // other direction's packets as they are.
            return Err(ConfigError(
                "rev.queue.discipline: \"qds\" is for fwd only (the server → client downlink the \
                 QDS controller shapes)"
                    .into(),
            ));
        }
        if let Some(p) = &self.pairs {
            p.validate()?;
        }
        self.qds.validate().map_err(|e| ConfigError(e.to_string()))?;
        self.qds_setup().map(|_| ())
    }

    /// The checked QDS loop if `fwd` runs the `qds` discipline (reads `qds.model_file`).
    pub fn qds_setup(&self) -> Result<Option<QdsSetup>, ConfigError> {
        if self.fwd.queue.discipline != DisciplineName::Qds {
            return Ok(None);
        }
        let mut setup = QdsSetup::from_keys(&self.qds)?;
        setup.truth = match &self.pairs {
            Some(p) => p.truth()?,
            None => None,
        };
        Ok(Some(setup))
    }
}

impl DirConfig {
    fn validate(&self, name: &str) -> Result<(), ConfigError> {
        let err = |key: &str, msg: String| Err(ConfigError(format!("{name}.{key}: {msg}")));
        if !(self.delay_ms.is_finite() && self.delay_ms >= 0.0) {
            return err("delay_ms", format!("must be a finite number ≥ 0, got {}", self.delay_ms));
        }
        if !(0.0..=1.0).contains(&self.loss) {
            return err("loss", format!("must be in [0, 1], got {}", self.loss));
        }
        if let Some(ge) = self.ge {
            for (k, v) in [("p", ge.p), ("r", ge.r), ("loss_good", ge.loss_good), ("loss_bad", ge.loss_bad)] {
                if !(0.0..=1.0).contains(&v) {
                    return err(&format!("ge.{k}"), format!("must be in [0, 1], got {v}"));
                }
            }
        }
        if let Err(e) = parse_jitter(&self.jitter) {
            return err("jitter", e);
        }
        self.queue_spec().map_err(|e| ConfigError(format!("{name}.{e}")))?;
        Ok(())
    }

    /// Propagation delay.
    pub fn delay(&self) -> Duration {
        Duration::from_millis_f64(self.delay_ms)
    }

    /// The queue discipline; an error names the key (`queue.limit_bytes, …`).
    pub fn queue_spec(&self) -> Result<QueueSpec, ConfigError> {
        let spec = QueueSpec::try_from(&self.queue).map_err(|e| ConfigError(format!("queue.{e}")))?;
        if spec.needs_link_rate() && self.rate_bps == 0 {
            // The class schedulers' rates are shares of the link rate.
            let which = serde_json::to_string(&self.queue.discipline).unwrap_or_default();
            return Err(ConfigError(format!("queue.discipline: {which} needs a shaped link (rate_bps > 0)")));
        }
        Ok(spec)
    }

    /// Loss and jitter of this direction (`dir`) in a link seeded `seed`: the core's
    /// [`Impairment`], on the stream the simulator uses for the same direction.
    pub fn impairment(&self, seed: u64, dir: LinkDir) -> Result<Impairment, ConfigError> {
        let jitter = parse_jitter(&self.jitter).map_err(|e| ConfigError(format!("jitter: {e}")))?;
        let loss = match self.ge {
            Some(ge) => LossModel::gilbert_elliott(ge.p, ge.r, ge.loss_good, ge.loss_bad),
            None => LossModel::iid(self.loss),
        };
        Ok(Impairment::new(loss, jitter, self.reorder, seed, dir))
    }
}

/// Parse a rate: `10mbit`, `10M`, `1.5gbit`, `64kbit`, `1000000` (bit/s), `0`/`inf`
/// (unshaped).
pub fn parse_rate(text: &str) -> Result<u64, String> {
    let t = text.trim().to_ascii_lowercase();
    if t == "inf" || t == "unlimited" || t == "0" {
        return Ok(0);
    }
    let (num, unit) = split_number(&t);
    let v: f64 = num.parse().map_err(|_| format!("bad rate {text:?} (try 10mbit)"))?;
    let mult = match unit.trim_end_matches("bit").trim_end_matches("bps").trim_end_matches("/s") {
        "" | "b" => 1.0,
        "k" => 1e3,
        "m" => 1e6,
        "g" => 1e9,
        _ => return Err(format!("bad rate unit in {text:?} (bit, kbit, mbit, gbit)")),
    };
    let bps = v * mult;
    if !(bps.is_finite() && bps >= 0.0) {
        return Err(format!("bad rate {text:?}"));
    }
    Ok(bps.round() as u64)
}

/// Parse a duration in milliseconds: `20ms`, `500us`, `1.5s`, `20` (ms).
pub fn parse_ms(text: &str) -> Result<f64, String> {
    let t = text.trim().to_ascii_lowercase();
    let (num, unit) = split_number(&t);
    let v: f64 = num.parse().map_err(|_| format!("bad duration {text:?} (try 20ms)"))?;
    let ms = match unit {
        "" | "ms" => v,
        "us" | "µs" => v * 1e-3,
        "ns" => v * 1e-6,
        "s" => v * 1e3,
        _ => return Err(format!("bad duration unit in {text:?} (s, ms, us)")),
    };
    if !(ms.is_finite() && ms >= 0.0) {
        return Err(format!("bad duration {text:?}"));
    }
    Ok(ms)
}

/// Parse a jitter spec: `none`, `uniform:10%`, `uniform:2ms`, `normal:5%`, `normal:1ms`
/// (uniform = ± amplitude; normal = standard deviation).
pub fn parse_jitter(text: &str) -> Result<Jitter, String> {
    let t = text.trim().to_ascii_lowercase();
    if t.is_empty() || t == "none" || t == "0" {
        return Ok(Jitter::None);
    }
    let (law, amount) =
        t.split_once(':').ok_or_else(|| format!("bad jitter {text:?} (try uniform:10% or normal:2ms)"))?;
    let law = match law {
        "uniform" => JitterLaw::Uniform,
        "normal" => JitterLaw::Normal,
        _ => return Err(format!("bad jitter law in {text:?} (uniform, normal)")),
    };
    let size = if let Some(p) = amount.strip_suffix('%') {
        let v: f64 = p.trim().parse().map_err(|_| format!("bad jitter percentage in {text:?}"))?;
        if !(v.is_finite() && v >= 0.0) {
            return Err(format!("bad jitter percentage in {text:?}"));
        }
        JitterSize::Fraction(v / 100.0)
    } else {
        JitterSize::Absolute(Duration::from_millis_f64(parse_ms(amount)?))
    };
    Ok(Jitter::Law { law, size })
}

fn split_number(t: &str) -> (&str, &str) {
    let end = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == 'e' || c == '-' || c == '+'))
        .unwrap_or(t.len());
    // "1e" would swallow the unit of e.g. "1e3"; units never start with 'e' here.
    (&t[..end], t[end..].trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(parse_rate("10mbit").unwrap(), 10_000_000);
        assert_eq!(parse_rate("1.5G").unwrap(), 1_500_000_000);
        assert_eq!(parse_rate("64kbit").unwrap(), 64_000);
        assert_eq!(parse_rate("inf").unwrap(), 0);
        assert!(parse_rate("10 parsecs").is_err());
        assert_eq!(parse_ms("20ms").unwrap(), 20.0);
        assert_eq!(parse_ms("500us").unwrap(), 0.5);
        assert_eq!(parse_ms("1.5s").unwrap(), 1500.0);
        assert!(parse_ms("-3ms").is_err());
        assert_eq!(
            parse_jitter("uniform:10%").unwrap(),
            Jitter::Law { law: JitterLaw::Uniform, size: JitterSize::Fraction(0.1) }
        );
        assert_eq!(
            parse_jitter("normal:2ms").unwrap(),
            Jitter::Law { law: JitterLaw::Normal, size: JitterSize::Absolute(Duration::from_millis(2)) }
        );
        assert!(parse_jitter("gauss:1ms").is_err());
    }

    #[test]
    fn json_errors_name_the_key() {
        let e = LinkConfig::from_json(r#"{"fwd": {"loss": 2.0}}"#).unwrap_err();
        assert!(e.0.starts_with("fwd.loss:"), "{e}");
        let e = LinkConfig::from_json(r#"{"rev": {"jitter": "x"}}"#).unwrap_err();
        assert!(e.0.starts_with("rev.jitter:"), "{e}");
        let e = LinkConfig::from_json(r#"{"fwd": {"speed": 1}}"#).unwrap_err();
        assert!(e.0.contains("speed"), "{e}");
        let e = LinkConfig::from_json(r#"{"fwd": {"queue": {"limit_packets": 0}}}"#).unwrap_err();
        assert!(e.0.starts_with("fwd.queue.limit_bytes, limit_packets:"), "{e}");
        let c = LinkConfig::from_json(
            r#"{"seed": 3, "fwd": {"rate_bps": 10000000, "delay_ms": 20, "ge": {"p": 0.01, "r": 0.3}}}"#,
        )
        .unwrap();
        assert_eq!(c.fwd.ge.unwrap().loss_bad, 1.0);
        assert_eq!(c.rev, DirConfig::default());
        let e = LinkConfig::from_json(r#"{"fwd": {"queue": {"discipline": "red"}}}"#).unwrap_err();
        assert!(e.0.starts_with("fwd.queue.discipline:"), "{e}");
        let e = LinkConfig::from_json(
            r#"{"fwd": {"queue": {"discipline": "priority", "priority_classifier": "dpi"}}}"#,
        )
        .unwrap_err();
        assert!(e.0.starts_with("fwd.queue.priority_classifier:"), "{e}");
        let c = LinkConfig::from_json(r#"{"fwd": {"queue": {"discipline": "priority", "priority_classifier": "gap", "classifier_gap_ms": 5}}}"#).unwrap();
        let gap = thinwan_proto::qdisc::Classifier::Gap(Duration::from_millis(5));
        assert!(
            matches!(c.fwd.queue_spec(), Ok(QueueSpec::Priority { classifier, .. }) if classifier == gap)
        );
    }
}
