//! `thinwan-yamux-peer`: TCP forwarding over one yamux-multiplexed TCP connection, the
//! yamux-based peer of the tunnel in the benchmark and the lab (issue 20; docs/mux.md
//! "yamux as a peer").
//!
//! What frp (`transport.tcpMux`, the default) and similar tunnels do, reduced to the
//! forwarding: the edge keeps one TCP connection to the core and runs a yamux session on
//! it (the `yamux` crate, the hashicorp/yamux spec: 12-byte headers, per-stream windows
//! of 256 KiB, frames split at 16 KiB); every client it accepts becomes an outbound yamux
//! stream whose first bytes name the forward (`u8` length + name); the core connects
//! the stream to the target of that name and copies both ways. No TLS and no
//! authentication (frp's defaults without `transport.tls`): a harness for measurements
//! on the lab's private addresses, not a deployable tunnel.
//!
//! ```text
//! thinwan-yamux-peer core --listen ADDR --target NAME=ADDR [--target …]
//! thinwan-yamux-peer edge --connect ADDR --forward NAME=LISTEN [--forward …]
//! ```
//! Each prints `ready` on stdout once it listens (the edge: after its connection is up).
//! The edge exits when its connection to the core ends.

use std::collections::{HashMap, VecDeque};
use std::future::poll_fn;
use std::io::Write;
use std::net::SocketAddr;
use std::task::Poll;

use clap::{Parser, Subcommand};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};
use tokio_util::compat::{Compat, FuturesAsyncReadCompatExt, TokioAsyncReadCompatExt};

#[derive(Parser)]
#[command(
    name = "thinwan-yamux-peer",
    about = "TCP forwarding over one yamux connection (benchmark and lab peer)"
)]
struct Cli {
    #[command(subcommand)]
    role: Role,
}

#[derive(Subcommand)]
enum Role {
    /// Accept the edge's connection; connect each stream to the target it names.
    Core {
        /// Address to listen on for the edge.
        #[arg(long)]
        listen: SocketAddr,
        /// NAME=IP:PORT, a target the edge may name (repeatable).
        #[arg(long = "target", value_parser = named_addr, required = true)]
        targets: Vec<(String, SocketAddr)>,
    },
    /// Connect to the core; carry every accepted client as a yamux stream.
    Edge {
        /// The core's address.
        #[arg(long)]
        connect: SocketAddr,
        /// NAME=IP:PORT, a listener whose clients go to the core's target NAME (repeatable).
        #[arg(long = "forward", value_parser = named_addr, required = true)]
        forwards: Vec<(String, SocketAddr)>,
    },
}

fn named_addr(s: &str) -> Result<(String, SocketAddr), String> {
    let (name, addr) = s.split_once('=').ok_or_else(|| format!("{s:?}: expected NAME=IP:PORT"))?;
    if name.is_empty() || name.len() > 255 {
        return Err(format!("{name:?}: a name has 1 to 255 bytes"));
    }
    let addr = addr.parse().map_err(|_| format!("{addr:?} is not an IP:port socket address"))?;
    Ok((name.to_owned(), addr))
}

fn main() {
    let cli = Cli::parse();
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("thinwan-yamux-peer: runtime: {e}");
            std::process::exit(1);
        }
    };
    let result = rt.block_on(async move {
        match cli.role {
            Role::Core { listen, targets } => core(listen, targets.into_iter().collect()).await,
            Role::Edge { connect, forwards } => edge(connect, forwards).await,
        }
    });
    if let Err(e) = result {
        eprintln!("thinwan-yamux-peer: {e}");
        std::process::exit(1);
    }
}

/// The session settings on both ends: the crate's defaults (256 KiB initial stream
/// window, 16 KiB frames) except the stream limit (512 by default; the benchmark opens
/// 1,000 streams) and the connection-wide receive window, which the crate requires to be
/// ≥ 256 KiB × streams, so it is left unbounded.
fn config() -> yamux::Config {
    let mut cfg = yamux::Config::default();
    cfg.set_max_connection_receive_window(None);
    cfg.set_max_num_streams(65_536);
    cfg
}

