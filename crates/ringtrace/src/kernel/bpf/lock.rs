//! A BPF ring buffer map's one reader: the lock every consuming [`BpfRingBuf`] holds;
//! and a user ring buffer map's one producer process: the lock every [`UserRingBuf`]
//! holds, under the name `ringtrace-bpf-user-map-ID` (two processes reserving at once
//! would both write at the same producer position; the threads of one process share
//! a handle).
//!
//! The kernel keeps one consumer position per map and does not know who advances it:
//! two readers would each deliver some records and hand back the other's. So a reader
//! holds a lock on the map: a listening Unix socket bound to the abstract name
//! `ringtrace-bpf-map-ID` (see unix(7)). A map id is global, and so is that name for
//! every user: root's reader and another user's (one who may open the map: by id with
//! `CAP_SYS_ADMIN`, or through a pin it may read) take the same lock. An abstract name
//! is no file, so nobody can plant a link, a file or a directory where it is taken;
//! the kernel releases it when the reader is dropped, or its process exits or dies. A
//! second reader fails to bind the name and is refused with
//! [`KernelError::MapBusy`], naming the holder's pid and uid (the `SO_PEERCRED` of a
//! connection to it; the connection is never accepted). That holds within one process
//! too: a second handle consuming the same map is refused, naming its own process.
//!
//! What the lock does not cover:
//! - The abstract names are per network namespace: readers in different network
//!   namespaces (containers, `unshare -n`) take different locks and are not kept apart.
//! - A reader outside ringtrace (libbpf's `ring_buffer__poll`) takes no such lock and
//!   cannot be seen.
//! - Any local user may bind the name first and so keep ringtrace readers of that map
//!   out; the refusal then names that user's pid and uid.
//!
//! A refused reader outside the initial pid namespace is not told the holder's pid and
//! uid (see [`holder`]).
//!
//! A process that forks copies its descriptors, the lock's socket among them, and the
//! copy stays bound in the child until it execs (every descriptor std and this crate
//! open is close-on-exec) or exits: a handle dropped while another thread spawns a
//! child leaves the name bound for that moment, its `SO_PEERCRED` still this process's.
//! So a name bound by this process's own pid for a map none of its handles holds
//! ([`HELD`]) is such a copy: the reader waits for it to go, until [`CHILD_COPY_FOR`]
//! (a child that forked and never execs keeps it as long as it lives).
//!
//! [`BpfRingBuf`]: super::BpfRingBuf
//! [`UserRingBuf`]: super::UserRingBuf

use std::io::ErrorKind;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rustix::net::{AddressFamily, SocketAddrUnix, SocketFlags, SocketType};

use crate::error::KernelError;

/// How long a reader goes on binding the lock name while the holder it finds has just
/// gone (its name still bound a moment, or another reader in the middle of the same).
const RETRY_FOR: Duration = Duration::from_millis(200);

/// How long a reader waits for a copy of this process's own lock socket, left in a
/// child between its fork and its exec, to go (see the module's docs).
const CHILD_COPY_FOR: Duration = Duration::from_secs(2);

/// Which of a map's locks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    /// A ring buffer map's reader.
    Reader,
    /// A user ring buffer map's producer.
    Producer,
}

/// The locks a handle of this process holds (a lock once).
static HELD: Mutex<Vec<(Role, u32)>> = Mutex::new(Vec::new());

/// Whether a handle of this process holds map `id`'s lock of `role`.
fn held_here(role: Role, id: u32) -> bool {
    HELD.lock().unwrap_or_else(|e| e.into_inner()).contains(&(role, id))
}

/// A map's reader (or producer) lock, held until it is dropped (or the process exits).
#[derive(Debug)]
pub(crate) struct ReaderLock {
    role: Role,
    /// The map.
    id: u32,
    /// Bound to the map's lock name and listening, never accepting.
    _socket: UnixListener,
}

impl Drop for ReaderLock {
    /// Forgets the map in [`HELD`] before the socket closes (the fields drop after
    /// this): a reader of this process that finds the name still bound meanwhile takes
    /// it for a child's copy and waits for it to go.
    fn drop(&mut self) {
        let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = held.iter().position(|&h| h == (self.role, self.id)) {
            held.swap_remove(i);
        }
    }
}

