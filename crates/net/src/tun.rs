//! TUN devices, attached inside a network namespace.
//!
//! The lab creates persistent TUN devices inside the side namespaces (`ip tuntap add`)
//! and configures their addresses; the emulator (in the root namespace) attaches to
//! them by entering each namespace just for the `open` + `TUNSETIFF`. The file
//! descriptor stays bound to the device after we leave the namespace, so one process
//! bridges two namespaces without a middle one.

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;

const TUNSETIFF: libc::c_ulong = 0x4004_54ca; // _IOW('T', 202, int)
const IFF_TUN: libc::c_short = 0x0001;
const IFF_NO_PI: libc::c_short = 0x1000;

/// `struct ifreq` with only the fields TUNSETIFF uses.
#[repr(C)]
struct IfReq {
    name: [u8; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

/// An attached TUN device: reads and writes bare IP packets.
#[derive(Debug)]
pub struct Tun {
    fd: OwnedFd,
    name: String,
}

impl Tun {
    /// Attach to (or create) TUN device `name`, inside namespace `netns` (a name under
    /// /run/netns or a path) when given. The fd is non-blocking.
    pub fn attach(name: &str, netns: Option<&str>) -> io::Result<Tun> {
        let _guard = match netns {
            Some(ns) => Some(NetnsGuard::enter(ns)?),
            None => None,
        };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open("/dev/net/tun")?;
        let mut req = IfReq { name: [0; libc::IFNAMSIZ], flags: IFF_TUN | IFF_NO_PI, _pad: [0; 22] };
        let bytes = name.as_bytes();
        if bytes.is_empty() || bytes.len() >= libc::IFNAMSIZ {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("bad interface name {name:?}")));
        }
        req.name[..bytes.len()].copy_from_slice(bytes);
        // SAFETY: TUNSETIFF reads/writes one ifreq, which `req` is (layout-compatible prefix, full size).
        let rc = unsafe { libc::ioctl(file.as_raw_fd(), TUNSETIFF as _, &mut req) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(e.kind(), format!("TUNSETIFF {name} (netns {netns:?}): {e}")));
        }
        Ok(Tun { fd: OwnedFd::from(file), name: name.to_string() })
    }

    /// Interface name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Read one packet (non-blocking: `WouldBlock` when none is queued).
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        // SAFETY: buf is valid for buf.len() bytes.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n as usize)
    }

    /// Write one packet.
    pub fn send(&self, pkt: &[u8]) -> io::Result<usize> {
        // SAFETY: pkt is valid for pkt.len() bytes.
        let n = unsafe { libc::write(self.fd.as_raw_fd(), pkt.as_ptr().cast(), pkt.len()) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n as usize)
    }
}

impl AsRawFd for Tun {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// Inside a network namespace until dropped (calling thread only).
struct NetnsGuard {
    home: File,
}

impl NetnsGuard {
    fn enter(ns: &str) -> io::Result<Self> {
        let home = File::open("/proc/thread-self/ns/net")?;
        let path = if ns.contains('/') { ns.to_string() } else { format!("/run/netns/{ns}") };
        let target = File::open(&path).map_err(|e| io::Error::new(e.kind(), format!("netns {path}: {e}")))?;
        setns(target.as_raw_fd())?;
        Ok(NetnsGuard { home })
    }
}

impl Drop for NetnsGuard {
    fn drop(&mut self) {
        // Returning to the namespace we came from cannot fail short of a kernel bug;
        // if it did, the thread would stay in the side namespace, which is harmless
        // for the emulator (it only uses already-open fds afterwards).
        let _ = setns(self.home.as_raw_fd());
    }
}

fn setns(fd: RawFd) -> io::Result<()> {
    // SAFETY: plain syscall on a valid namespace fd.
    if unsafe { libc::setns(fd, libc::CLONE_NEWNET) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Is `name` usable as an interface name?
pub fn valid_ifname(name: &str) -> bool {
    !name.is_empty() && name.len() < libc::IFNAMSIZ && CString::new(name).is_ok() && !name.contains('/')
}
