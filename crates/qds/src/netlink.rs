//! A minimal rtnetlink (NETLINK_ROUTE) client for traffic control: build messages,
//! send a batch in one datagram, read the kernel's acknowledgements and dumps.
//!
//! Why by hand: the Rust netlink crates model qdiscs generically but build no HTB class
//! options (`TCA_HTB_PARMS` with its `tc_ratespec`s) and no u32 selectors, which is
//! all this daemon sends; the wire format (RFC 3549 §2.3, `linux/netlink.h`,
//! `linux/rtnetlink.h`, `linux/pkt_sched.h`, `linux/pkt_cls.h`) is small and stable.
//!
//! Batching: every period the daemon rewrites all class rates (and changes the filters
//! of flows that moved). All those requests go out in **one** `sendmsg` (the kernel's
//! `netlink_rcv_skb` walks every message of a datagram and acknowledges each), so an
//! update costs one system call plus the reads of the acknowledgements.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// `NLMSG_ERROR`: an acknowledgement (error 0) or a failure.
pub const NLMSG_ERROR: u16 = 2;
/// `NLMSG_DONE`: the end of a dump.
pub const NLMSG_DONE: u16 = 3;
/// rtnetlink message types (`linux/rtnetlink.h`).
pub const RTM_NEWQDISC: u16 = 36;
/// Delete a qdisc.
pub const RTM_DELQDISC: u16 = 37;
/// Get (dump) qdiscs.
pub const RTM_GETQDISC: u16 = 38;
/// Create or change a class.
pub const RTM_NEWTCLASS: u16 = 40;
/// Delete a class.
pub const RTM_DELTCLASS: u16 = 41;
/// Get (dump) classes.
pub const RTM_GETTCLASS: u16 = 42;
/// Create or change a filter.
pub const RTM_NEWTFILTER: u16 = 44;
/// Delete a filter.
pub const RTM_DELTFILTER: u16 = 45;
/// Get (dump) filters.
pub const RTM_GETTFILTER: u16 = 46;

/// `NLM_F_REQUEST`.
pub const F_REQUEST: u16 = 0x1;
/// `NLM_F_ACK`: acknowledge this request.
pub const F_ACK: u16 = 0x4;
/// `NLM_F_DUMP` (ROOT | MATCH).
pub const F_DUMP: u16 = 0x300;
/// `NLM_F_REPLACE`.
pub const F_REPLACE: u16 = 0x100;
/// `NLM_F_EXCL`.
pub const F_EXCL: u16 = 0x200;
/// `NLM_F_CREATE`.
pub const F_CREATE: u16 = 0x400;
/// `NLM_F_MULTI`: part of a multi-part reply.
const F_MULTI: u16 = 0x2;
/// `NLM_F_ACK_TLVS` on an error message: extended-ack attributes follow.
const F_ACK_TLVS: u16 = 0x200;
/// `NLMSGERR_ATTR_MSG`: the kernel's text for an error.
const NLMSGERR_ATTR_MSG: u16 = 1;
/// `NETLINK_EXT_ACK` / `NETLINK_CAP_ACK` socket options (`linux/netlink.h`).
const NETLINK_EXT_ACK: libc::c_int = 11;
const NETLINK_CAP_ACK: libc::c_int = 10;

const NLMSG_HDRLEN: usize = 16;
/// Largest datagram we send: well under the socket's default send buffer (the kernel
/// refuses a message larger than it with EMSGSIZE). ~200 filter requests or ~700 class
/// changes fit; a larger batch goes out in several datagrams, each acknowledged before
/// the next, so the acknowledgements never overflow our receive buffer.
const MAX_DATAGRAM: usize = 32 * 1024;

/// `struct tcmsg`: family, 3 pad bytes, ifindex, handle, parent, info.
pub const TCMSG_LEN: usize = 20;

/// One request under construction: `nlmsghdr`, a `tcmsg`, then attributes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Msg {
    buf: Vec<u8>,
}

