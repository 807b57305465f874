//! A `PACKET_MMAP` receive ring, `TPACKET_V3` (packet(7), kernel
//! `Documentation/networking/packet_mmap.rst`): the kernel writes captured packets into
//! blocks of memory shared with us and hands over a whole block when it is full or its
//! timer ([`BLOCK_TIMEOUT_MS`]) expires — no system call and no copy per packet, one
//! wake-up per block.
//!
//! Protocol: a block whose `block_status` has `TP_STATUS_USER` is ours; we read its
//! packets (`num_pkts`, the first at `offset_to_first_pkt`, each header giving the
//! offset of the next) and give it back by writing `TP_STATUS_KERNEL`. Blocks are used
//! in order, so we keep the index of the next one.

use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU32, Ordering};

/// Bytes per block.
const BLOCK_SIZE: u32 = 1 << 20;
/// Blocks in the ring: 8 MiB, about 100 ms of 1 Gbit/s traffic at the snap length.
const BLOCK_NR: u32 = 8;
/// Frame size (V3 packs packets of any size into blocks; the kernel still checks it).
const FRAME_SIZE: u32 = 2048;
/// A block is handed over at the latest this long after its first packet: the time a
/// packet may wait before the daemon sees it. Its timestamp is the kernel's anyway, and
/// decisions come every 100 ms, so a few ms cost nothing; each wake-up costs system time
/// (1 ms: 1.9 % of a core at 12.7 k packets/s; 10 ms: see docs/qds-lab.md).
pub const BLOCK_TIMEOUT_MS: u32 = 10;
const TPACKET_V3: libc::c_int = 2;
const TP_STATUS_USER: u32 = 1;
const TP_STATUS_KERNEL: u32 = 0;

// struct tpacket_block_desc: version, offset_to_priv, then tpacket_hdr_v1 { block_status,
// num_pkts, offset_to_first_pkt, … }.
const BD_STATUS: usize = 8;
const BD_NUM_PKTS: usize = 12;
const BD_FIRST: usize = 16;
// struct tpacket3_hdr: tp_next_offset, tp_sec, tp_nsec, tp_snaplen, tp_len, tp_status,
// tp_mac (u16), tp_net (u16), …
const PH_NEXT: usize = 0;
const PH_SEC: usize = 4;
const PH_NSEC: usize = 8;
const PH_SNAPLEN: usize = 12;
const PH_NET: usize = 26;

/// The mapped ring of one socket.
pub struct Ring {
    base: *mut u8,
    len: usize,
    next: u32,
}

// SAFETY: the mapping is owned by this value alone and used from one thread at a time.
unsafe impl Send for Ring {}

/// One packet in the ring: the kernel's receive time (ns since the epoch) and its bytes
/// from the network header (at most the snap length).
pub struct RingPacket<'a> {
    /// `tp_sec`, `tp_nsec`.
    pub stamp_ns: u64,
    /// From the IP header on.
    pub data: &'a [u8],
}

impl Ring {
    /// Set up and map a ring on the AF_PACKET socket `fd` (before it is bound).
    pub fn new(fd: RawFd) -> io::Result<Ring> {
        setsockopt(fd, libc::SOL_PACKET, libc::PACKET_VERSION, &TPACKET_V3.to_ne_bytes())?;
        // struct tpacket_req3.
        let req: [u32; 7] =
            [BLOCK_SIZE, BLOCK_NR, FRAME_SIZE, BLOCK_SIZE / FRAME_SIZE * BLOCK_NR, BLOCK_TIMEOUT_MS, 0, 0];
        let bytes: Vec<u8> = req.iter().flat_map(|x| x.to_ne_bytes()).collect();
        setsockopt(fd, libc::SOL_PACKET, libc::PACKET_RX_RING, &bytes)?;
        let len = (BLOCK_SIZE * BLOCK_NR) as usize;
        // SAFETY: mapping the socket's ring as packet(7) describes; checked below.
        let base = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0)
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Ring { base: base.cast(), len, next: 0 })
    }

    /// Hand every packet of every block the kernel has handed over to `each`, in order,
    /// and give the blocks back; returns how many packets.
    pub fn drain(&mut self, mut each: impl FnMut(RingPacket<'_>)) -> usize {
        let mut n = 0;
        loop {
            // SAFETY: `next < BLOCK_NR`, so the block lies inside the mapping.
            let block = unsafe { self.base.add((self.next * BLOCK_SIZE) as usize) };
            let status = self.status(block);
            if status.load(Ordering::Acquire) & TP_STATUS_USER == 0 {
                return n;
            }
            // SAFETY: the block is ours until we write TP_STATUS_KERNEL; its bytes are
            // inside the mapping.
            let bytes = unsafe { std::slice::from_raw_parts(block, BLOCK_SIZE as usize) };
            let count = read_u32(bytes, BD_NUM_PKTS);
            let mut off = read_u32(bytes, BD_FIRST) as usize;
            for _ in 0..count {
                let Some(h) = bytes.get(off..off + 32) else { break };
                let (net, snap) = (read_u16(h, PH_NET) as usize, read_u32(h, PH_SNAPLEN) as usize);
                let stamp_ns =
                    u64::from(read_u32(h, PH_SEC)) * 1_000_000_000 + u64::from(read_u32(h, PH_NSEC));
                if let Some(data) = bytes.get(off + net..off + net + snap) {
                    each(RingPacket { stamp_ns, data });
                    n += 1;
                }
                let step = read_u32(h, PH_NEXT) as usize;
                if step == 0 {
                    break;
                }
                off += step;
            }
            status.store(TP_STATUS_KERNEL, Ordering::Release);
            self.next = (self.next + 1) % BLOCK_NR;
        }
    }

    fn status(&self, block: *mut u8) -> &AtomicU32 {
        // SAFETY: block_status is a 4-byte-aligned u32 at offset 8 of the block, shared
        // with the kernel: accessed atomically.
        unsafe { &*(block.add(BD_STATUS) as *const AtomicU32) }
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what new() mapped.
        unsafe {
            libc::munmap(self.base.cast(), self.len);
        }
    }
}

fn read_u32(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn read_u16(b: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes(b[at..at + 2].try_into().expect("2 bytes"))
}

fn setsockopt(fd: RawFd, level: libc::c_int, opt: libc::c_int, v: &[u8]) -> io::Result<()> {
    // SAFETY: valid fd, pointer to v's bytes of the given length.
    let r = unsafe { libc::setsockopt(fd, level, opt, v.as_ptr().cast(), v.len() as libc::socklen_t) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
