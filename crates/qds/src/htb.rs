//! The HTB tree the daemon owns on the downlink, and its per-period update.
//!
//! ```text
//! 1: htb (default 1:<last class>)
//! └── 1:1   rate = ceil = capacity
//!     ├── 1:10  class 0: rate = w_norm(c_0) · capacity, ceil = capacity
//!     ├── 1:11  class 1
//!     └── …     (unmatched traffic: the last class, as in qds-api.md's ClassControl)
//! u32 filters, prio 1, one per managed flow: its 5-tuple → its class
//! ```
//!
//! Every class's ceil is the capacity, so a class borrows what others leave unused
//! (work-conserving, spec "Weights"). An update rewrites every class rate and creates,
//! re-points or deletes the filters of flows that appeared, moved or left, all in one
//! netlink batch.

use std::collections::BTreeMap;
use std::io;

use crate::netlink::Socket;
use crate::tc::{self, FiveTuple, FIRST_CLASS_MINOR, HTB_MAJOR, MAX_FILTERS, ROOT_CLASS_MINOR};

/// Rate and ceil of one class in bytes/s.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rate {
    /// Guaranteed rate.
    pub rate: u64,
    /// Ceiling (what it may borrow up to).
    pub ceil: u64,
}

/// What one update did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UpdateReport {
    /// Requests sent.
    pub requests: usize,
    /// Filters created, re-pointed and deleted.
    pub created: usize,
    /// Filters whose class changed.
    pub moved: usize,
    /// Filters deleted.
    pub deleted: usize,
    /// Flows left in the default class because the filter table is full.
    pub unfiltered: usize,
    /// Requests the kernel refused, with its reason.
    pub errors: Vec<String>,
}

/// The installed tree.
pub struct Htb {
    ifindex: u32,
    classes: usize,
    capacity: u64,
    filters: BTreeMap<FiveTuple, Filter>,
    free_nodes: Vec<u32>,
    next_node: u32,
}

#[derive(Clone, Copy, Debug)]
struct Filter {
    node: u32,
    class: usize,
}

impl Htb {
    /// Replace the root qdisc of `ifindex` with the tree above, `rates.len()` classes
    /// at the given rates under a root class at `capacity` bytes/s; with
    /// `queue_packets`, each class queues in a `pfifo` of that many packets (handle
    /// `1x:` below class `1:1x`, as `tc` prints them) instead of HTB's default leaf (a
    /// pfifo of the device's txqueuelen).
    pub fn install(
        sock: &mut Socket,
        ifindex: u32,
        capacity: u64,
        rates: &[Rate],
        queue_packets: Option<u32>,
    ) -> io::Result<Result<Htb, String>> {
        let classes = rates.len();
        let default_minor = FIRST_CLASS_MINOR + classes as u32 - 1;
        let root = tc::handle(HTB_MAJOR, ROOT_CLASS_MINOR);
        let mut msgs = vec![
            tc::htb_qdisc(ifindex, default_minor),
            tc::htb_class(ifindex, tc::handle(HTB_MAJOR, 0), root, capacity, capacity),
        ];
        for (k, r) in rates.iter().enumerate() {
            msgs.push(tc::htb_class(ifindex, root, tc::class_id(k), r.rate, r.ceil));
        }
        if let Some(limit) = queue_packets {
            for k in 0..classes {
                msgs.push(tc::pfifo_leaf(ifindex, tc::class_id(k), FIRST_CLASS_MINOR + k as u32, limit));
            }
        }
        let errors = sock.transact(&mut msgs)?;
        if let Some(e) = errors.first() {
            return Ok(Err(format!("installing HTB: request {} ({} requests): {e}", e.index, msgs.len())));
        }
        Ok(Ok(Htb {
            ifindex,
            classes,
            capacity,
            filters: BTreeMap::new(),
            free_nodes: Vec::new(),
            next_node: 1,
        }))
    }

    /// Number of QDS classes.
    pub fn classes(&self) -> usize {
        self.classes
    }

    /// Root capacity in bytes/s.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Number of installed flow filters.
    pub fn filters(&self) -> usize {
        self.filters.len()
    }

    /// Rewrite every class rate and make the filters match `class_of` (every managed
    /// flow and its class; flows not listed lose their filter).
    pub fn update(
        &mut self,
        sock: &mut Socket,
        class_of: &[(FiveTuple, usize)],
        rates: &[Rate],
    ) -> io::Result<UpdateReport> {
        let root = tc::handle(HTB_MAJOR, ROOT_CLASS_MINOR);
        let mut msgs = Vec::with_capacity(rates.len() + class_of.len());
        for (k, r) in rates.iter().take(self.classes).enumerate() {
            msgs.push(tc::htb_class(self.ifindex, root, tc::class_id(k), r.rate, r.ceil.min(self.capacity)));
        }
        let mut report = UpdateReport::default();
        let wanted: BTreeMap<FiveTuple, usize> =
            class_of.iter().map(|(f, c)| (*f, (*c).min(self.classes - 1))).collect();
        // Leavers first, so their nodes serve the newcomers of the same batch.
        let gone: Vec<FiveTuple> = self.filters.keys().filter(|f| !wanted.contains_key(f)).copied().collect();
        for f in gone {
            let filter = self.filters.remove(&f).expect("listed above");
            msgs.push(tc::delete_filter(self.ifindex, filter.node));
            self.free_nodes.push(filter.node);
            report.deleted += 1;
        }
        for (flow, class) in wanted {
            match self.filters.get_mut(&flow) {
                Some(f) if f.class == class => {}
                Some(f) => {
                    f.class = class;
                    msgs.push(tc::u32_filter(self.ifindex, f.node, &flow, tc::class_id(class), false));
                    report.moved += 1;
                }
                None => {
                    let Some(node) = self
                        .free_nodes
                        .pop()
                        .or_else(|| (self.next_node <= MAX_FILTERS).then_some(self.next_node))
                    else {
                        report.unfiltered += 1;
                        continue;
                    };
                    if node == self.next_node {
                        self.next_node += 1;
                    }
                    self.filters.insert(flow, Filter { node, class });
                    msgs.push(tc::u32_filter(self.ifindex, node, &flow, tc::class_id(class), true));
                    report.created += 1;
                }
            }
        }
        report.requests = msgs.len();
        let errors = sock.transact(&mut msgs)?;
        report.errors = errors.iter().map(|e| format!("{}: {e}", describe(msgs[e.index].ty()))).collect();
        Ok(report)
    }
}

fn describe(ty: u16) -> &'static str {
    match ty {
        crate::netlink::RTM_NEWTCLASS => "class rate",
        crate::netlink::RTM_NEWTFILTER => "filter",
        crate::netlink::RTM_DELTFILTER => "filter delete",
        _ => "request",
    }
}
