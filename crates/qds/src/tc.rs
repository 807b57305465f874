//! Traffic-control messages: the HTB qdisc and its classes (`linux/pkt_sched.h`,
//! `net/sched/sch_htb.c`), u32 filters that send one TCP flow (its 5-tuple) to a class
//! (`linux/pkt_cls.h`, `net/sched/cls_u32.c`), and the dumps that read them back.
//!
//! HTB class options without rate tables: since Linux 3.8 `htb_change_class` computes
//! its rates itself and only reads a rate table when the `tc_ratespec`'s `linklayer`
//! is `TC_LINKLAYER_UNAWARE`; we set `TC_LINKLAYER_ETHERNET`, as modern `tc` does, and
//! send none. Rates above 2^32−1 bytes/s travel in `TCA_HTB_RATE64`/`CEIL64`.

use std::net::Ipv4Addr;

use crate::netlink::{
    Msg, F_CREATE, F_EXCL, F_REPLACE, RTM_DELQDISC, RTM_DELTFILTER, RTM_NEWQDISC, RTM_NEWTCLASS,
    RTM_NEWTFILTER,
};

/// `TCA_KIND`.
pub const TCA_KIND: u16 = 1;
/// `TCA_OPTIONS`.
pub const TCA_OPTIONS: u16 = 2;
const TCA_HTB_PARMS: u16 = 1;
const TCA_HTB_INIT: u16 = 2;
const TCA_HTB_RATE64: u16 = 6;
const TCA_HTB_CEIL64: u16 = 7;
const TCA_U32_CLASSID: u16 = 1;
const TCA_U32_SEL: u16 = 5;
/// `TC_U32_TERMINAL`: a match ends classification (what `tc … flowid` sets).
const TC_U32_TERMINAL: u8 = 1;
/// `TC_LINKLAYER_ETHERNET`.
const TC_LINKLAYER_ETHERNET: u8 = 1;
/// `TC_H_ROOT`: the parent of a root qdisc.
pub const TC_H_ROOT: u32 = 0xFFFF_FFFF;
/// `TC_H_INGRESS`/`TC_H_CLSACT` parent: the ingress hook, which we never touch.
pub const TC_H_INGRESS: u32 = 0xFFFF_FFF1;
/// The HTB's handle, `1:`.
pub const HTB_MAJOR: u32 = 1;
/// Minor of HTB's root class (`1:1`), at the link capacity.
pub const ROOT_CLASS_MINOR: u32 = 1;
/// Minor of QDS class k is `FIRST_CLASS_MINOR + k` (`1:10`, `1:11`, …).
pub const FIRST_CLASS_MINOR: u32 = 0x10;
/// Priority of our u32 filters.
pub const FILTER_PRIO: u32 = 1;
/// `ETH_P_IP`.
const ETH_P_IP: u16 = 0x0800;
/// u32's root hash table `800:` (created with the first filter of a priority).
const U32_ROOT_HT: u32 = 0x800 << 20;
/// A u32 node id has 12 bits.
pub const MAX_FILTERS: u32 = 0xFFF;
/// The kernel's scheduler tick: `PSCHED_TICKS2NS(x) = x << 6` (`net/pkt_sched.h`).
const PSCHED_NS_PER_TICK: u64 = 64;
/// What `tc` assumes when no MTU is given (`tc/q_htb.c`).
const DEFAULT_MTU: u64 = 1600;

/// `major:minor` → a tc handle.
pub const fn handle(major: u32, minor: u32) -> u32 {
    (major << 16) | (minor & 0xFFFF)
}

/// Class id of QDS class `k`.
pub fn class_id(k: usize) -> u32 {
    handle(HTB_MAJOR, FIRST_CLASS_MINOR + k as u32)
}

