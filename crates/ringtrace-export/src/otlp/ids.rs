//! The ids of OTLP spans made of `tracing` spans: stable hashes, the same from run to
//! run and build to build, so that exporting the same spans twice under the same names
//! gives the same ids. A trace's conversion ([`convert`](super::convert)) and a fleet's
//! (`ringtrace_ship::fleet::export`) make them alike.
//!
//! ```
//! use ringtrace_export::otlp::ids;
//!
//! let origin = ids::origin(4242, "web-1", "api");
//! let mut used = std::collections::HashSet::new();
//! let a = ids::span_id(origin, 1, 1_000, |h| !used.insert(h));
//! let b = ids::span_id(origin, 1, 1_000, |h| !used.insert(h));
//! assert_ne!(a, b, "a hash taken is hashed again");
//! assert_eq!(ids::trace_id(origin, a).len(), 16);
//! ```

/// A stable 64-bit hash (FNV-1a): ids must be the same from run to run and build to
/// build, which the standard library's hashers do not promise.
fn fnv(parts: &[u64], seed: u64) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ seed;
    for p in parts {
        for b in p.to_le_bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

/// A nonzero 64-bit span id of `tracing` span `id` that started at `start_ns` in the
/// process `origin` names ([`origin`]). A hash that is zero or `taken` (which says
/// whether it is, and takes it if not) is hashed again with a count.
pub fn span_id(origin: u64, id: u64, start_ns: u64, mut taken: impl FnMut(u64) -> bool) -> u64 {
    let mut h = fnv(&[origin, id, start_ns], 1);
    let mut tries = 0u64;
    while h == 0 || taken(h) {
        tries += 1;
        h = fnv(&[origin, id, start_ns, tries], 4);
    }
    h
}

/// A 16-byte trace id of the trace whose root's span id is `root` (both halves nonzero).
pub fn trace_id(origin: u64, root: u64) -> Vec<u8> {
    let (a, b) = (fnv(&[origin, root], 2), fnv(&[origin, root], 3));
    let mut id = a.max(1).to_be_bytes().to_vec();
    id.extend_from_slice(&b.max(1).to_be_bytes());
    id
}

/// What the ids of a process's spans are made from besides the spans: its process id
/// (0 where not known), and the host and service names they are exported under, so
/// that the same spans exported twice under the same names get the same ids, and
/// under other names (another host's process of the same pid) other ones.
pub fn origin(pid: u32, host: &str, service: &str) -> u64 {
    let mut parts = vec![u64::from(pid)];
    for s in [host, service] {
        parts.push(s.len() as u64);
        parts.extend(s.as_bytes().chunks(8).map(|c| {
            let mut b = [0u8; 8];
            b[..c.len()].copy_from_slice(c);
            u64::from_le_bytes(b)
        }));
    }
    fnv(&parts, 5)
}
