//! Opening a BPF map by the path it is pinned at, by its id, or from a descriptor: the
//! descriptor and what kind of map it is, with the errors a caller can act on. Both
//! the ring buffer reader and the user ring buffer producer open maps this way.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::Path;

use super::error::is_permission;
use super::sys::{self, MapInfo};
use crate::error::KernelError;

/// The map pinned at `path` in a bpffs.
pub(super) fn pinned(path: &Path) -> Result<OwnedFd, KernelError> {
    sys::obj_get(path).map_err(|source| {
        if is_permission(&source) {
            KernelError::Permission {
                what: format!("opening pinned map {}", path.display()),
                needs: "CAP_BPF and access to the bpffs path",
                source,
            }
        } else {
            KernelError::NotPinned { path: path.to_path_buf(), source }
        }
    })
}

/// The map of id `id` (as `bpftool map` lists them).
pub(super) fn by_id(id: u32) -> Result<OwnedFd, KernelError> {
    sys::map_get_fd_by_id(id).map_err(|source| match source.raw_os_error() {
        Some(libc::ENOENT) => KernelError::NoSuchMap { id },
        _ if is_permission(&source) => KernelError::Permission {
            what: format!("opening map id {id}"),
            // BPF_MAP_GET_FD_BY_ID checks CAP_SYS_ADMIN, not CAP_BPF.
            needs: "CAP_SYS_ADMIN (opening a map by id)",
            source,
        },
        _ => KernelError::Io { what: "opening a map by id (BPF_MAP_GET_FD_BY_ID)", source },
    })
}

/// What map `fd` is; [`KernelError::NotAMap`] if it is none.
pub(super) fn info(fd: &OwnedFd) -> Result<MapInfo, KernelError> {
    let raw = fd.as_raw_fd();
    let link = std::fs::read_link(format!("/proc/self/fd/{raw}")).map(|p| p.display().to_string());
    match &link {
        Ok(l) if l == "anon_inode:bpf-map" => {}
        Ok(l) => return Err(KernelError::NotAMap { fd: raw, what: l.clone() }),
        // No /proc: let the kernel tell.
        Err(_) => {}
    }
    sys::map_info(fd.as_fd()).map_err(|source| match source.raw_os_error() {
        Some(libc::EINVAL) | Some(libc::EBADF) => {
            KernelError::NotAMap { fd: raw, what: link.unwrap_or_else(|_| "not a BPF object".into()) }
        }
        _ if is_permission(&source) => {
            KernelError::Permission { what: "reading the map's info".into(), needs: "CAP_BPF", source }
        }
        _ => KernelError::Io { what: "reading the map's info (BPF_OBJ_GET_INFO_BY_FD)", source },
    })
}

/// A ring's data size as the kernel makes them: a power of two and a multiple of the
/// page size.
pub(super) fn check_size(size: u32) -> Result<(), KernelError> {
    let page = rustix::param::page_size() as u64;
    if !size.is_power_of_two() || (size as u64) % page != 0 {
        return Err(KernelError::BadSize { size });
    }
    Ok(())
}