/// `tc qdisc replace dev IF root handle 1: htb default <default_minor>`.
pub fn htb_qdisc(ifindex: u32, default_minor: u32) -> Msg {
    let mut m = Msg::tc(RTM_NEWQDISC, F_CREATE | F_REPLACE, ifindex, handle(HTB_MAJOR, 0), TC_H_ROOT, 0);
    m.attr_str(TCA_KIND, "htb");
    let at = m.begin_nest(TCA_OPTIONS);
    // struct tc_htb_glob: version 3 (the current one), rate2quantum 10 (tc's default),
    // the default class, debug 0, direct_pkts 0 (read-only).
    let mut glob = Vec::with_capacity(20);
    for v in [3u32, 10, default_minor, 0, 0] {
        glob.extend_from_slice(&v.to_ne_bytes());
    }
    m.attr(TCA_HTB_INIT, &glob);
    m.end_nest(at);
    m
}

/// Delete the root qdisc of an interface (the kernel then attaches its default).
pub fn delete_root(ifindex: u32) -> Msg {
    Msg::tc(RTM_DELQDISC, 0, ifindex, 0, TC_H_ROOT, 0)
}

/// Create or change HTB class `classid` under `parent` with `rate`/`ceil` in bytes/s
/// (`tc class replace … htb rate R ceil C`); burst and cburst as `tc` computes them by
/// default (one timer tick's worth at the rate plus an MTU).
pub fn htb_class(ifindex: u32, parent: u32, classid: u32, rate: u64, ceil: u64) -> Msg {
    let mut m = Msg::tc(RTM_NEWTCLASS, F_CREATE, ifindex, classid, parent, 0);
    m.attr_str(TCA_KIND, "htb");
    let at = m.begin_nest(TCA_OPTIONS);
    let (rate, ceil) = (rate.max(1), ceil.max(rate.max(1)));
    if rate > u64::from(u32::MAX) {
        m.attr(TCA_HTB_RATE64, &rate.to_ne_bytes());
    }
    if ceil > u64::from(u32::MAX) {
        m.attr(TCA_HTB_CEIL64, &ceil.to_ne_bytes());
    }
    m.attr(TCA_HTB_PARMS, &htb_opt(rate, ceil));
    m.end_nest(at);
    m
}

/// `struct tc_htb_opt`: rate and ceil `tc_ratespec`s, buffer and cbuffer in scheduler
/// ticks, quantum, level, prio.
fn htb_opt(rate: u64, ceil: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(44);
    ratespec(&mut v, rate);
    ratespec(&mut v, ceil);
    v.extend_from_slice(&burst_ticks(rate).to_ne_bytes());
    v.extend_from_slice(&burst_ticks(ceil).to_ne_bytes());
    // quantum: rate / r2q (10) clamped to [MTU, 200000] as the kernel would do itself,
    // but without its "quantum is small" warnings in the kernel log.
    let quantum = (rate / 10).clamp(DEFAULT_MTU, 200_000) as u32;
    for x in [quantum, 0 /* level: computed by the kernel */, 0 /* prio */] {
        v.extend_from_slice(&x.to_ne_bytes());
    }
    v
}

/// `struct tc_ratespec` { cell_log u8, linklayer u8, overhead u16, cell_align i16,
/// mpu u16, rate u32 }.
fn ratespec(v: &mut Vec<u8>, rate: u64) {
    v.push(0);
    v.push(TC_LINKLAYER_ETHERNET);
    v.extend_from_slice(&0u16.to_ne_bytes());
    v.extend_from_slice(&(-1i16).to_ne_bytes()); // cell_align, as tc sends it
    v.extend_from_slice(&0u16.to_ne_bytes());
    v.extend_from_slice(&(rate.min(u64::from(u32::MAX)) as u32).to_ne_bytes());
}

/// `tc`'s default burst (`rate / HZ + mtu`, HZ = 1000) as a transmission time in ticks.
fn burst_ticks(rate: u64) -> u32 {
    let burst = rate / 1000 + DEFAULT_MTU;
    let ns = burst.saturating_mul(1_000_000_000) / rate.max(1);
    (ns / PSCHED_NS_PER_TICK).min(u64::from(u32::MAX)) as u32
}

/// One TCP flow as seen on the downlink's egress: server → client.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FiveTuple {
    /// Server address (IP source of the packets the filter classifies).
    pub server: Ipv4Addr,
    /// Server port.
    pub server_port: u16,
    /// Client address.
    pub client: Ipv4Addr,
    /// Client port.
    pub client_port: u16,
}