impl Msg {
    /// A traffic-control request: `tcmsg` for interface `ifindex`.
    pub fn tc(ty: u16, flags: u16, ifindex: u32, handle: u32, parent: u32, info: u32) -> Msg {
        let mut buf = Vec::with_capacity(128);
        buf.extend_from_slice(&0u32.to_ne_bytes()); // length, set by finish
        buf.extend_from_slice(&ty.to_ne_bytes());
        buf.extend_from_slice(&(flags | F_REQUEST).to_ne_bytes());
        buf.extend_from_slice(&0u32.to_ne_bytes()); // seq, set by finish
        buf.extend_from_slice(&0u32.to_ne_bytes()); // port id: 0 = the kernel
        buf.push(libc::AF_UNSPEC as u8);
        buf.extend_from_slice(&[0; 3]);
        buf.extend_from_slice(&ifindex.to_ne_bytes());
        buf.extend_from_slice(&handle.to_ne_bytes());
        buf.extend_from_slice(&parent.to_ne_bytes());
        buf.extend_from_slice(&info.to_ne_bytes());
        Msg { buf }
    }

    /// Append attribute `ty` with payload `data` (padded to 4 bytes, RFC 3549 §2.3.2).
    pub fn attr(&mut self, ty: u16, data: &[u8]) -> &mut Msg {
        let len = 4 + data.len();
        self.buf.extend_from_slice(&(len as u16).to_ne_bytes());
        self.buf.extend_from_slice(&ty.to_ne_bytes());
        self.buf.extend_from_slice(data);
        self.pad();
        self
    }

    /// A string attribute (NUL-terminated, as `TCA_KIND`).
    pub fn attr_str(&mut self, ty: u16, s: &str) -> &mut Msg {
        let mut v = s.as_bytes().to_vec();
        v.push(0);
        self.attr(ty, &v)
    }

    /// Open a nested attribute; close it with [`Msg::end_nest`].
    pub fn begin_nest(&mut self, ty: u16) -> usize {
        let at = self.buf.len();
        self.buf.extend_from_slice(&0u16.to_ne_bytes());
        self.buf.extend_from_slice(&ty.to_ne_bytes());
        at
    }

    /// Close the nested attribute opened at `at`.
    pub fn end_nest(&mut self, at: usize) {
        let len = (self.buf.len() - at) as u16;
        self.buf[at..at + 2].copy_from_slice(&len.to_ne_bytes());
    }

    fn pad(&mut self) {
        while !self.buf.len().is_multiple_of(4) {
            self.buf.push(0);
        }
    }

    /// Message type.
    pub fn ty(&self) -> u16 {
        u16::from_ne_bytes([self.buf[4], self.buf[5]])
    }

    /// The whole message (its length and sequence number are set when it is sent).
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf
    }

    /// The bytes after the `tcmsg` (the attributes), for tests.
    pub fn attrs(&self) -> &[u8] {
        &self.buf[NLMSG_HDRLEN + TCMSG_LEN..]
    }

    fn finish(&mut self, seq: u32) {
        let len = self.buf.len() as u32;
        self.buf[0..4].copy_from_slice(&len.to_ne_bytes());
        self.buf[8..12].copy_from_slice(&seq.to_ne_bytes());
    }
}

/// Iterate over the attributes in `data`: `(type, payload)`; stops at a malformed one.
pub fn attrs(data: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    let mut rest = data;
    std::iter::from_fn(move || {
        if rest.len() < 4 {
            return None;
        }
        let len = usize::from(u16::from_ne_bytes([rest[0], rest[1]]));
        let ty = u16::from_ne_bytes([rest[2], rest[3]]) & 0x3fff; // without NLA_F_NESTED / NET_BYTEORDER
        if len < 4 || len > rest.len() {
            return None;
        }
        let payload = &rest[4..len];
        rest = rest.get(len.next_multiple_of(4)..).unwrap_or(&[]);
        Some((ty, payload))
    })
}

