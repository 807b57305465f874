//! thinwan discrete-event simulator: a deterministic, seeded, single-threaded engine
//! that drives the sans-IO core (TCP endpoints, queue disciplines, traffic sources)
//! over a topology in virtual time and produces the records of docs/records.md.
#![warn(missing_docs)]

pub mod config;
pub mod engine;
pub mod records;
mod tunnel;
pub mod world;

pub use config::Config;
pub use records::RunRecords;

/// Run `run` (0-based) of the scenario given as validated JSON.
pub fn simulate(config_json: &str, run: u64) -> Result<RunRecords, String> {
    let cfg = Config::from_json(config_json)?;
    Ok(world::World::new(cfg, run)?.run())
}