/// u32 filter handle `800::node`.
pub fn filter_handle(node: u32) -> u32 {
    U32_ROOT_HT | (node & MAX_FILTERS)
}

/// `tc filter replace dev IF parent 1: protocol ip prio 1 handle 800::N u32 match ip
/// protocol 6 0xff match ip src S match ip dst C match ip sport SP match ip dport CP
/// flowid CLASS`. With `create = false` the filter exists and only its class changes
/// (u32 keeps a node's selector on change and rebinds its class).
pub fn u32_filter(ifindex: u32, node: u32, flow: &FiveTuple, classid: u32, create: bool) -> Msg {
    let flags = if create { F_CREATE | F_EXCL } else { 0 };
    let info = (FILTER_PRIO << 16) | u32::from(ETH_P_IP.to_be());
    let mut m = Msg::tc(RTM_NEWTFILTER, flags, ifindex, filter_handle(node), handle(HTB_MAJOR, 0), info);
    m.attr_str(TCA_KIND, "u32");
    let at = m.begin_nest(TCA_OPTIONS);
    m.attr(TCA_U32_CLASSID, &classid.to_ne_bytes());
    if create {
        m.attr(TCA_U32_SEL, &u32_sel(flow));
    }
    m.end_nest(at);
    m
}

/// Delete filter `800::node`.
pub fn delete_filter(ifindex: u32, node: u32) -> Msg {
    let info = (FILTER_PRIO << 16) | u32::from(ETH_P_IP.to_be());
    let mut m = Msg::tc(RTM_DELTFILTER, 0, ifindex, filter_handle(node), handle(HTB_MAJOR, 0), info);
    m.attr_str(TCA_KIND, "u32");
    m
}

/// `struct tc_u32_sel` with four keys on the IPv4 header (offsets from the network
/// header; the ports assume no IP options, as `tc … match ip sport` does):
/// protocol (byte 9), source (12), destination (16), source and destination ports (20).
fn u32_sel(f: &FiveTuple) -> Vec<u8> {
    let keys: [(u32, u32, i32); 4] = [
        (0x00FF_0000, 6 << 16, 8), // protocol = TCP within the word at offset 8
        (u32::MAX, u32::from(f.server), 12),
        (u32::MAX, u32::from(f.client), 16),
        (u32::MAX, (u32::from(f.server_port) << 16) | u32::from(f.client_port), 20),
    ];
    let mut v = Vec::with_capacity(16 + 16 * keys.len());
    v.push(TC_U32_TERMINAL); // flags
    v.push(0); // offshift
    v.push(keys.len() as u8); // nkeys
    v.push(0); // padding before the u16s
    v.extend_from_slice(&0u16.to_ne_bytes()); // offmask (be16, 0)
    v.extend_from_slice(&0u16.to_ne_bytes()); // off
    v.extend_from_slice(&0i16.to_ne_bytes()); // offoff
    v.extend_from_slice(&0i16.to_ne_bytes()); // hoff
    v.extend_from_slice(&0u32.to_ne_bytes()); // hmask (be32, 0)
    for (mask, val, off) in keys {
        // struct tc_u32_key { be32 mask, be32 val, int off, int offmask }
        v.extend_from_slice(&mask.to_be_bytes());
        v.extend_from_slice(&(val & mask).to_be_bytes());
        v.extend_from_slice(&off.to_ne_bytes());
        v.extend_from_slice(&0i32.to_ne_bytes());
    }
    v
}

/// `tc qdisc replace dev IF parent CLASS handle MAJOR: pfifo limit N`: a class's leaf
/// queue (`struct tc_fifo_qopt { u32 limit }`).
pub fn pfifo_leaf(ifindex: u32, class: u32, major: u32, limit: u32) -> Msg {
    let mut m = Msg::tc(RTM_NEWQDISC, F_CREATE | F_REPLACE, ifindex, handle(major, 0), class, 0);
    m.attr_str(TCA_KIND, "pfifo");
    m.attr(TCA_OPTIONS, &limit.to_ne_bytes());
    m
}