/// The abstract socket name of a map's lock.
fn lock_name(role: Role, map_id: u32) -> String {
    match role {
        Role::Reader => format!("ringtrace-bpf-map-{map_id}"),
        Role::Producer => format!("ringtrace-bpf-user-map-{map_id}"),
    }
}

impl ReaderLock {
    /// Takes map `id`'s reader lock, or says who holds it.
    pub(crate) fn take(id: u32) -> Result<ReaderLock, KernelError> {
        Self::take_as(Role::Reader, id)
    }

    /// Takes map `id`'s lock of `role`, or says who holds it.
    pub(crate) fn take_as(role: Role, id: u32) -> Result<ReaderLock, KernelError> {
        let name = lock_name(role, id);
        let busy = |holder| match role {
            Role::Reader => KernelError::MapBusy { id, holder },
            Role::Producer => KernelError::ProducerBusy { id, holder },
        };
        let io = |source| KernelError::Io { what: "taking the map's reader lock (an abstract Unix socket)", source };
        let addr = SocketAddr::from_abstract_name(&name).map_err(io)?;
        // A holder may go between a bind that fails and the connection that asks who it
        // is: then bind again, until the deadline.
        let start = Instant::now();
        loop {
            match UnixListener::bind_addr(&addr) {
                Ok(socket) => {
                    HELD.lock().unwrap_or_else(|e| e.into_inner()).push((role, id));
                    return Ok(ReaderLock { role, id, _socket: socket });
                }
                Err(e) if e.kind() == ErrorKind::AddrInUse => match holder(&name) {
                    Holder::Gone if start.elapsed() < RETRY_FOR => std::thread::sleep(Duration::from_millis(2)),
                    // This process's own pid, and no handle of it holds the map: a
                    // child's copy of a socket it dropped (see the module's docs).
                    Holder::Known(pid, _)
                        if pid == std::process::id() && !held_here(role, id) && start.elapsed() < CHILD_COPY_FOR =>
                    {
                        std::thread::sleep(Duration::from_millis(2))
                    }
                    Holder::Gone | Holder::Unknown => return Err(busy(None)),
                    Holder::Known(pid, uid) => return Err(busy(Some((pid, uid)))),
                },
                Err(e) => return Err(io(e)),
            }
        }
    }
}

/// Who holds a lock name, as a connection to it tells.
enum Holder {
    /// Its pid and uid, as this process's namespaces number them.
    Known(u32, u32),
    /// The name is no longer bound.
    Gone,
    /// Bound, but who holds it cannot be told.
    Unknown,
}

/// Connects to the lock name and reads the listener's credentials (recorded by the
/// kernel when it started listening). The connection is non-blocking: a holder never
/// accepts, so the connections of refused readers stay queued on it until it exits,
/// and once its queue is full a blocking connect would wait for that.
fn holder(name: &str) -> Holder {
    let Ok(addr) = SocketAddrUnix::new_abstract_name(name.as_bytes()) else { return Holder::Unknown };
    let Ok(sock) = rustix::net::socket_with(
        AddressFamily::UNIX,
        SocketType::STREAM,
        SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
        None,
    ) else {
        return Holder::Unknown;
    };
    match rustix::net::connect(&sock, &addr) {
        Ok(()) => {}
        // Not bound any more (or bound by a socket that does not listen yet).
        Err(rustix::io::Errno::CONNREFUSED) => return Holder::Gone,
        Err(_) => return Holder::Unknown,
    }
    // SO_PEERCRED gives pid 0 for a process outside this one's pid namespace, and
    // rustix's `UCred` holds the pid as a non-zero `Pid`: it is asked only where every
    // process is visible, in the initial pid namespace.
    if !in_initial_pid_namespace() {
        return Holder::Unknown;
    }
    match rustix::net::sockopt::socket_peercred(&sock) {
        Ok(c) => Holder::Known(c.pid.as_raw_nonzero().get() as u32, c.uid.as_raw()),
        Err(_) => Holder::Unknown,
    }
}

/// Whether this process is in the initial pid namespace, whose inode number is fixed
/// (`PROC_PID_INIT_INO` of the kernel's `proc_ns.h`).
fn in_initial_pid_namespace() -> bool {
    std::fs::read_link("/proc/self/ns/pid").is_ok_and(|ns| ns.as_os_str() == "pid:[4026531836]")
}
