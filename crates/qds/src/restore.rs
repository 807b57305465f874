//! The downlink's original root qdisc: read before the daemon touches the interface,
//! kept in a state file, put back on exit — and, when a previous run died without
//! putting it back (kill -9, a crash), put back from the state file at the next start.
//!
//! What can be restored: the kernel's default (a root of handle 0: `noqueue`,
//! `pfifo_fast`, `mq`, …; restored by deleting our root so the kernel attaches it
//! again), and a `pfifo`, `bfifo`, `tbf` or `htb` (with its classes) that someone
//! installed, re-created from the options the kernel dumps (rate specs carry their link
//! layer, so no rate tables are needed). Anything else — another kind, child qdiscs
//! below the root, filters on an HTB — is refused before the interface is touched.

use std::io;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::netlink::{Msg, Socket, F_DUMP, RTM_GETQDISC, RTM_GETTCLASS, RTM_GETTFILTER};
use crate::tc::{self, TC_H_INGRESS, TC_H_ROOT};

/// What the interface had before the daemon started.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Original {
    /// The kernel's default root (handle 0) of this kind.
    Default {
        /// `noqueue`, `pfifo_fast`, …
        kind: String,
    },
    /// A qdisc (and its classes) to re-create.
    Tree {
        /// The root qdisc.
        qdisc: TcObject,
        /// Its classes, parents before children.
        classes: Vec<TcObject>,
    },
}

/// A dumped qdisc or class: enough to re-create it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TcObject {
    /// Handle.
    pub handle: u32,
    /// Parent handle.
    pub parent: u32,
    /// Kind.
    pub kind: String,
    /// `TCA_OPTIONS` payload as hex (absent: none).
    pub options: Option<String>,
}

/// The state file: which interface and what it had.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    /// Interface name.
    pub interface: String,
    /// Its original root.
    pub original: Original,
    /// The daemon that wrote it.
    pub pid: u32,
}

/// Kinds re-created from their dumped options.
const RESTORABLE: [&str; 4] = ["pfifo", "bfifo", "tbf", "htb"];

/// Read what `ifindex` has now; `Err` says why it could not be restored.
pub fn snapshot(sock: &mut Socket, ifindex: u32, ifname: &str) -> io::Result<Result<Original, String>> {
    let qdiscs: Vec<_> = sock
        .dump(Msg::tc(RTM_GETQDISC, F_DUMP, ifindex, 0, 0, 0))?
        .into_iter()
        .filter(|q| q.ifindex == ifindex)
        .collect();
    let Some(root) = qdiscs.iter().find(|q| q.parent == TC_H_ROOT) else {
        return Ok(Ok(Original::Default { kind: "none".into() }));
    };
    let kind = root.kind().unwrap_or_default();
    if root.handle == 0 {
        return Ok(Ok(Original::Default { kind }));
    }
    let children: Vec<_> = qdiscs
        .iter()
        .filter(|q| q.parent != TC_H_ROOT && q.parent != TC_H_INGRESS && q.handle != 0xFFFF_0000)
        .collect();
    if !RESTORABLE.contains(&kind.as_str()) {
        return Ok(Err(format!(
            "{ifname} has a root qdisc {kind} ({:x}:) that thinwan-qds cannot restore; remove it first (tc qdisc del dev {ifname} root)",
            root.handle >> 16
        )));
    }
    if let Some(c) = children.first() {
        return Ok(Err(format!(
            "{ifname} has a qdisc {} below its root {kind}; thinwan-qds restores only a root qdisc and its classes: remove it first",
            c.kind().unwrap_or_default()
        )));
    }
    let mut classes = Vec::new();
    if kind == "htb" {
        let filters = sock.dump(Msg::tc(RTM_GETTFILTER, F_DUMP, ifindex, 0, root.handle, 0))?;
        if filters.iter().any(|f| f.ifindex == ifindex) {
            return Ok(Err(format!("{ifname}: its htb has filters, which thinwan-qds cannot restore; remove them or the qdisc first")));
        }
        let dumped = sock.dump(Msg::tc(RTM_GETTCLASS, F_DUMP, ifindex, 0, 0, 0))?;
        let mut left: Vec<_> = dumped.into_iter().filter(|c| c.ifindex == ifindex).collect();
        // Parents before children: take a class once its parent is placed (a top-level
        // class has the qdisc or TC_H_ROOT as its parent).
        let mut placed = vec![root.handle, TC_H_ROOT];
        while !left.is_empty() {
            let before = left.len();
            left.retain(|c| {
                let ready = placed.contains(&c.parent);
                if ready {
                    placed.push(c.handle);
                    classes.push(object(
                        c.handle,
                        c.parent,
                        c.kind().unwrap_or_default(),
                        c.attr(tc::TCA_OPTIONS),
                    ));
                }
                !ready
            });
            if left.len() == before {
                return Ok(Err(format!("{ifname}: its htb classes form no tree thinwan-qds can re-create")));
            }
        }
    }
    Ok(Ok(Original::Tree {
        qdisc: object(root.handle, root.parent, kind, root.attr(tc::TCA_OPTIONS)),
        classes,
    }))
}