/// A qdisc or class to re-create as it was dumped: kind and raw options.
pub fn raw_qdisc(ifindex: u32, handle: u32, parent: u32, kind: &str, options: Option<&[u8]>) -> Msg {
    let mut m = Msg::tc(RTM_NEWQDISC, F_CREATE | F_REPLACE, ifindex, handle, parent, 0);
    m.attr_str(TCA_KIND, kind);
    if let Some(o) = options {
        m.attr(TCA_OPTIONS, o);
    }
    m
}

/// An HTB qdisc's dumped options made acceptable to `htb_init`: the dump reports
/// `tc_htb_glob.version` as `HTB_VER` (0x30011) but init accepts only its major, 3.
pub fn htb_init_from_dump(options: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(options.len());
    for (ty, p) in crate::netlink::attrs(options) {
        let mut p = p.to_vec();
        if ty == TCA_HTB_INIT && p.len() >= 4 {
            p[0..4].copy_from_slice(&3u32.to_ne_bytes());
        }
        out.extend_from_slice(&((4 + p.len()) as u16).to_ne_bytes());
        out.extend_from_slice(&ty.to_ne_bytes());
        out.extend_from_slice(&p);
        while !out.len().is_multiple_of(4) {
            out.push(0);
        }
    }
    out
}

/// A class to re-create as it was dumped.
pub fn raw_class(ifindex: u32, handle: u32, parent: u32, kind: &str, options: Option<&[u8]>) -> Msg {
    let mut m = Msg::tc(RTM_NEWTCLASS, F_CREATE, ifindex, handle, parent, 0);
    m.attr_str(TCA_KIND, kind);
    if let Some(o) = options {
        m.attr(TCA_OPTIONS, o);
    }
    m
}

