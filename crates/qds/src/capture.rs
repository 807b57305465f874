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

/// Packets read per `recvmmsg(2)` call.
pub const BATCH: usize = 64;
/// Room for one `SCM_TIMESTAMPNS` control message (`CMSG_SPACE(sizeof(timespec))`).
const CMSG_ROOM: usize = 64;

/// One packet read from a capture socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Captured {
    /// When the kernel received it, ns since the Unix epoch (`SO_TIMESTAMPNS`); 0 if the
    /// kernel gave none.
    pub stamp_ns: u64,
    /// Its headers, `None` for a packet that is not TCP.
    pub tcp: Option<TcpPacket>,
}

/// A non-blocking AF_PACKET socket on one interface.
///
/// Read in batches (`recvmmsg`, up to [`BATCH`] packets per system call) with the
/// kernel's receive timestamp on each packet, so the daemon can let packets gather for
/// a millisecond between reads (one wake-up per batch, not per packet) without losing
/// timing precision: a packet's time is when it arrived, not when it was read.
pub struct Capture {
    fd: OwnedFd,
    /// Direction of every packet this socket receives.
    pub dir: Toward,
    bufs: Box<[[u8; SNAP]; BATCH]>,
    cmsgs: Box<[[u8; CMSG_ROOM]; BATCH]>,
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
        setsockopt(fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1)?;
        // A burst of ~100 ms at 1 Gbit/s while an update is written: room for it.
        setsockopt(fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF, 8 << 20)?;
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
        Ok(Capture { fd, dir, bufs: Box::new([[0; SNAP]; BATCH]), cmsgs: Box::new([[0; CMSG_ROOM]; BATCH]) })
    }

    /// Append the queued packets (at most [`BATCH`]) to `out`; returns how many were
    /// read, 0 when none is queued.
    pub fn recv_batch(&mut self, out: &mut Vec<Captured>) -> io::Result<usize> {
        // SAFETY: zeroed iovec/msghdr/mmsghdr are valid; every pointer set below points
        // into self.bufs / self.cmsgs / iov, which outlive the call.
        let mut iov: [libc::iovec; BATCH] = unsafe { std::mem::zeroed() };
        let mut msgs: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
        for i in 0..BATCH {
            iov[i] = libc::iovec { iov_base: self.bufs[i].as_mut_ptr().cast(), iov_len: SNAP };
            msgs[i].msg_hdr.msg_iov = &mut iov[i];
            msgs[i].msg_hdr.msg_iovlen = 1;
            msgs[i].msg_hdr.msg_control = self.cmsgs[i].as_mut_ptr().cast();
            msgs[i].msg_hdr.msg_controllen = CMSG_ROOM as _;
        }
        // SAFETY: msgs is a valid array of BATCH mmsghdr set up above.
        let n = unsafe {
            libc::recvmmsg(
                self.fd.as_raw_fd(),
                msgs.as_mut_ptr(),
                BATCH as u32,
                libc::MSG_DONTWAIT | libc::MSG_TRUNC,
                std::ptr::null_mut(),
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            // An interface that goes down (ENETDOWN) comes back: nothing to read until then.
            return match e.raw_os_error() {
                Some(libc::EAGAIN | libc::EINTR | libc::ENETDOWN) => Ok(0),
                _ => Err(e),
            };
        }
        let n = n as usize;
        for (i, m) in msgs.iter().enumerate().take(n) {
            let len = (m.msg_len as usize).min(SNAP);
            out.push(Captured { stamp_ns: stamp(&m.msg_hdr), tcp: parse_tcp(&self.bufs[i][..len]) });
        }
        Ok(n)
    }

    /// For poll(2).
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// The `SCM_TIMESTAMPNS` of a received message, ns since the epoch (0 if absent).
fn stamp(h: &libc::msghdr) -> u64 {
    // SAFETY: h was filled by recvmmsg; the CMSG_* macros walk its control buffer
    // within msg_controllen.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(h);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                return ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64;
            }
            c = libc::CMSG_NXTHDR(h, c);
        }
    }
    0
}

/// Now, ns since the Unix epoch (the clock of `SO_TIMESTAMPNS`).
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
