//! The sleep of a user-space ring's consumers: announce the wait, then sleep on the
//! doorbell, until a record is ready.

use std::io;
use std::time::{Duration, Instant};

use crate::protocol::core::Core;
use crate::region::mmap::MmapView;

/// The wait loop of both consumers of a user-space ring: until `ready`, announce the
/// wait at `at` (the position the consumer's wait word names) and sleep on the
/// doorbell, at most until `timeout`. The caller disarms afterwards (`armed` says
/// whether it must).
pub(crate) fn sleep_until_ready(
    core: &Core<MmapView>,
    at: u64,
    timeout: Option<Duration>,
    armed: &mut bool,
    ready: impl Fn(&Core<MmapView>) -> bool,
) -> io::Result<bool> {
    let deadline = timeout.map(|t| Instant::now() + t);
    loop {
        if ready(core) {
            return Ok(true);
        }
        let token = core.region.prepare_sleep()?;
        *armed = true;
        *armed = core.arm(at)?;
        if !*armed {
            continue; // a record arrived, or a producer rang: look again
        }
        // Once more after the barrier in `arm`: what `ready` looks at besides the
        // record (whether every producer is gone) pairs with that barrier too.
        if ready(core) {
            return Ok(true);
        }
        let left = match deadline {
            None => None,
            Some(d) => match d.checked_duration_since(Instant::now()) {
                Some(left) if !left.is_zero() => Some(left),
                _ => return Ok(ready(core)),
            },
        };
        core.region.sleep(token, left)?;
    }
}

/// Prepares a consumer to wait on its descriptor (an event loop's wait): in a ring
/// shared between processes, names the socket doorbell the descriptor is; resets the
/// doorbell; announces the wait at `at` and looks again (`ready` too, after the
/// barrier). `Ok(true)`: wait on the descriptor. `Ok(false)`: something is ready (or
/// every producer is gone): read first; the caller disarms (`armed` says whether).
pub(crate) fn arm_for_fd(
    core: &Core<MmapView>,
    at: u64,
    armed: &mut bool,
    ready: impl Fn(&Core<MmapView>) -> bool,
) -> io::Result<bool> {
    if core.region.is_futex() {
        core.region.use_socket()?;
    }
    core.region.prepare_sleep()?;
    *armed = true;
    *armed = core.arm(at)?;
    Ok(*armed && !ready(core))
}