/// One `tcmsg` of a dump: the header fields and the raw attributes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcReply {
    /// Interface index.
    pub ifindex: u32,
    /// Handle (qdisc major:0, class major:minor, filter handle).
    pub handle: u32,
    /// Parent handle.
    pub parent: u32,
    /// `tcm_info` (filters: priority << 16 | protocol).
    pub info: u32,
    /// Attributes after the `tcmsg`.
    pub attrs: Vec<u8>,
}

impl TcReply {
    /// The first attribute of type `ty`.
    pub fn attr(&self, ty: u16) -> Option<&[u8]> {
        attrs(&self.attrs).find(|(t, _)| *t == ty).map(|(_, p)| p)
    }

    /// `TCA_KIND` as a string.
    pub fn kind(&self) -> Option<String> {
        let k = self.attr(crate::tc::TCA_KIND)?;
        Some(String::from_utf8_lossy(k.split(|b| *b == 0).next().unwrap_or(&[])).into_owned())
    }
}

/// A request the kernel refused: its position in the batch, the errno and the kernel's
/// extended-ack text when it gave one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NlError {
    /// Index of the message in the batch.
    pub index: usize,
    /// Positive errno.
    pub errno: i32,
    /// Extended-ack message, if any.
    pub text: Option<String>,
}

impl std::fmt::Display for NlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", io::Error::from_raw_os_error(self.errno))?;
        if let Some(t) = &self.text {
            write!(f, " ({t})")?;
        }
        Ok(())
    }
}

/// A NETLINK_ROUTE socket.
pub struct Socket {
    fd: OwnedFd,
    seq: u32,
    rx: Vec<u8>,
}

