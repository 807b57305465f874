//! Packet capture on the middlebox's interfaces with AF_PACKET (packet(7)), no libpcap.
//!
//! One `SOCK_DGRAM` socket per interface, bound to it, so the kernel strips the link
//! header whatever the device (Ethernet veth or a TUN's bare IP) and hands us IPv4
//! packets. Only packets *arriving* on an interface are taken
//! (`PACKET_IGNORE_OUTGOING`, Linux 4.20): a forwarded packet is seen once, on the
//! way in, and the direction follows from the interface — arriving on the uplink means
//! toward the clients, on the downlink toward the servers. Arrival on the uplink is
//! *before* the downlink's HTB queue, so the client half of a flow's RTT includes the
//! time the packet waits in the scheduler, which is what QDS controls.
//!
//! Only the first [`SNAP`] bytes of each packet are copied (headers; the payload is
//! never read), and the IP total length gives the size on the wire.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use pcap_file::DataLink;

use crate::ring::Ring;
use thinwan_capture::ip::{parse, Frame, TcpPacket};
pub use thinwan_proto::qds::monitor::Toward;

/// Bytes of each packet copied to user space: an IPv4 header with options (60) and a
/// TCP header with options (60).
pub const SNAP: usize = 128;
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
const ETH_P_IP: u16 = 0x0800;

/// A captured packet's headers: thinwan-capture's parser, the one `thinwan analyze`
/// uses on pcap files (link type RAW: the socket hands us bare IP).
pub fn parse_tcp(ip: &[u8]) -> Option<TcpPacket> {
    match parse(DataLink::RAW, ip) {
        Frame::Tcp(p) => Some(p),
        Frame::Other | Frame::UnknownLink => None,
    }
}

/// One packet read from a capture socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Captured {
    /// When the kernel received it, ns since the Unix epoch (the ring's `tp_sec`,
    /// `tp_nsec`); 0 if the kernel gave none.
    pub stamp_ns: u64,
    /// Its headers, `None` for a packet that is not TCP.
    pub tcp: Option<TcpPacket>,
}

/// A non-blocking AF_PACKET socket on one interface, read through a `TPACKET_V3` ring
/// ([`Ring`]): the kernel stamps each packet on arrival and hands packets over a block
/// at a time (when full, or [`crate::ring::BLOCK_TIMEOUT_MS`] after its first packet),
/// so the daemon wakes once per block instead of once per packet, copies nothing per
/// packet through a system call, and still knows when each packet arrived.
pub struct Capture {
    // Declared before fd: the ring is unmapped before the socket closes.
    ring: Ring,
    fd: OwnedFd,
    /// Direction of every packet this socket receives.
    pub dir: Toward,
}

impl Capture {
    /// Open a capture on interface `ifindex` whose arriving packets travel `dir`.
    pub fn open(ifindex: u32, dir: Toward) -> io::Result<Capture> {
        let proto = ETH_P_IP.to_be();
        // SAFETY: plain socket(2); checked below.
        let fd = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_DGRAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                libc::c_int::from(proto),
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        setsockopt(fd.as_raw_fd(), libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)?;
        snap(fd.as_raw_fd(), SNAP as u32)?;
        let ring = Ring::new(fd.as_raw_fd())?;
        // SAFETY: zeroed sockaddr_ll is valid; we fill family, protocol and ifindex.
        let mut sa: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sa.sll_family = libc::AF_PACKET as u16;
        sa.sll_protocol = proto;
        sa.sll_ifindex = ifindex as i32;
        // SAFETY: sa is a valid sockaddr_ll of the size given.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sa as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Capture { ring, fd, dir })
    }

    /// Append every packet the kernel has handed over to `out`; returns how many (0 when
    /// none is ready).
    pub fn recv_batch(&mut self, out: &mut Vec<Captured>) -> io::Result<usize> {
        Ok(self.ring.drain(|p| out.push(Captured { stamp_ns: p.stamp_ns, tcp: parse_tcp(p.data) })))
    }

    /// For poll(2).
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// A one-instruction classic BPF program, `ret #len`: the kernel copies only the first
/// `len` bytes of each packet into the ring (the headers; the payload is never read).
fn snap(fd: RawFd, len: u32) -> io::Result<()> {
    let prog = [libc::sock_filter { code: 0x06 /* BPF_RET | BPF_K */, jt: 0, jf: 0, k: len }];
    let fprog = libc::sock_fprog { len: 1, filter: prog.as_ptr().cast_mut() };
    // SAFETY: valid fd; fprog points to prog, which outlives the call (the kernel copies it).
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ATTACH_FILTER,
            (&fprog as *const libc::sock_fprog).cast(),
            std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Now, ns since the Unix epoch (the clock of the ring's packet timestamps).
pub fn realtime_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

fn setsockopt(fd: RawFd, level: libc::c_int, opt: libc::c_int, v: libc::c_int) -> io::Result<()> {
    // SAFETY: valid fd, pointer to a c_int of the given size.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            opt,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::{PacketBuilder, TcpOptionElement};

    #[test]
    fn headers_and_timestamps_are_read_payload_length_from_ip() {
        let b = PacketBuilder::ipv4([198, 18, 1, 1], [198, 18, 2, 1], 64)
            .tcp(5001, 40000, 1000, 65535)
            .ack(77)
            .options(&[TcpOptionElement::Timestamp(11, 22)])
            .unwrap();
        let mut v = Vec::new();
        b.write(&mut v, &[0u8; 1000]).unwrap();
        // Snap length: only the headers reach us.
        let t = parse_tcp(&v[..SNAP]).unwrap();
        assert_eq!((t.sport, t.dport, t.seq, t.ack), (5001, 40000, 1000, 77));
        assert!(t.flags.ack && !t.flags.syn);
        assert_eq!(t.ts, Some((11, 22)));
        assert_eq!(t.payload, 1000);
        assert_eq!(t.ip_len as usize, v.len());
    }

    #[test]
    fn not_tcp_is_none() {
        let b = PacketBuilder::ipv4([1, 1, 1, 1], [2, 2, 2, 2], 64).udp(1, 2);
        let mut v = Vec::new();
        b.write(&mut v, &[1, 2, 3]).unwrap();
        assert!(parse_tcp(&v).is_none());
        assert!(parse_tcp(&[0x45, 0]).is_none());
    }
}