fn object(handle: u32, parent: u32, kind: String, options: Option<&[u8]>) -> TcObject {
    TcObject { handle, parent, kind, options: options.map(hex) }
}

/// Put `original` back on `ifindex` (replacing whatever root it has now).
pub fn restore(sock: &mut Socket, ifindex: u32, original: &Original) -> io::Result<Result<(), String>> {
    let current = sock.dump(Msg::tc(RTM_GETQDISC, F_DUMP, ifindex, 0, 0, 0))?;
    let has_root = current.iter().any(|q| q.ifindex == ifindex && q.parent == TC_H_ROOT && q.handle != 0);
    let mut msgs = Vec::new();
    if has_root {
        msgs.push(tc::delete_root(ifindex));
    }
    if let Original::Tree { qdisc, classes } = original {
        let opts = |o: &TcObject| o.options.as_deref().map(unhex).transpose();
        let bad = |_| io::Error::other("state file: options are not hex");
        let mut qopts = opts(qdisc).map_err(bad)?;
        if qdisc.kind == "htb" {
            qopts = qopts.as_deref().map(tc::htb_init_from_dump);
        }
        msgs.push(tc::raw_qdisc(ifindex, qdisc.handle, TC_H_ROOT, &qdisc.kind, qopts.as_deref()));
        for c in classes {
            msgs.push(tc::raw_class(ifindex, c.handle, c.parent, &c.kind, opts(c).map_err(bad)?.as_deref()));
        }
    }
    let errors = sock.transact(&mut msgs)?;
    if errors.is_empty() {
        Ok(Ok(()))
    } else {
        Ok(Err(errors.iter().map(|e| format!("request {}: {e}", e.index)).collect::<Vec<_>>().join("; ")))
    }
}

/// Write the state file atomically (a crash never leaves half of one).
pub fn save(path: &Path, state: &State) -> io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(state).map_err(io::Error::other)?)?;
    std::fs::rename(&tmp, path)
}

/// Read a state file; `Ok(None)` when there is none.
pub fn load(path: &Path) -> io::Result<Option<State>> {
    match std::fs::read(path) {
        Ok(b) => serde_json::from_slice(&b)
            .map(Some)
            .map_err(|e| io::Error::other(format!("{}: {e}", path.display()))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Result<Vec<u8>, ()> {
    if !s.len().is_multiple_of(2) {
        return Err(());
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).map_err(|_| ())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_round_trips() {
        let s = State {
            interface: "x".into(),
            original: Original::Tree {
                qdisc: object(0x10000, TC_H_ROOT, "tbf".into(), Some(&[1, 2, 0xff])),
                classes: vec![],
            },
            pid: 7,
        };
        let dir = std::env::temp_dir().join(format!("thinwan-qds-test-{}", std::process::id()));
        let p = dir.join("s.json");
        save(&p, &s).unwrap();
        assert_eq!(load(&p).unwrap(), Some(s));
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(load(&p).unwrap(), None);
        assert_eq!(unhex(&hex(&[0, 9, 0xab])), Ok(vec![0, 9, 0xab]));
        assert!(unhex("abc").is_err());
    }
}