fn ready() {
    let mut out = std::io::stdout();
    let _ = writeln!(out, "ready").and_then(|()| out.flush());
}

async fn core(listen: SocketAddr, targets: HashMap<String, SocketAddr>) -> std::io::Result<()> {
    let listener = TcpListener::bind(listen).await?;
    ready();
    let targets = std::sync::Arc::new(targets);
    loop {
        let (socket, _) = listener.accept().await?;
        let _ = socket.set_nodelay(true);
        let targets = targets.clone();
        tokio::spawn(async move {
            let mut conn = yamux::Connection::new(socket.compat(), config(), yamux::Mode::Server);
            // Polling for inbound streams is what drives the whole session (reads,
            // writes, window updates), so this loop runs until the connection ends.
            while let Some(Ok(stream)) = poll_fn(|cx| conn.poll_next_inbound(cx)).await {
                let targets = targets.clone();
                tokio::spawn(async move {
                    let mut stream = stream.compat();
                    let Ok(len) = stream.read_u8().await else { return };
                    let mut name = vec![0u8; len as usize];
                    if stream.read_exact(&mut name).await.is_err() {
                        return;
                    }
                    let Some(to) = std::str::from_utf8(&name).ok().and_then(|n| targets.get(n)) else {
                        return;
                    };
                    let Ok(mut server) = TcpStream::connect(to).await else { return };
                    let _ = server.set_nodelay(true);
                    let _ = tokio::io::copy_bidirectional(&mut stream, &mut server).await;
                });
            }
        });
    }
}

async fn edge(connect: SocketAddr, forwards: Vec<(String, SocketAddr)>) -> std::io::Result<()> {
    let socket = TcpStream::connect(connect).await?;
    socket.set_nodelay(true)?;
    let conn = yamux::Connection::new(socket.compat(), config(), yamux::Mode::Client);
    let (open, requests) = mpsc::unbounded_channel::<oneshot::Sender<yamux::Stream>>();
    let mut listeners = Vec::new();
    for (name, listen) in forwards {
        listeners.push((name, TcpListener::bind(listen).await?));
    }
    ready();
    for (name, listener) in listeners {
        let open = open.clone();
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let _ = client.set_nodelay(true);
                let (open, name) = (open.clone(), name.clone());
                tokio::spawn(async move {
                    let (tx, rx) = oneshot::channel();
                    if open.send(tx).is_err() {
                        return;
                    }
                    let Ok(stream) = rx.await else { return };
                    let mut stream = stream.compat();
                    let mut header = vec![name.len() as u8];
                    header.extend_from_slice(name.as_bytes());
                    if stream.write_all(&header).await.is_err() {
                        return;
                    }
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut stream).await;
                });
            }
        });
    }
    drive_client(conn, requests).await
}

/// Drive the edge's session: open an outbound stream for each request, in order, and
/// keep polling the connection (inbound streams, which the core never opens, are
/// dropped). Ends when the connection does.
async fn drive_client(
    mut conn: yamux::Connection<Compat<TcpStream>>,
    mut requests: mpsc::UnboundedReceiver<oneshot::Sender<yamux::Stream>>,
) -> std::io::Result<()> {
    let mut waiting: VecDeque<oneshot::Sender<yamux::Stream>> = VecDeque::new();
    poll_fn(|cx| loop {
        while let Poll::Ready(Some(tx)) = requests.poll_recv(cx) {
            waiting.push_back(tx);
        }
        while !waiting.is_empty() {
            match conn.poll_new_outbound(cx) {
                Poll::Ready(Ok(stream)) => {
                    if let Some(tx) = waiting.pop_front() {
                        let _ = tx.send(stream);
                    }
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(std::io::Error::other(e))),
                Poll::Pending => break,
            }
        }
        match conn.poll_next_inbound(cx) {
            Poll::Ready(Some(Ok(_unexpected))) => continue,
            Poll::Ready(Some(Err(e))) => return Poll::Ready(Err(std::io::Error::other(e))),
            Poll::Ready(None) => return Poll::Ready(Ok(())),
            Poll::Pending => return Poll::Pending,
        }
    })
    .await
}