/// Rate and ceil (bytes/s) of an HTB class's dumped `TCA_OPTIONS`.
pub fn htb_rates(options: &[u8]) -> Option<(u64, u64)> {
    let mut rate64 = None;
    let mut ceil64 = None;
    let mut parms = None;
    for (ty, p) in crate::netlink::attrs(options) {
        match ty {
            TCA_HTB_PARMS if p.len() >= 24 => parms = Some(p),
            TCA_HTB_RATE64 if p.len() == 8 => rate64 = Some(u64::from_ne_bytes(p.try_into().ok()?)),
            TCA_HTB_CEIL64 if p.len() == 8 => ceil64 = Some(u64::from_ne_bytes(p.try_into().ok()?)),
            _ => {}
        }
    }
    let p = parms?;
    let rate = u64::from(u32::from_ne_bytes(p[8..12].try_into().ok()?));
    let ceil = u64::from(u32::from_ne_bytes(p[20..24].try_into().ok()?));
    Some((rate64.unwrap_or(rate), ceil64.unwrap_or(ceil)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netlink::attrs;

    fn options(m: &Msg) -> Vec<(u16, Vec<u8>)> {
        let (_, opts) = attrs(m.attrs()).find(|(t, _)| *t == TCA_OPTIONS).unwrap();
        attrs(opts).map(|(t, p)| (t, p.to_vec())).collect()
    }

    #[test]
    fn htb_class_carries_rates_without_tables() {
        let m = htb_class(3, handle(1, 1), class_id(2), 1_250_000, 2_500_000);
        let kind: Vec<_> = attrs(m.attrs()).filter(|(t, _)| *t == TCA_KIND).collect();
        assert_eq!(kind[0].1, b"htb\0");
        let o = options(&m);
        assert_eq!(o.len(), 1, "32-bit rates need no RATE64");
        let (ty, p) = &o[0];
        assert_eq!(*ty, TCA_HTB_PARMS);
        assert_eq!(p.len(), 44, "sizeof(struct tc_htb_opt)");
        assert_eq!(p[1], TC_LINKLAYER_ETHERNET, "rate.linklayer: no rate table needed");
        assert_eq!(p[13], TC_LINKLAYER_ETHERNET, "ceil.linklayer");
        assert_eq!(u32::from_ne_bytes(p[8..12].try_into().unwrap()), 1_250_000);
        assert_eq!(u32::from_ne_bytes(p[20..24].try_into().unwrap()), 2_500_000);
        // burst = 1250 + 1600 bytes at 1.25 MB/s = 2.28 ms = 35 625 ticks of 64 ns.
        assert_eq!(u32::from_ne_bytes(p[24..28].try_into().unwrap()), 35_625);
        assert_eq!(htb_rates(&m.attrs()[8 + 4..]), Some((1_250_000, 2_500_000)));
        assert_eq!(u32::from_ne_bytes(m_tcmsg(&m, 8)), class_id(2));
        assert_eq!(class_id(2), 0x10012);
    }

    /// A field of the message's tcmsg (4: ifindex, 8: handle, 12: parent, 16: info).
    fn m_tcmsg(m: &Msg, at: usize) -> [u8; 4] {
        m.as_bytes()[16 + at..16 + at + 4].try_into().unwrap()
    }

    #[test]
    fn leaf_pfifo_hangs_below_its_class() {
        let m = pfifo_leaf(3, class_id(4), 5, 100);
        assert_eq!(u32::from_ne_bytes(m_tcmsg(&m, 8)), 0x50000, "handle 5:");
        assert_eq!(u32::from_ne_bytes(m_tcmsg(&m, 12)), class_id(4), "parent 1:14");
        let a: Vec<_> = attrs(m.attrs()).collect();
        assert_eq!(a, vec![(TCA_KIND, &b"pfifo\0"[..]), (TCA_OPTIONS, &100u32.to_ne_bytes()[..])]);
    }

    #[test]
    fn rates_above_32_bits_use_rate64() {
        let m = htb_class(3, handle(1, 1), class_id(0), 5_000_000_000, 6_000_000_000);
        let o = options(&m);
        let tys: Vec<u16> = o.iter().map(|(t, _)| *t).collect();
        assert_eq!(tys, vec![TCA_HTB_RATE64, TCA_HTB_CEIL64, TCA_HTB_PARMS]);
        assert_eq!(u64::from_ne_bytes(o[0].1.clone().try_into().unwrap()), 5_000_000_000);
        assert_eq!(u32::from_ne_bytes(o[2].1[8..12].try_into().unwrap()), u32::MAX);
    }

    #[test]
    fn u32_selector_matches_the_flow() {
        let f = FiveTuple {
            server: "198.18.1.1".parse().unwrap(),
            server_port: 5001,
            client: "198.18.2.1".parse().unwrap(),
            client_port: 40000,
        };
        let m = u32_filter(3, 5, &f, class_id(1), true);
        let o = options(&m);
        assert_eq!(o[0], (TCA_U32_CLASSID, class_id(1).to_ne_bytes().to_vec()));
        let sel = &o[1].1;
        assert_eq!(o[1].0, TCA_U32_SEL);
        assert_eq!((sel[0], sel[2]), (TC_U32_TERMINAL, 4), "terminal, four keys");
        assert_eq!(sel.len(), 16 + 4 * 16);
        let key = |i: usize| &sel[16 + 16 * i..32 + 16 * i];
        assert_eq!(&key(1)[4..8], &[198, 18, 1, 1], "source address in network order");
        assert_eq!(i32::from_ne_bytes(key(1)[8..12].try_into().unwrap()), 12);
        assert_eq!(&key(3)[4..8], &[0x13, 0x89, 0x9c, 0x40], "ports 5001, 40000");
        assert_eq!(&key(0)[0..8], &[0, 0xff, 0, 0, 0, 6, 0, 0], "protocol byte 9 = TCP");
        // A class change sends no selector (u32 keeps the node's own).
        let change = u32_filter(3, 5, &f, class_id(0), false);
        assert_eq!(options(&change).len(), 1);
        assert_eq!(u32::from_ne_bytes(m_tcmsg(&m, 8)), 0x8000_0005, "handle 800::5");
        assert_eq!(
            u32::from_ne_bytes(m_tcmsg(&m, 16)),
            (1 << 16) | 0x0008,
            "prio 1, protocol ip (network order)"
        );
    }
}
