//! Attaching to an existing persistent TUN device (made by `ip tuntap add dev X mode tun`).
use std::os::fd::{FromRawFd, OwnedFd};

const TUNSETIFF: libc::c_ulong = 0x4004_54ca; // _IOW('T', 202, int)
const TUNGETIFF: libc::c_ulong = 0x8004_54d2; // _IOR('T', 210, unsigned int)
const IFF_TUN: libc::c_short = 0x0001;
const IFF_NO_PI: libc::c_short = 0x1000;
const IFF_PERSIST: libc::c_short = 0x0800;

#[repr(C)]
struct IfReq {
    name: [u8; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

fn last_error(what: &str) -> String {
    format!("{what}: {}", std::io::Error::last_os_error())
}

/// Opens TUN `name` as IFF_TUN | IFF_NO_PI (raw IP packets, no packet-info header). iproute2 makes
/// `mode tun` devices without `pi` (IFF_NO_PI) and without multi_queue, so these flags match; the
/// kernel refuses to attach if the device is a TAP or multi-queue, and we re-read the flags to be sure.
/// Non-blocking: a reader drains what is queued and then sleeps in ppoll (see pump.rs).
pub fn open(name: &str) -> Result<OwnedFd, String> {
    // TUNSETIFF would create a missing device (in whatever namespace we run in): attach only to an
    // existing one, so a wrong name or namespace fails instead of making a stray interface.
    let cname = std::ffi::CString::new(name).map_err(|_| format!("bad device name {name:?}"))?;
    if unsafe { libc::if_nametoindex(cname.as_ptr()) } == 0 {
        return Err(format!(
            "no device {name} in this network namespace (create it first with `ip tuntap add dev {name} mode tun`)"
        ));
    }
    let raw = unsafe {
        libc::open(
            c"/dev/net/tun".as_ptr(),
            libc::O_RDWR | libc::O_CLOEXEC | libc::O_NONBLOCK,
        )
    };
    if raw < 0 {
        return Err(last_error("open /dev/net/tun"));
    }
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let mut req = IfReq {
        name: [0; libc::IFNAMSIZ],
        flags: IFF_TUN | IFF_NO_PI,
        _pad: [0; 22],
    };
    req.name[..name.len()].copy_from_slice(name.as_bytes());
    if unsafe { libc::ioctl(raw, TUNSETIFF, &mut req as *mut IfReq) } < 0 {
        return Err(last_error(&format!(
            "TUNSETIFF {name} (is it a `mode tun` device without multi_queue?)"
        )));
    }
    let mut got = IfReq {
        name: [0; libc::IFNAMSIZ],
        flags: 0,
        _pad: [0; 22],
    };
    if unsafe { libc::ioctl(raw, TUNGETIFF, &mut got as *mut IfReq) } < 0 {
        return Err(last_error(&format!("TUNGETIFF {name}")));
    }
    if got.flags & (IFF_TUN | IFF_NO_PI) != IFF_TUN | IFF_NO_PI {
        return Err(format!("{name}: unexpected TUN flags {:#x}", got.flags));
    }
    if got.flags & IFF_PERSIST == 0 {
        return Err(format!(
            "{name}: not a persistent TUN device (made by `ip tuntap add`)"
        ));
    }
    Ok(fd)
}
