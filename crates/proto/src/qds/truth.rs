//! The oracle's truth (`qds.classifier = "oracle"`): which application type a pair's
//! flow carries at a time, from the traffic model that writes it. The simulator labels
//! every write with its [`App`] and its oracle reads the latest one; a real packet carries
//! no label, so thinwan-link asks [`pair_app`] for the pair its fixed server port names
//! (docs/lab.md "Pairs"). Both read the same traffic model through this one mapping.

use crate::qds::classify::AppType;
use crate::time::Duration;
use crate::traffic::{App, TrafficSpec};

/// The controller's type of an application (the oracle's truth): video and data are
/// themselves, a greedy transfer is data, every interactive model (thin-client, game, a
/// capture's writes, the constant source) is interactive.
pub fn app_type(app: App) -> AppType {
    match app {
        App::Video => AppType::Video,
        App::Data | App::Bulk => AppType::Data,
        App::ThinClient | App::Game | App::Trace | App::Constant => AppType::Interactive,
    }
}

/// The application whose writes pair `stream` of `spec` makes `since_start` after the
/// run start: a mix's model of the phase that time falls in (phase k from k ·
/// `mix_change_s`, [`crate::traffic::MixSpec::position`]), else the model's own.
pub fn pair_app(spec: &TrafficSpec, stream: u32, since_start: Duration) -> App {
    match spec {
        TrafficSpec::Mix(m) => {
            let phase = m.change.map_or(0, |c| since_start.as_nanos() / c.as_nanos().max(1));
            pair_app(&m.flows[m.position(stream, phase)], stream, Duration::ZERO)
        }
        TrafficSpec::ThinClient(_) => App::ThinClient,
        TrafficSpec::Game(_) => App::Game,
        TrafficSpec::Trace(_) => App::Trace,
        TrafficSpec::Constant { .. } => App::Constant,
        TrafficSpec::Bulk { .. } => App::Bulk,
        TrafficSpec::Video(_) => App::Video,
        TrafficSpec::Data(_) => App::Data,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Instant;
    use crate::traffic::{AppKeys, Model, Source, ThinClientKeys};

    /// The truth is what the pair's source actually writes: every write's label, in a
    /// mix whose types rotate every 2 s, is the one `pair_app` names for its time.
    #[test]
    fn pair_app_names_what_each_write_is_labelled() {
        let keys = AppKeys {
            mix: vec![(Model::Video, 1), (Model::Data, 2)],
            mix_change_s: 2.0,
            ..AppKeys::default()
        };
        let spec = keys.spec(Model::Mix, &ThinClientKeys::default(), 1460).unwrap();
        let mut seen = std::collections::BTreeSet::new();
        for stream in 0..3 {
            let mut s = Source::new(&spec, 7, stream, Instant::ZERO).unwrap();
            let end = Instant::from_secs_f64(7.0);
            for w in std::iter::from_fn(|| s.next_write()).take_while(|w| w.at < end) {
                let app = pair_app(&spec, stream, w.at - Instant::ZERO);
                assert_eq!(app, w.app, "stream {stream} at {:?}", w.at);
                seen.insert((stream, app));
            }
        }
        // Every stream carried both types (the rotation happened).
        assert_eq!(seen.len(), 6, "{seen:?}");
    }

    #[test]
    fn app_types_follow_the_models() {
        assert_eq!(app_type(App::Video), AppType::Video);
        assert_eq!(app_type(App::Bulk), AppType::Data);
        assert_eq!(app_type(App::Game), AppType::Interactive);
    }
}
