//! `thinwan-mux core|edge --config FILE` and `thinwan-mux gen-certs --dir DIR`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use thinwan_mux::config::{self, Common};
use thinwan_mux::{CoreConfig, EdgeConfig};

#[derive(Parser)]
#[command(
    name = "thinwan-mux",
    version,
    about = "thin-stream multiplexing tunnel (edge ⇄ core over TLS 1.3 trunks)"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Data-centre side: accept trunks, connect streams to configured targets.
    Core {
        /// TOML configuration file.
        #[arg(long)]
        config: PathBuf,
        /// Validate the configuration and exit.
        #[arg(long)]
        check: bool,
    },
    /// Regional proxy: accept clients, carry them over the trunk to the core.
    Edge {
        /// TOML configuration file.
        #[arg(long)]
        config: PathBuf,
        /// Validate the configuration and exit.
        #[arg(long)]
        check: bool,
    },
    /// Write a test CA and core/edge certificates (ca.pem, core.pem/key, edge.pem/key).
    GenCerts {
        /// Output directory.
        #[arg(long)]
        dir: PathBuf,
        /// DNS name on the core certificate (the edge's trunk.server_name).
        #[arg(long, default_value = "thinwan-core")]
        core_name: String,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::GenCerts { dir, core_name } => match thinwan_mux::tls::generate_certs(&dir, &core_name) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("thinwan-mux gen-certs: {e}");
                ExitCode::from(1)
            }
        },
        Cmd::Core { config, check } => match load(&config, check, |c: &CoreConfig| {
            thinwan_mux::tls::Acceptor::new(&c.common.auth).map(drop)
        }) {
            Ok(cfg) => {
                init_logs(&cfg.common);
                serve(move |rx| thinwan_mux::run_core(cfg, rx))
            }
            Err(code) => code,
        },
        Cmd::Edge { config, check } => match load(&config, check, |c: &EdgeConfig| {
            thinwan_mux::tls::Connector::new(&c.common.auth, &c.server_name).map(drop)
        }) {
            Ok(cfg) => {
                init_logs(&cfg.common);
                serve(move |rx| thinwan_mux::run_edge(cfg, rx))
            }
            Err(code) => code,
        },
    }
}

/// Load and validate a daemon's configuration, then build its TLS configuration with
/// `tls` — the constructor the daemon itself calls — so certificate and key files are
/// read and checked (parsable, key matching the certificate, usable CA) before `--check`
/// says ok or the daemon starts. `Err` is the exit code to stop with: 2 for a bad
/// configuration, 0 after `--check` of a good one.
fn load<C: TryFrom<config::RawConfig, Error = config::ConfigError>>(
    path: &std::path::Path,
    check: bool,
    tls: impl FnOnce(&C) -> Result<(), config::ConfigError>,
) -> Result<C, ExitCode> {
    let loaded = config::load(path).and_then(C::try_from).and_then(|c| tls(&c).map(|()| c));
    match loaded {
        Err(e) => {
            eprintln!("thinwan-mux: invalid configuration {}: {e}", path.display());
            Err(ExitCode::from(2))
        }
        Ok(_) if check => {
            println!("{}: ok", path.display());
            Err(ExitCode::SUCCESS)
        }
        Ok(c) => Ok(c),
    }
}

fn init_logs(c: &Common) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(&c.log_level));
    let b = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    if c.log_json {
        b.json().init();
    } else {
        b.init();
    }
}

/// Run a daemon on a tokio runtime; SIGINT/SIGTERM start a graceful shutdown.
fn serve<F, Fut>(run: F) -> ExitCode
where
    F: FnOnce(tokio::sync::watch::Receiver<bool>) -> Fut,
    Fut: std::future::Future<Output = std::io::Result<()>>,
{
    let rt = match thinwan_mux::runtime() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("thinwan-mux: cannot start runtime: {e}");
            return ExitCode::from(1);
        }
    };
    rt.block_on(async move {
        let (tx, rx) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(t) => t,
                Err(_) => return,
            };
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            tracing::info!("signal received, shutting down");
            let _ = tx.send(true);
        });
        match run(rx).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                tracing::error!(error = %e, "fatal");
                eprintln!("thinwan-mux: {e}");
                ExitCode::from(1)
            }
        }
    })
}