impl Socket {
    /// Open and bind a socket with extended acknowledgements on.
    pub fn open() -> io::Result<Socket> {
        // SAFETY: plain socket(2); the result is checked before use.
        let fd = unsafe {
            libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, libc::NETLINK_ROUTE)
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        for opt in [NETLINK_EXT_ACK, NETLINK_CAP_ACK] {
            // Best effort: old kernels without them still work, with errno only.
            let one: libc::c_int = 1;
            // SAFETY: valid fd, pointer to a c_int of the stated size.
            unsafe {
                libc::setsockopt(
                    fd.as_raw_fd(),
                    libc::SOL_NETLINK,
                    opt,
                    (&one as *const libc::c_int).cast(),
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                );
            }
        }
        // Room for the acknowledgements of a whole datagram and the kernel's extended-ack
        // texts, with margin.
        let rcvbuf: libc::c_int = 1 << 20;
        // SAFETY: valid fd, pointer to a c_int of the stated size.
        unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUF,
                (&rcvbuf as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
        // SAFETY: zeroed sockaddr_nl is valid (pid 0 = let the kernel assign).
        let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        sa.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        // SAFETY: sa is a valid sockaddr_nl of the given size.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sa as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as u32,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Socket { fd, seq: 1, rx: vec![0; 1 << 16] })
    }

    /// Send `msgs` as one datagram, each with `NLM_F_ACK`, and wait for every
    /// acknowledgement. `Ok` lists the requests the kernel refused (empty = all done);
    /// `Err` is a failure of the socket itself.
    pub fn transact(&mut self, msgs: &mut [Msg]) -> io::Result<Vec<NlError>> {
        let first = self.seq;
        for m in msgs.iter_mut() {
            let flags = u16::from_ne_bytes([m.buf[6], m.buf[7]]) | F_ACK;
            m.buf[6..8].copy_from_slice(&flags.to_ne_bytes());
            m.finish(self.seq);
            self.seq = self.seq.wrapping_add(1);
        }
        let mut errors = Vec::new();
        let mut start = 0;
        while start < msgs.len() {
            // As many whole messages as fit one datagram (at least one).
            let mut end = start + 1;
            let mut size = msgs[start].buf.len();
            while end < msgs.len() && size + msgs[end].buf.len() <= MAX_DATAGRAM {
                size += msgs[end].buf.len();
                end += 1;
            }
            let out: Vec<u8> = msgs[start..end].iter().flat_map(|m| m.buf.iter().copied()).collect();
            self.send(&out)?;
            self.collect_acks(first, start..end, &mut errors)?;
            start = end;
        }
        errors.sort_by_key(|e| e.index);
        Ok(errors)
    }

    /// Read acknowledgements until every message of `range` (indices from sequence
    /// number `first`) has one.
    fn collect_acks(
        &mut self,
        first: u32,
        range: std::ops::Range<usize>,
        errors: &mut Vec<NlError>,
    ) -> io::Result<()> {
        let mut pending = range.len();
        while pending > 0 {
            let n = self.recv()?;
            let buf = self.rx[..n].to_vec();
            for (hdr, payload) in messages(&buf) {
                if hdr.ty != NLMSG_ERROR {
                    continue;
                }
                let index = hdr.seq.wrapping_sub(first) as usize;
                if !range.contains(&index) {
                    continue; // a stale reply of an earlier batch
                }
                pending -= 1;
                if let Some(e) = parse_error(hdr.flags, payload) {
                    errors.push(NlError { index, ..e });
                }
            }
        }
        Ok(())
    }

    /// Send one dump request and collect every reply's `tcmsg`.
    pub fn dump(&mut self, mut msg: Msg) -> io::Result<Vec<TcReply>> {
        let seq = self.seq;
        self.seq = self.seq.wrapping_add(1);
        msg.finish(seq);
        self.send(&msg.buf)?;
        let mut replies = Vec::new();
        loop {
            let n = self.recv()?;
            let buf = self.rx[..n].to_vec();
            for (hdr, payload) in messages(&buf) {
                if hdr.seq != seq {
                    continue;
                }
                match hdr.ty {
                    NLMSG_DONE => return Ok(replies),
                    NLMSG_ERROR => {
                        if let Some(e) = parse_error(hdr.flags, payload) {
                            return Err(io::Error::other(format!("netlink dump: {e}")));
                        }
                    }
                    _ if payload.len() >= TCMSG_LEN => {
                        let word =
                            |i: usize| u32::from_ne_bytes(payload[i..i + 4].try_into().expect("4 bytes"));
                        replies.push(TcReply {
                            ifindex: word(4),
                            handle: word(8),
                            parent: word(12),
                            info: word(16),
                            attrs: payload[TCMSG_LEN..].to_vec(),
                        });
                        if hdr.flags & F_MULTI == 0 {
                            return Ok(replies);
                        }
                    }
                    _ => {}
                }
            }
        }
    }

    fn send(&self, buf: &[u8]) -> io::Result<()> {
        // SAFETY: zeroed sockaddr_nl addresses the kernel (pid 0).
        let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        sa.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        // SAFETY: buf and sa are valid for the lengths given.
        let n = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                buf.as_ptr().cast(),
                buf.len(),
                0,
                (&sa as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as u32,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    fn recv(&mut self) -> io::Result<usize> {
        loop {
            // SAFETY: rx is a valid writable buffer of its length.
            let n = unsafe { libc::recv(self.fd.as_raw_fd(), self.rx.as_mut_ptr().cast(), self.rx.len(), 0) };
            if n >= 0 {
                return Ok(n as usize);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

/// The header fields of one received message.
struct Header {
    ty: u16,
    flags: u16,
    seq: u32,
}

/// Split a datagram into messages.
fn messages(buf: &[u8]) -> Vec<(Header, &[u8])> {
    let mut out = Vec::new();
    let mut rest = buf;
    while rest.len() >= NLMSG_HDRLEN {
        let len = u32::from_ne_bytes(rest[0..4].try_into().expect("4 bytes")) as usize;
        if len < NLMSG_HDRLEN || len > rest.len() {
            break;
        }
        let hdr = Header {
            ty: u16::from_ne_bytes([rest[4], rest[5]]),
            flags: u16::from_ne_bytes([rest[6], rest[7]]),
            seq: u32::from_ne_bytes(rest[8..12].try_into().expect("4 bytes")),
        };
        out.push((hdr, &rest[NLMSG_HDRLEN..len]));
        rest = rest.get(len.next_multiple_of(4)..).unwrap_or(&[]);
    }
    out
}

/// `struct nlmsgerr`: errno (negative), the request's header (and, with CAP_ACK
/// off, its payload), then extended-ack attributes when `NLM_F_ACK_TLVS` is set.
fn parse_error(flags: u16, payload: &[u8]) -> Option<NlError> {
    let errno = -i32::from_ne_bytes(payload.get(0..4)?.try_into().ok()?);
    if errno == 0 {
        return None;
    }
    let mut text = None;
    if flags & F_ACK_TLVS != 0 {
        // With NETLINK_CAP_ACK the echoed request is its header only.
        let echoed = payload
            .get(4..8)
            .map(|l| u32::from_ne_bytes(l.try_into().expect("4 bytes")) as usize)
            .unwrap_or(0);
        let skip = 4 + if flags & 0x100 != 0 { NLMSG_HDRLEN } else { echoed.next_multiple_of(4) };
        if let Some(tlvs) = payload.get(skip..) {
            text = attrs(tlvs).find(|(t, _)| *t == NLMSGERR_ATTR_MSG).map(|(_, p)| {
                String::from_utf8_lossy(p.split(|b| *b == 0).next().unwrap_or(&[])).into_owned()
            });
        }
    }
    Some(NlError { index: 0, errno, text })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_are_padded_and_nested() {
        let mut m = Msg::tc(RTM_NEWQDISC, F_CREATE, 7, 0x10000, u32::MAX, 0);
        m.attr_str(1, "htb");
        let at = m.begin_nest(2);
        m.attr(2, &[1, 2, 3, 4, 5]);
        m.end_nest(at);
        m.finish(9);
        let a = m.attrs();
        // "htb\0" = 4 bytes + 4 header = 8; nest header 4 + inner (4 + 5 → 12 padded).
        assert_eq!(a.len(), 8 + 4 + 12);
        let v: Vec<_> = attrs(a).collect();
        assert_eq!(v[0], (1, &b"htb\0"[..]));
        assert_eq!(v[1].0, 2);
        // The nest's length covers its padded child.
        let inner: Vec<_> = attrs(v[1].1).collect();
        assert_eq!(inner, vec![(2, &[1u8, 2, 3, 4, 5][..])]);
        assert_eq!(u32::from_ne_bytes(m.buf[0..4].try_into().unwrap()) as usize, m.buf.len());
        assert_eq!(u32::from_ne_bytes(m.buf[8..12].try_into().unwrap()), 9);
        assert_eq!(u16::from_ne_bytes([m.buf[6], m.buf[7]]), F_CREATE | F_REQUEST);
        // tcmsg: ifindex 7, handle 1:0, parent root.
        assert_eq!(u32::from_ne_bytes(m.buf[20..24].try_into().unwrap()), 7);
        assert_eq!(u32::from_ne_bytes(m.buf[24..28].try_into().unwrap()), 0x10000);
        assert_eq!(u32::from_ne_bytes(m.buf[28..32].try_into().unwrap()), u32::MAX);
    }

    #[test]
    fn error_with_extended_ack_text() {
        // nlmsgerr: -EINVAL, capped echoed header (16 bytes), then NLMSGERR_ATTR_MSG.
        let mut p = (-22i32).to_ne_bytes().to_vec();
        p.extend_from_slice(&[0; 16]);
        p.extend_from_slice(&12u16.to_ne_bytes());
        p.extend_from_slice(&NLMSGERR_ATTR_MSG.to_ne_bytes());
        p.extend_from_slice(b"bad rate");
        let e = parse_error(F_ACK_TLVS | 0x100, &p).unwrap();
        assert_eq!(e.errno, 22);
        assert_eq!(e.text.as_deref(), Some("bad rate"));
        assert!(parse_error(0, &0i32.to_ne_bytes()).is_none(), "errno 0 is an acknowledgement");
    }

    #[test]
    fn malformed_attributes_stop_the_walk() {
        assert_eq!(attrs(&[200, 0, 1, 0, 0, 0]).count(), 0);
        assert_eq!(attrs(&[2, 0, 1, 0]).count(), 0);
    }
}
